import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FULL_BELOW_BYTES, withDiskSpace } from './embedded-disk-space.js';

const dir = mkdtempSync(join(tmpdir(), 'kop-disk-space-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('withDiskSpace: a failed write names a full file system', () => {
  it('adds the free bytes to an I/O error when the file system is full', async () => {
    const why = await withDiskSpace(dir, 'Input/output error', async () => 4096);
    expect(why).toBe(
      `Input/output error (the file system of ${dir} is full: 4096 bytes free;` +
        ' LMDB reports a write cut short by a full disk as an I/O error)',
    );
  });

  it('leaves the reason alone when there is room, or the reason already names the full disk', async () => {
    expect(await withDiskSpace(dir, 'Input/output error', async () => FULL_BELOW_BYTES)).toBe(
      'Input/output error',
    );
    expect(await withDiskSpace(dir, 'ENOSPC: no space left on device', async () => 0)).toBe(
      'ENOSPC: no space left on device',
    );
  });

  it('leaves the reason alone when the file system cannot be read', async () => {
    expect(await withDiskSpace(join(dir, 'gone'), 'Input/output error')).toBe('Input/output error');
  });

  it('reads the real file system by default', async () => {
    // The scratch directory's disk has room: nothing is added.
    expect(await withDiskSpace(dir, 'Input/output error')).toBe('Input/output error');
  });
});
