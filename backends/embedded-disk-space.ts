/**
 * What a failed write transaction's message says about the disk. LMDB reports a write that the
 * file system cut short as EIO ("short write, filesystem full?" in mdb.c), not ENOSPC: when a
 * disk fills in the middle of a transaction's pages the operator would read "Input/output error"
 * and look for a broken disk. The free space of the store's file system, read when a write
 * fails, tells which it is.
 */
import { statfs } from 'node:fs/promises';

/** Below this much room for an unprivileged writer a file system counts as full (a commit writes several pages). */
export const FULL_BELOW_BYTES = 1 << 20;

export type FreeBytes = (dir: string) => Promise<number>;

const freeBytes: FreeBytes = async (dir) => {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
};

/**
 * `why` with the file system's state added when it is full and `why` does not already say so.
 * A statfs that fails leaves `why` as it is: the write's own reason is never hidden.
 */
export async function withDiskSpace(dir: string, why: string, free: FreeBytes = freeBytes): Promise<string> {
  if (/ENOSPC|no space left/i.test(why)) return why;
  let bytes: number;
  try {
    bytes = await free(dir);
  } catch {
    return why;
  }
  if (bytes >= FULL_BELOW_BYTES) return why;
  return `${why} (the file system of ${dir} is full: ${bytes} bytes free; LMDB reports a write cut short by a full disk as an I/O error)`;
}
