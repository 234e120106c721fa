// What a benchmark reads about another process from /proc: its CPU time and memory.
import { readFileSync } from 'node:fs';

const CLK_TCK = 100; // getconf CLK_TCK on Linux

/** utime + stime of a process in ms (10 ms ticks); NaN when it cannot be read (gone, no pid). */
export function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/** A line of /proc/<pid>/status in kB, e.g. VmHWM (peak RSS) or VmRSS. */
export function statusKb(pid: number, key: 'VmHWM' | 'VmRSS'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
  return Number(m?.[1] ?? NaN);
}
