// What a benchmark reads about another process from /proc: its CPU time and memory.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const CLK_TCK = 100; // getconf CLK_TCK on Linux

/** utime + stime of a process in ms (10 ms ticks); NaN when it cannot be read (gone, no pid). */
export function cpuMs(pid: number | undefined): number {
  const { user, sys } = cpuSplitMs(pid);
  return user + sys;
}

/**
 * utime and stime of a process in ms, apart: user time is the process's own code (JS, GC, Redis's
 * commands); system time is mostly socket reads and writes, which on loopback include the
 * receiver's TCP processing. NaN when it cannot be read.
 */
export function cpuSplitMs(pid: number | undefined): { user: number; sys: number } {
  if (pid === undefined) return { user: NaN, sys: NaN };
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { user: (Number(fields[11]) * 1000) / CLK_TCK, sys: (Number(fields[12]) * 1000) / CLK_TCK };
  } catch {
    return { user: NaN, sys: NaN };
  }
}

/** A line of /proc/<pid>/status in kB, e.g. VmHWM (peak RSS) or VmRSS. */
export function statusKb(pid: number, key: 'VmHWM' | 'VmRSS'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
  return Number(m?.[1] ?? NaN);
}

/**
 * CPU ms (utime + stime) of each thread of a process: "event loop" for the main thread, the others
 * summed by thread name (`comm`; Node's V8 platform workers, which run concurrent GC marking and
 * optimizing compiles, keep the name "node"; libuv's pool is "libuv-worker"). Threads that ended
 * are not counted. Empty when the process is gone.
 */
export function cpuByThreadMs(pid: number | undefined): Map<string, number> {
  const byName = new Map<string, number>();
  if (pid === undefined) return byName;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name =
        tid === String(pid) ? 'event loop' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
      byName.set(name, (byName.get(name) ?? 0) + ms);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return byName;
}

/** The pids of a process's children (of all its threads); empty when it has none or is gone. */
export function childPids(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
      readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8')
        .split(' ')
        .filter((c) => c !== '')
        .map(Number),
    );
  } catch {
    return [];
  }
}

/** The pid listening on a local TCP port (the broker runs under the bed's wrapper). */
export function pidOnPort(hostPort: string): number | undefined {
  const port = hostPort.split(',')[0]!.split(':').at(-1);
  const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
  const m = /pid=(\d+)/.exec(out);
  return m ? Number(m[1]) : undefined;
}
