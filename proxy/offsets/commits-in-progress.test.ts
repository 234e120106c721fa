import { describe, expect, test } from 'vitest';
import { CommitsInProgress } from './commits-in-progress.js';

describe('CommitsInProgress', () => {
  test('a commit is contended while one of its group read earlier is held', () => {
    const held = new CommitsInProgress();
    held.hold('g', 5);
    expect(held.contended('g', 5)).toBe(false);
    expect(held.contended('g', 3)).toBe(false);
    held.hold('g', 7);
    expect(held.contended('g', 7)).toBe(true);
    expect(held.contended('h', 7)).toBe(false);
    held.release('g', 5);
    expect(held.contended('g', 7)).toBe(false);
    held.release('g', 7);
    held.release('g', 7);
    expect(held.size).toBe(0);
  });
});
