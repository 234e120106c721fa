/**
 * Two ways a proxy's descriptors run out, for reliability-descriptors.test.ts:
 * - its own limit (EMFILE): RLIMIT_NOFILE of the running process lowered with prlimit;
 * - the system's file table (ENFILE): fs.file-max lowered below the files open. The kernel holds
 *   only processes without CAP_SYS_ADMIN to it (alloc_empty_file), so the proxy is started
 *   without that capability (setpriv) and everything else (the broker, Redis, the test) keeps
 *   opening files. Needs root, as CI runs; a failed write throws, it never skips.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { nofileOf } from './limits-helpers.js';

export interface Exhaustion {
  /** The errno the proxy's failed calls see. */
  code: 'EMFILE' | 'ENFILE';
  /** A command prefix to start the proxy with. */
  launcher: string[];
  /** From now on the proxy may open at most `room` more descriptors (EMFILE), or none (ENFILE). */
  exhaust(pid: number, room: number): void;
  /**
   * Descriptors the proxy closes from now on (numbered `lowest` and up) stay taken, as when
   * something else grabs them at once: the limit goes down to `lowest` (EMFILE); the system's
   * table stays full whatever the proxy closes (ENFILE).
   */
  keepClosedTaken(pid: number, lowest: number): void;
  /** Descriptors free again. */
  free(pid: number): void;
}

const prlimit = (pid: number, soft: number, hard: number) =>
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${soft}:${hard}`]);

export function processLimit(): Exhaustion {
  let restore = 0;
  return {
    code: 'EMFILE',
    launcher: [],
    exhaust(pid, room) {
      restore = readdirSync(`/proc/${pid}/fd`).length + room;
      prlimit(pid, restore, nofileOf(pid).hard);
    },
    keepClosedTaken(pid, lowest) {
      prlimit(pid, lowest, nofileOf(pid).hard);
    },
    free(pid) {
      prlimit(pid, restore, nofileOf(pid).hard);
    },
  };
}

const FILE_MAX = '/proc/sys/fs/file-max';

/** Files allocated in the whole system (the first field of /proc/sys/fs/file-nr). */
export function filesOpen(): number {
  return Number(readFileSync('/proc/sys/fs/file-nr', 'utf8').split(/\s+/)[0]);
}

/** Whether `pid` has CAP_SYS_ADMIN (bit 21) in its effective set. */
export function hasSysAdmin(pid: number): boolean {
  const eff = /CapEff:\s+([0-9a-f]+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (eff === undefined) throw new Error(`no CapEff in /proc/${pid}/status`);
  return (BigInt(`0x${eff}`) & (1n << 21n)) !== 0n;
}

export function systemTable(): Exhaustion {
  const saved = readFileSync(FILE_MAX, 'utf8').trim();
  const restore = () => writeFileSync(FILE_MAX, saved);
  let lowered = false;
  // Whatever happens to the test, the machine gets its table back.
  const onExit = () => {
    if (lowered) restore();
  };
  return {
    code: 'ENFILE',
    launcher: ['setpriv', '--bounding-set', '-sys_admin', '--'],
    exhaust() {
      process.once('exit', onExit);
      // Half of what is open: full for the proxy, however many files others open or close meanwhile.
      writeFileSync(FILE_MAX, String(Math.max(1, Math.floor(filesOpen() / 2))));
      lowered = true;
    },
    keepClosedTaken() {},
    free() {
      restore();
      lowered = false;
      process.off('exit', onExit);
    },
  };
}
