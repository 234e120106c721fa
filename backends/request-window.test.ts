import { describe, expect, test } from 'vitest';
import { RequestWindow } from './request-window.js';

const tick = () => new Promise((r) => setImmediate(r));

describe('RequestWindow', () => {
  test('never more than its size outstanding; the others start in order as slots free', async () => {
    const window = new RequestWindow(3);
    let outstanding = 0;
    let most = 0;
    const started: number[] = [];
    const finish: (() => void)[] = [];
    const all = Array.from({ length: 3000 }, (_, i) =>
      window.run(async () => {
        started.push(i);
        most = Math.max(most, ++outstanding);
        await new Promise<void>((r) => finish.push(r));
        outstanding--;
        return i;
      }),
    );
    await tick();
    expect(started).toEqual([0, 1, 2]);
    while (finish.length > 0) {
      finish.shift()!();
      await tick();
    }
    expect(await Promise.all(all)).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    expect(most).toBe(3);
    expect(started).toEqual(Array.from({ length: 3000 }, (_, i) => i));
  });

  test('a failed request frees its slot and rejects its caller only', async () => {
    const window = new RequestWindow(1);
    const failed = window.run(() => Promise.reject(new Error('boom')));
    const next = window.run(async () => 'ok');
    await expect(failed).rejects.toThrow('boom');
    expect(await next).toBe('ok');
  });

  test('refuses a size that is not a positive integer', () => {
    expect(() => new RequestWindow(0)).toThrow(/positive integer/);
    expect(() => new RequestWindow(1.5)).toThrow(/positive integer/);
  });
});
