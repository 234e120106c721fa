// The options and the results of a load run (test/reliability/load-run.ts).
import type { OffsetStore } from '../../backends/store.js';

export type LoadStore = 'embedded' | 'redis' | 'memory';

export interface LoadRunOptions {
  /** Client connections to the proxy (default 2,000). */
  connections: number;
  /** Partition commits per second, all connections together (default 10,000). */
  rate: number;
  /** Length of the measured run at the full rate (default 600). */
  seconds: number;
  /**
   * Before it, the rate rises linearly from 0 over this many seconds (default 10): connections start
   * committing one after another rather than all in the same second. Failures in the ramp count.
   */
  rampSeconds: number;
  partitionsPerCommit: number;
  groupsPerConnection: number;
  store: LoadStore;
  /** An existing cluster; the bed's single broker is started when absent. */
  bootstrap?: string;
  /** Length of a reporting interval in seconds (default 10). */
  intervalSeconds: number;
  /** One OffsetFetch per connection after every this many of its commits (0 = none). */
  fetchEvery: number;
  /** One Metadata request per connection every this many seconds (0 = none). */
  metadataEverySeconds: number;
  /** A request unanswered this long fails, and its connection is closed and opened again. */
  requestTimeoutMs: number;
  /** RSS flatness: the last quarter's median may exceed the second quarter's by at most the larger of these. */
  rssGrowthMb: number;
  rssGrowthFraction: number;
  /** The achieved partition-commit rate over the run must be at least this fraction of `rate`. */
  minRateFraction: number;
  /** More flags for the proxy CLI (e.g. ['--authorize', 'off']). */
  proxyArgs: string[];
  /**
   * Runs the proxy with --http and reads its kop_commit_refusals_total at the end (why it refused
   * what it refused). Off by default: --http also starts the lag collector, which reads the store.
   */
  proxyMetrics: boolean;
  /** Writes the proxy's V8 CPU profile into this directory when it exits (node --cpu-prof). */
  cpuProfDir?: string;
  /** Progress lines (one per interval). */
  log?: (line: string) => void;
  /** Called at `atSecond` into the run with the proxy's pid (fault injection for negative controls). */
  fault?: { atSecond: number; run: (proxyPid: number) => void | Promise<void> };
  /** Called with the store after the run, before the check (negative controls tamper with it here). */
  beforeVerify?: (store: OffsetStore, groups: string[], topic: string) => Promise<void>;
}

export const defaultLoadRunOptions: LoadRunOptions = {
  connections: 2000,
  rate: 10_000,
  seconds: 600,
  rampSeconds: 10,
  partitionsPerCommit: 5,
  groupsPerConnection: 2,
  store: 'embedded',
  intervalSeconds: 10,
  fetchEvery: 20,
  metadataEverySeconds: 30,
  requestTimeoutMs: 10_000,
  rssGrowthMb: 50,
  rssGrowthFraction: 0.25,
  minRateFraction: 0.98,
  proxyArgs: [],
  proxyMetrics: false,
};

export interface IntervalStats {
  /** Seconds since the start of the run, at the interval's end. */
  endS: number;
  sent: number;
  answered: number;
  failed: number;
  /** Acknowledged partition commits per second, by answer time. */
  partitionCommitsPerS: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Requests sent but not answered at the interval's end. */
  inFlight: number;
  rssMb: number;
  rssAnonMb: number;
  rssFileMb: number;
  /** CPU of the proxy process and of this generator, in % of one core. */
  proxyCpuPct: number;
  loadgenCpuPct: number;
  /** Time the proxy's main thread was ready to run but waited for a core (/proc/<pid>/schedstat), in %. */
  proxyCpuWaitPct: number;
  /** Longest delay of a send behind its schedule (the generator's own lateness). */
  sendLagMaxMs: number;
  /** 1-minute load average of the machine. */
  load1: number;
}

export interface LostCommit {
  group: string;
  partition: number;
  /** Highest offset acknowledged (-1: none). */
  acked: number;
  stored: number | null;
  /** Highest offset sent. */
  sent: number;
  problem: string;
}

export interface Totals {
  sent: number;
  answered: number;
  failed: number;
  commitsAcked: number;
  partitionCommitsAcked: number;
  fetches: number;
  metadata: number;
  /** Failures by cause. */
  failures: Record<string, number>;
  /** Partition answers by non-zero error code. */
  errorCodes: Record<number, number>;
  /**
   * OffsetFetch answers older than a commit sent before the fetch on the same connection and
   * acknowledged before the fetch was answered. A broker handles a connection's requests one at a
   * time, in order, so it never answers so; the proxy handles pipelined requests concurrently.
   */
  staleFetches: number;
  /** Commit frames written as a copy because the socket still held the previous bytes. */
  frameCopies: number;
  /** Commit answers decoded because they differed from the all-NONE answer. */
  slowAnswers: number;
  connectionsReopened: number;
}

export interface RssVerdict {
  q2MedianMb: number;
  q4MedianMb: number;
  growthMb: number;
  boundMb: number;
  /** Least-squares slope over the second half of the run. */
  slopeMbPerMin: number;
  startMb: number;
  middleMb: number;
  endMb: number;
  ok: boolean;
}

export interface LoadRunResult {
  options: Omit<LoadRunOptions, 'log' | 'fault' | 'beforeVerify' | 'cpuProfDir'>;
  intervals: IntervalStats[];
  totals: Totals;
  latency: { p50Ms: number; p99Ms: number; p999Ms: number; maxMs: number };
  achievedRate: number;
  /** VmRSS flatness: the exit criterion. */
  rss: RssVerdict;
  /** The same rule on VmRSS's anonymous part (heap, buffers: what a leak grows) and file-backed part (mapped files: binary, LMDB). */
  rssAnon: RssVerdict;
  rssFile: RssVerdict;
  /** Proxy memory once a second: seconds into the run, VmRSS, RssAnon, RssFile in MB. */
  rssSeries: [number, number, number, number][];
  /** The proxy's V8 heap after each full GC: [seconds into the run, MB] (what it really holds). */
  heapAfterGc: [number, number][];
  /** The embedded store's files on disk at the end (MB), else null. */
  storeDiskMb: number | null;
  lost: LostCommit[];
  groupsChecked: number;
  partitionsChecked: number;
  proxyWarnings: string[];
  /** The proxy's warn/error log lines by event, reason and error message. */
  proxyWarningCounts: Record<string, number>;
  /** Refused partitions by reason, from the proxy's kop_commit_refusals_total (with proxyMetrics). */
  proxyRefusals: Record<string, number>;
  proxyExitCode: number | null;
  loadAverage: { start: number[]; end: number[] };
  ok: boolean;
  reasons: string[];
}

export interface MemorySample {
  t: number;
  rss: number;
  anon: number;
  file: number;
}
