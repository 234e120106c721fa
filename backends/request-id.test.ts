import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { issuedAt, newRequestId, timeOrderedIdBytes } from './request-id.js';

describe('time-ordered request ids', () => {
  it('are unique and sort in the order they were issued', () => {
    const ids = Array.from({ length: 20_000 }, newRequestId);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    const keys = ids.map((id) => timeOrderedIdBytes(id)!);
    expect(keys.every((k, i) => i === 0 || Buffer.compare(keys[i - 1]!, k) < 0)).toBe(true);
  });

  it('carry their issue time in their first 6 bytes', () => {
    const before = Date.now();
    const id = newRequestId();
    const at = issuedAt(timeOrderedIdBytes(id)!);
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(Date.now());
  });

  it('differ between processes: the middle part is drawn per process', async () => {
    const { execFileSync } = await import('node:child_process');
    const script = `import('${new URL('./request-id.ts', import.meta.url).pathname}').then((m) => console.log(m.newRequestId()))`;
    const other = execFileSync(process.execPath, ['--import', 'tsx', '-e', script], {
      encoding: 'utf8',
    }).trim();
    expect(timeOrderedIdBytes(other)).toBeDefined();
    expect(other.slice(12, 24)).not.toBe(newRequestId().slice(12, 24));
  });

  it('other ids are not taken for time-ordered ones', () => {
    for (const id of [
      randomUUID(),
      'admin-set-x',
      '',
      'r1',
      newRequestId().toUpperCase(),
      `${newRequestId()}0`,
    ])
      expect(timeOrderedIdBytes(id)).toBeUndefined();
  });
});
