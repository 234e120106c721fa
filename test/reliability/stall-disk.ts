// A FUSE loopback mount whose writes stall on command (stall-fs.py), for the embedded store's
// disk-stall run. Needs root, /dev/fuse, python3-fusepy and libfuse2: a failed mount throws.
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep } from './commit-checker.js';

const script = join(dirname(fileURLToPath(import.meta.url)), 'stall-fs.py');

export class StallDisk {
  private constructor(
    readonly path: string,
    private readonly root: string,
    private readonly control: string,
    private readonly daemon: ChildProcess,
  ) {}

  /**
   * `backing`: the directory the mount shows (created if missing), for a caller that wants it on a
   * file system of its own (the chaos run's tmpfs, to fill it); by default one beside the mount.
   */
  static async mount(opts: { backing?: string } = {}): Promise<StallDisk> {
    const root = mkdtempSync(join(tmpdir(), 'kop-disk-stall-'));
    const [path, control] = ['mnt', 'stalled'].map((n) => join(root, n)) as [string, string];
    const backing = opts.backing ?? join(root, 'backing');
    for (const dir of [backing, path]) mkdirSync(dir, { recursive: true });
    // The distribution's python: fusepy is a Debian package, not in a pyenv's site-packages.
    const daemon = spawn('/usr/bin/python3', [script, backing, path, control], {
      stdio: ['ignore', 'inherit', 'pipe'],
    });
    let err = '';
    daemon.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    for (let i = 0; i < 100; i++) {
      if (readFileSync('/proc/mounts', 'utf8').includes(` ${path} fuse`))
        return new StallDisk(path, root, control, daemon);
      if (daemon.exitCode !== null) break;
      await sleep(50);
    }
    daemon.kill('SIGKILL');
    throw new Error(
      `the FUSE stall mount at ${path} did not come up (needs root, /dev/fuse, python3-fusepy, libfuse2): ${err.trim()}`,
    );
  }

  /** From now on every write, fsync, flush and truncate under the mount waits. */
  stall(): void {
    writeFileSync(this.control, '');
  }

  release(): void {
    rmSync(this.control, { force: true });
  }

  unmount(): void {
    this.release();
    spawnSync('umount', ['-l', this.path]);
    this.daemon.kill('SIGTERM');
    rmSync(this.root, { recursive: true, force: true });
  }
}
