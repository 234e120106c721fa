// A small tmpfs to fill to the last page, for the disk-full tests of the embedded store. Needs root
// for `mount -t tmpfs` (CI runs as root): a failed mount throws, it never skips a test.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export class SmallDisk {
  private constructor(
    readonly path: string,
    readonly sizeMb: number,
  ) {}

  static mount(sizeMb: number): SmallDisk {
    const path = mkdtempSync(join(tmpdir(), 'kop-disk-full-'));
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m`, 'tmpfs', path], {
      encoding: 'utf8',
    });
    if (mounted.status !== 0) {
      rmSync(path, { recursive: true, force: true });
      throw new Error(
        `this test needs a small tmpfs: "mount -t tmpfs -o size=${sizeMb}m tmpfs ${path}" failed ` +
          `(${mounted.stderr.trim() || `exit ${mounted.status}`}); run it as root, as CI does`,
      );
    }
    return new SmallDisk(path, sizeMb);
  }

  /** Fills the file system with one file until ENOSPC, then page by page; returns the big file's path. */
  fill(): string {
    const file = join(this.path, 'filler');
    const chunk = Buffer.alloc(256 * 1024, 1);
    const parts: Buffer[] = [];
    for (let i = 0; i < this.sizeMb * 4 + 8; i++) parts.push(chunk);
    try {
      writeFileSync(file, Buffer.concat(parts));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
    }
    // Whatever the big write left (the file system rounds to pages): fill it page by page.
    for (let i = 0; i < 1024; i++) {
      try {
        writeFileSync(join(this.path, `filler-${i}`), Buffer.alloc(4096, 1));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
        throw err;
      }
    }
    return file;
  }

  /** Removes what fill() wrote. */
  free(): void {
    spawnSync('sh', ['-c', `rm -f ${this.path}/filler*`]);
  }

  unmount(): void {
    spawnSync('umount', ['-l', this.path]);
    rmSync(this.path, { recursive: true, force: true });
  }
}
