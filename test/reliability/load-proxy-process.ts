// Measuring the proxy process of a load run from /proc: CPU, time waiting for a core, the data
// directory on disk, and whether its memory stayed flat.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { MemorySample, RssVerdict } from './load-run-types.js';

const MB = 1024 * 1024;

/** Time a process's main thread has spent runnable but waiting for a CPU, in ms. */
export function runQueueMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
}

/** Bytes on disk under a directory (the embedded store's data file). */
export function diskUsage(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) total += statSync(path.join(e.parentPath, e.name)).blocks * 512;
  }
  return total;
}

/** utime + stime of a process in ms (Linux clock ticks of 10 ms). */
export function processCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * Memory is sampled once a second from /proc/<pid>/status. Flat means: the median VmRSS of the last quarter of the run is at most max(rssGrowthMb,
 * rssGrowthFraction × the second quarter's median) above the second quarter's median. The first
 * quarter is left out: it holds the warm-up (V8 growing its heap, JIT, the store's first pages).
 * Medians of per-second samples ride out GC sawtooth. Over a 10-minute run at 2,000 commits/s the
 * two medians are 300 s (600,000 requests) apart, so 50 MB catches a leak of ~85 bytes per request.
 * The same rule applied to RssAnon (V8 heap, buffers, native allocations: what a leak grows, and what
 * the kernel cannot reclaim) and to RssFile (mapped files: the node binary, and the embedded store's
 * LMDB pages, which grow with the data file) tells which part grew; only VmRSS decides.
 */
export function rssVerdict(
  samples: MemorySample[],
  seconds: number,
  bound: { rssGrowthMb: number; rssGrowthFraction: number },
  /** Which part: VmRSS (the criterion), or its anonymous or file-backed part (reported beside it). */
  part: 'rss' | 'anon' | 'file' = 'rss',
): RssVerdict {
  const mb = (s: MemorySample) => s[part] / MB;
  const inQuarter = (q: number) =>
    samples.filter((s) => s.t >= (q - 1) * (seconds / 4) && s.t <= q * (seconds / 4)).map(mb);
  const q2 = median(inQuarter(2));
  const q4 = median(inQuarter(4));
  const limit = Math.max(bound.rssGrowthMb, bound.rssGrowthFraction * q2);
  const half = samples.filter((s) => s.t >= seconds / 2);
  const n = half.length;
  const mt = half.reduce((a, s) => a + s.t, 0) / n;
  const mr = half.reduce((a, s) => a + mb(s), 0) / n;
  const cov = half.reduce((a, s) => a + (s.t - mt) * (mb(s) - mr), 0);
  const vt = half.reduce((a, s) => a + (s.t - mt) ** 2, 0);
  const at = (t: number) =>
    mb(samples.reduce((best, s) => (Math.abs(s.t - t) < Math.abs(best.t - t) ? s : best)));
  return {
    q2MedianMb: q2,
    q4MedianMb: q4,
    growthMb: q4 - q2,
    boundMb: limit,
    slopeMbPerMin: vt > 0 ? (cov / vt) * 60 : 0,
    startMb: at(0),
    middleMb: at(seconds / 2),
    endMb: at(seconds),
    ok: Number.isFinite(q4 - q2) && q4 - q2 <= limit,
  };
}
