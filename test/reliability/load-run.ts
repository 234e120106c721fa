/**
 * The load run of issue #7: many raw client connections commit offsets through one proxy (the CLI,
 * its own process) at a fixed aggregate rate for a fixed time; afterwards every acknowledged commit
 * is looked up in the store itself.
 *
 *   npx tsx test/reliability/load-run.ts [--connections 2000] [--rate 10000] [--seconds 600] [--ramp 10]
 *     [--store embedded|redis|memory] [--partitions-per-commit 5] [--groups-per-connection 2]
 *     [--interval 10] [--fetch-every 20] [--metadata-every 30] [--timeout-ms 10000]
 *     [--rss-growth-mb 50] [--rss-growth-fraction 0.25] [--min-rate-fraction 0.98]
 *     [--proxy-args "--authorize off"] [--proxy-metrics 1] [--cpu-prof <dir>]
 *
 * KOP_BOOTSTRAP=host:port uses that cluster instead of starting the bed's broker; Redis (AOF,
 * appendfsync always) is started for --store redis. Exit code 1 when a request failed, an
 * acknowledged commit is missing from the store, an OffsetFetch answer was older than a commit
 * acknowledged before it on the same connection, the proxy's RSS was not flat, or the achieved rate
 * fell short; the summary says which. Prints a table per interval, a summary and one JSON line.
 *
 * Open loop: after a ramp (the rate rising linearly from 0 over `ramp` seconds, so the connections
 * start one after another), request i is due at t0 + i / (rate / partitions) seconds and goes to
 * connection i mod N, so every connection sends one OffsetCommit (v8, admin-style generation -1) of
 * `partitions` partitions every N * partitions / rate seconds, to one of its own groups in turn.
 * A slow answer never delays the next request (it is pipelined on the same connection), so latency
 * and in-flight counts show a proxy that falls behind instead of hiding it. Each connection also
 * sends an OffsetFetch after every `fetchEvery`-th commit (its answer is checked against what was
 * acknowledged) and a Metadata request every `metadataEvery` seconds (relayed to the broker and
 * rewritten by the proxy, as real clients refresh metadata: the relay path under the same load).
 *
 * The generator stays cheap: each (connection, group) has one encoded OffsetCommit frame whose
 * offsets and correlation id are patched in place before each send (a copy is written only when the
 * socket still holds unsent bytes, so a queued buffer is never changed), and an answer that is
 * byte-for-byte the "all partitions NONE" answer is accepted without decoding.
 *
 * Offsets: commit k (k = 1, 2, ...) of a group writes k * partitions + p to partition p, so a stored
 * or fetched value names the commit it came from and the partition it was meant for.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeResponseFrame, encodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { startRedis } from '../bed/redis.js';
import type { RedisServer } from '../bed/redis.js';
import { ensureBuilt, freePortRange, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { RawClient, metadataRequest, splitHostPort } from '../harness/raw-client.js';
import { commitBody, fetchOnce, memoryOf, sleep } from './commit-checker.js';
import { MARK_COMPACT } from './gc-trace.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';

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

const COMMIT = 0;
const FETCH = 1;
const METADATA = 2;
const KIND_NAMES = ['commit', 'fetch', 'metadata'];
const COMMIT_VERSION = 8;
const FETCH_VERSION = 8;
const METADATA_VERSION = 12;
/** Eight bytes no encoded header or name contains: where the codec put each committedOffset. */
const SENTINEL = 0x7e3c5a9f1d2b4c6en;
const MB = 1024 * 1024;

// ---- measuring the proxy process ----------------------------------------------------------------

export interface MemorySample {
  t: number;
  rss: number;
  anon: number;
  file: number;
}

/** Time a process's main thread has spent runnable but waiting for a CPU, in ms. */
function runQueueMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
}

/** Bytes on disk under a directory (the embedded store's data file). */
function diskUsage(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) total += statSync(path.join(e.parentPath, e.name)).blocks * 512;
  }
  return total;
}

/** utime + stime of a process in ms (Linux clock ticks of 10 ms). */
function processCpuMs(pid: number): number {
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

// ---- one client connection ----------------------------------------------------------------------

/** Requests in flight on one connection, oldest first (answers come in request order). */
class InFlight {
  size = 0;
  private head = 0;
  private kind = new Uint8Array(16);
  private group = new Uint16Array(16);
  private corr = new Int32Array(16);
  private at = new Float64Array(16);
  /** Commit: its k. Fetch: the lowest k acknowledged for the group when it was sent. */
  private a = new Float64Array(16);
  /** Fetch: the group's last k sent before it. */
  private b = new Float64Array(16);

  push(kind: number, group: number, corr: number, at: number, a: number, b: number): void {
    if (this.size === this.kind.length) this.grow();
    const i = (this.head + this.size) & (this.kind.length - 1);
    this.kind[i] = kind;
    this.group[i] = group;
    this.corr[i] = corr;
    this.at[i] = at;
    this.a[i] = a;
    this.b[i] = b;
    this.size++;
  }

  /** The oldest entry's fields, valid until the next shift. */
  peek(): { kind: number; group: number; corr: number; at: number; a: number; b: number } {
    const i = this.head;
    return {
      kind: this.kind[i]!,
      group: this.group[i]!,
      corr: this.corr[i]!,
      at: this.at[i]!,
      a: this.a[i]!,
      b: this.b[i]!,
    };
  }

  oldestAt(): number {
    return this.size === 0 ? Infinity : this.at[this.head]!;
  }

  shift(): void {
    this.head = (this.head + 1) & (this.kind.length - 1);
    this.size--;
  }

  private grow(): void {
    const cap = this.kind.length * 2;
    const order = Array.from({ length: this.size }, (_, j) => (this.head + j) & (this.kind.length - 1));
    const regrow = <T extends Uint8Array | Uint16Array | Int32Array | Float64Array>(
      old: T,
      make: (n: number) => T,
    ) => {
      const next = make(cap);
      order.forEach((from, to) => (next[to] = old[from]!));
      return next;
    };
    this.kind = regrow(this.kind, (n) => new Uint8Array(n));
    this.group = regrow(this.group, (n) => new Uint16Array(n));
    this.corr = regrow(this.corr, (n) => new Int32Array(n));
    this.at = regrow(this.at, (n) => new Float64Array(n));
    this.a = regrow(this.a, (n) => new Float64Array(n));
    this.b = regrow(this.b, (n) => new Float64Array(n));
    this.head = 0;
  }
}

export interface Shared {
  opts: LoadRunOptions;
  topic: string;
  host: string;
  port: number;
  /** The answer to every fully acknowledged commit, after its correlation id. */
  okCommitTail: Buffer;
  running: boolean;
  totals: Totals;
  interval: { sent: number; answered: number; failed: number; partitions: number; latencies: number[] };
  allLatencies: number[];
}

export function fail(s: Shared, cause: string, n = 1): void {
  if (n <= 0) return;
  s.totals.failed += n;
  s.interval.failed += n;
  s.totals.failures[cause] = (s.totals.failures[cause] ?? 0) + n;
}

/** Why a stored or fetched value is wrong for a partition, or null when it is right. */
function offsetProblem(
  value: number | null,
  p: number,
  ackedK: number,
  sentK: number,
  P: number,
): string | null {
  if (value === null || value < 0) return ackedK > 0 ? 'acknowledged commit missing' : null;
  if ((value - p) % P !== 0) return 'a value this run never sent to this partition';
  const k = (value - p) / P;
  if (k < ackedK) return 'below the highest acknowledged commit';
  if (k > sentK) return 'above the highest commit sent';
  return null;
}

export class LoadConnection {
  private socket: net.Socket | null = null;
  private splitter = new FrameSplitter({ maxFrameSize: 16 * MB });
  private readonly inflight = new InFlight();
  private correlation = 1;
  private round = 0;
  private readonly commitFrames: Buffer[] = [];
  /** Per group, where partition p's committedOffset sits in its frame. */
  private readonly offsetAt: number[][] = [];
  private readonly fetchFrames: Buffer[] = [];
  private readonly metadataFrame: Buffer;
  /** Per group: the last k sent. Per group × partition: the highest k acknowledged (0 = none). */
  readonly sentK: Float64Array;
  readonly ackedK: Float64Array;

  constructor(
    private readonly s: Shared,
    /** The connection's number: staggers its OffsetFetch requests against the other connections'. */
    private readonly index: number,
    readonly groups: string[],
  ) {
    const P = s.opts.partitionsPerCommit;
    this.sentK = new Float64Array(groups.length);
    this.ackedK = new Float64Array(groups.length * P);
    for (const group of groups) {
      const frame = encodeRequestFrame(
        { apiKey: ApiKey.OffsetCommit, apiVersion: COMMIT_VERSION, correlationId: 0, clientId: 'load-run' },
        commitBody(group, s.topic, P, SENTINEL) as never,
      );
      const marker = Buffer.alloc(8);
      marker.writeBigInt64BE(SENTINEL);
      const at: number[] = [];
      for (let i = frame.indexOf(marker); i >= 0; i = frame.indexOf(marker, i + 8)) at.push(i);
      if (at.length !== P) throw new Error(`found ${at.length} offsets in the commit frame, expected ${P}`);
      this.commitFrames.push(frame);
      this.offsetAt.push(at);
      this.fetchFrames.push(
        encodeRequestFrame(
          { apiKey: ApiKey.OffsetFetch, apiVersion: FETCH_VERSION, correlationId: 0, clientId: 'load-run' },
          {
            ...defaultOffsetFetchRequest(),
            groups: [
              {
                groupId: group,
                memberId: null,
                memberEpoch: -1,
                topics: [
                  {
                    name: s.topic,
                    topicId: ZERO_UUID,
                    partitionIndexes: Array.from({ length: P }, (_, p) => p),
                  },
                ],
              },
            ],
          },
        ),
      );
    }
    this.metadataFrame = metadataRequest(METADATA_VERSION, 0);
  }

  get inFlight(): number {
    return this.inflight.size;
  }

  connect(): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: this.s.host, port: this.s.port });
      socket.setNoDelay(true);
      socket.once('connect', () => {
        socket.removeListener('error', reject);
        if (!this.s.running) {
          socket.destroy(); // a reconnect that completed after the end of the run
          resolve();
          return;
        }
        socket.on('error', () => undefined); // 'close' follows
        this.socket = socket;
        this.splitter = new FrameSplitter({ maxFrameSize: 16 * MB });
        resolve();
      });
      socket.once('error', reject);
      socket.on('data', (chunk: Buffer) => this.onData(socket, chunk));
      socket.once('close', () => this.onClose(socket));
    });
  }

  close(): void {
    const socket = this.socket;
    this.socket = null;
    socket?.destroy();
  }

  /** The next commit of this connection (to its groups in turn), plus an OffsetFetch when due. */
  commit(now: number): void {
    const g = this.round++ % this.groups.length;
    if (this.socket === null) {
      fail(this.s, 'not sent: connection down');
      return;
    }
    const k = ++this.sentK[g]!;
    const P = this.s.opts.partitionsPerCommit;
    let frame = this.commitFrames[g]!;
    if (this.socket.writableLength > 0) {
      // Bytes of an earlier write may still be this buffer: never change a queued buffer.
      frame = Buffer.from(frame);
      this.s.totals.frameCopies++;
    }
    const at = this.offsetAt[g]!;
    for (let p = 0; p < P; p++) {
      const v = k * P + p;
      frame.writeUInt32BE(Math.floor(v / 0x1_0000_0000), at[p]!);
      frame.writeUInt32BE(v >>> 0, at[p]! + 4);
    }
    this.send(frame, COMMIT, g, now, k, 0);
    const every = this.s.opts.fetchEvery;
    // Staggered by connection, so the connections do not all send their first OffsetFetch in the
    // same second (the proxy's authorizer asks the broker about each connection's first one).
    if (every > 0 && (this.round + this.index) % every === 0) {
      // The group that was committed longest ago (the same group, pipelined, with one group).
      const fg = this.round % this.groups.length;
      let lowest = Infinity;
      for (let p = 0; p < P; p++) lowest = Math.min(lowest, this.ackedK[fg * P + p]!);
      this.send(this.fetchFrames[fg]!, FETCH, fg, now, lowest, this.sentK[fg]!);
    }
  }

  metadata(now: number): void {
    if (this.socket === null) {
      fail(this.s, 'not sent: connection down');
      return;
    }
    this.send(this.metadataFrame, METADATA, 0, now, 0, 0);
  }

  private send(frame: Buffer, kind: number, g: number, now: number, a: number, b: number): void {
    const socket = this.socket!;
    const corr = this.correlation;
    this.correlation = corr === 0x7fff_ffff ? 1 : corr + 1;
    if (kind !== COMMIT && socket.writableLength > 0) {
      frame = Buffer.from(frame);
      this.s.totals.frameCopies++;
    }
    frame.writeInt32BE(corr, 8); // size (4), api key (2), api version (2), correlation id
    this.inflight.push(kind, g, corr, now, a, b);
    this.s.totals.sent++;
    this.s.interval.sent++;
    socket.write(frame);
  }

  /** Fails the requests in flight when the oldest is older than the deadline; true if it did. */
  expire(now: number): boolean {
    if (now - this.inflight.oldestAt() <= this.s.opts.requestTimeoutMs) return false;
    fail(this.s, 'timeout', this.inflight.size);
    this.drop();
    return true;
  }

  private drop(): void {
    while (this.inflight.size > 0) this.inflight.shift();
    this.close();
    if (this.s.running) {
      this.s.totals.connectionsReopened++;
      // Until it connects: a proxy restarted by a chaos run is away for seconds.
      const retry = (): void => {
        if (this.s.running && this.socket === null) this.connect().catch(() => setTimeout(retry, 500));
      };
      setTimeout(retry, 200);
    }
  }

  private onClose(socket: net.Socket): void {
    if (socket !== this.socket) return; // closed by us (drop or end of run)
    fail(this.s, 'connection closed by the proxy', Math.max(1, this.inflight.size));
    this.drop();
  }

  private onData(socket: net.Socket, chunk: Buffer): void {
    if (socket !== this.socket) return;
    let frames: Buffer[];
    try {
      frames = this.splitter.push(chunk);
    } catch {
      fail(this.s, 'bad framing', Math.max(1, this.inflight.size));
      this.drop();
      return;
    }
    const now = performance.now();
    for (const frame of frames) {
      if (this.inflight.size === 0 || frame.readInt32BE(0) !== this.inflight.peek().corr) {
        fail(this.s, 'answer out of order', Math.max(1, this.inflight.size));
        this.drop();
        return;
      }
      const r = this.inflight.peek();
      this.inflight.shift();
      const ms = now - r.at;
      this.s.interval.latencies.push(ms);
      this.s.allLatencies.push(ms);
      this.s.totals.answered++;
      this.s.interval.answered++;
      try {
        if (r.kind === COMMIT) this.onCommitAnswer(frame, r.group, r.a);
        else if (r.kind === FETCH) this.onFetchAnswer(frame, r.group, r.a, r.b);
        else this.onMetadataAnswer(frame);
      } catch (err) {
        fail(this.s, `undecodable ${KIND_NAMES[r.kind]} answer: ${(err as Error).message}`);
      }
    }
  }

  private onCommitAnswer(frame: Buffer, g: number, k: number): void {
    const P = this.s.opts.partitionsPerCommit;
    let codes: number[] | null = null;
    if (this.s.okCommitTail.compare(frame, 4) !== 0) {
      this.s.totals.slowAnswers++;
      const { body } = decodeResponseFrame(frame, ApiKey.OffsetCommit, COMMIT_VERSION);
      codes = body.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
    }
    let ok = 0;
    for (let p = 0; p < P; p++) {
      const code = codes === null ? 0 : (codes[p] ?? -1);
      if (code === 0) {
        ok++;
        if (k > this.ackedK[g * P + p]!) this.ackedK[g * P + p] = k;
      } else {
        this.s.totals.errorCodes[code] = (this.s.totals.errorCodes[code] ?? 0) + 1;
      }
    }
    this.s.totals.partitionCommitsAcked += ok;
    this.s.interval.partitions += ok;
    if (ok === P) this.s.totals.commitsAcked++;
    else fail(this.s, 'error code');
  }

  private onFetchAnswer(frame: Buffer, g: number, lowestAcked: number, lastSent: number): void {
    this.s.totals.fetches++;
    const P = this.s.opts.partitionsPerCommit;
    const { body } = decodeResponseFrame(frame, ApiKey.OffsetFetch, FETCH_VERSION);
    const group = body.groups[0];
    if (group === undefined || group.errorCode !== 0) {
      fail(this.s, 'error code');
      return;
    }
    const values = new Map<number, number>();
    for (const t of group.topics) {
      for (const p of t.partitions) {
        if (p.errorCode !== 0) {
          fail(this.s, 'error code');
          return;
        }
        values.set(p.partitionIndex, Number(p.committedOffset));
      }
    }
    let stale = false;
    for (let p = 0; p < P; p++) {
      const v = values.get(p) ?? null;
      if (offsetProblem(v, p, lowestAcked, this.sentK[g]!, P) !== null) {
        fail(this.s, 'fetched offset wrong');
        return;
      }
      const earlierAcked = lastSent > 0 && this.ackedK[g * P + p]! >= lastSent;
      if (earlierAcked && (v === null || v < lastSent * P + p)) stale = true;
    }
    if (stale) this.s.totals.staleFetches++;
  }

  private onMetadataAnswer(frame: Buffer): void {
    this.s.totals.metadata++;
    const { body } = decodeResponseFrame(frame, ApiKey.Metadata, METADATA_VERSION);
    // Every broker rewritten to the proxy's port for it (bootstrap port + 1 + node id).
    const rewritten = body.brokers.every(
      (b) => b.host === this.s.host && b.port === this.s.port + 1 + b.nodeId,
    );
    if (body.brokers.length === 0 || !rewritten) fail(this.s, 'bad metadata answer');
  }

  /** Compares the store's offsets of every group of this connection with what was acknowledged. */
  async verify(read: (group: string) => Promise<Map<number, number>>, lost: LostCommit[]): Promise<void> {
    const P = this.s.opts.partitionsPerCommit;
    for (const [g, group] of this.groups.entries()) {
      const stored = await read(group);
      for (let p = 0; p < P; p++) {
        const v = stored.get(p) ?? null;
        const problem = offsetProblem(v, p, this.ackedK[g * P + p]!, this.sentK[g]!, P);
        if (problem !== null) {
          const ackedK = this.ackedK[g * P + p]!;
          lost.push({
            group,
            partition: p,
            acked: ackedK > 0 ? ackedK * P + p : -1,
            stored: v,
            sent: this.sentK[g]! * P + p,
            problem,
          });
        }
      }
    }
  }
}

// ---- the run -------------------------------------------------------------------------------------

export function percentile(sorted: ArrayLike<number>, f: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))]!;
}

function sortedCopy(values: number[]): Float64Array {
  return Float64Array.from(values).sort();
}

async function readerFor(
  store: LoadStore,
  ctx: { dataDir: string; redis?: RedisServer; proxy: ProxyProcess; topic: string; partitions: number },
): Promise<{
  store: OffsetStore | null;
  read: (group: string) => Promise<Map<number, number>>;
  done: () => Promise<void>;
}> {
  if (store === 'memory') {
    // The memory store lives inside the proxy: read it through the proxy (before it stops).
    const client = await RawClient.connect(ctx.proxy.bootstrap);
    return {
      store: null,
      read: async (group) => {
        const { errorCode, offsets } = await fetchOnce(client, group, ctx.topic, ctx.partitions);
        if (errorCode !== 0) throw new Error(`OffsetFetch of ${group}: error ${errorCode}`);
        return new Map([...offsets].filter(([, o]) => o >= 0n).map(([p, o]) => [p, Number(o)]));
      },
      done: async () => client.close(),
    };
  }
  const opened: OffsetStore =
    store === 'embedded' ? new EmbeddedStore({ dataDir: ctx.dataDir }) : await openStore(ctx.redis!.url);
  return {
    store: opened,
    read: async (group) => {
      const offsets = await opened.fetch(group, null);
      return new Map(
        offsets.filter((o) => o.topic === ctx.topic).map((o) => [o.partition, Number(o.offset)]),
      );
    },
    done: () => opened.close(),
  };
}

/** The generator's state shared by its connections to one proxy (host and port set by the caller). */
export function newShared(opts: LoadRunOptions, topic: string): Shared {
  const P = opts.partitionsPerCommit;
  return {
    opts,
    topic,
    host: '',
    port: 0,
    okCommitTail: encodeResponseFrame(ApiKey.OffsetCommit, COMMIT_VERSION, 0, {
      throttleTimeMs: 0,
      topics: [
        {
          name: topic,
          partitions: Array.from({ length: P }, (_, p) => ({ partitionIndex: p, errorCode: 0 })),
        },
      ],
    }).subarray(8),
    running: true,
    totals: {
      sent: 0,
      answered: 0,
      failed: 0,
      commitsAcked: 0,
      partitionCommitsAcked: 0,
      fetches: 0,
      metadata: 0,
      failures: {},
      errorCodes: {},
      staleFetches: 0,
      frameCopies: 0,
      slowAnswers: 0,
      connectionsReopened: 0,
    },
    interval: { sent: 0, answered: 0, failed: 0, partitions: 0, latencies: [] },
    allLatencies: [],
  };
}

export async function runLoad(partial: Partial<LoadRunOptions> = {}): Promise<LoadRunResult> {
  const opts: LoadRunOptions = { ...defaultLoadRunOptions, ...partial };
  const log = opts.log ?? (() => undefined);
  const N = opts.connections;
  const P = opts.partitionsPerCommit;
  const reqRate = opts.rate / P;
  const runId = `load-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const topic = runId;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'kop-load-'));
  const loadStart = os.loadavg();

  let kafka: KafkaCluster | undefined;
  let redis: RedisServer | undefined;
  let proxy: ProxyProcess | undefined;
  const conns: LoadConnection[] = [];
  const shared = newShared(opts, topic);
  try {
    const bootstrap = opts.bootstrap ?? (kafka = await startKafka()).bootstrap;
    if (opts.store === 'redis') redis = await startRedis({ appendfsync: 'always' });
    await createTopics({ bootstrap }, [{ topic, partitions: P }]);
    await ensureBuilt();
    const storeArgs =
      opts.store === 'redis'
        ? ['--store', redis!.url]
        : opts.store === 'memory'
          ? ['--store', 'memory://']
          : [];
    const httpPort = opts.proxyMetrics ? await freePortRange(0) : null;
    proxy = await spawnProxy(
      [
        '--bootstrap-server',
        bootstrap,
        '--data-dir',
        dataDir,
        ...(httpPort !== null ? ['--http', `127.0.0.1:${httpPort}`] : []),
        ...storeArgs,
        ...opts.proxyArgs,
      ],
      {},
      // --trace-gc: the heap left after each full (mark-compact) GC is what the proxy really holds.
      [
        '--trace-gc',
        ...(opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(opts.cpuProfDir)}`] : []),
      ],
    );
    const pid = proxy.child.pid!;
    [shared.host, shared.port] = splitHostPort(proxy.bootstrap);
    log(
      `proxy pid ${pid} on ${proxy.bootstrap} (${opts.store} store), broker ${bootstrap}; opening ${N} connections`,
    );

    for (let c = 0; c < N; c++) {
      conns.push(
        new LoadConnection(
          shared,
          c,
          Array.from({ length: opts.groupsPerConnection }, (_, g) => `${runId}-c${c}-g${g}`),
        ),
      );
    }
    // In batches: every accepted client makes the proxy open a broker connection too.
    for (let c = 0; c < N; c += 50) await Promise.all(conns.slice(c, c + 50).map((conn) => conn.connect()));
    log(
      `${N} connections open; proxy RSS ${(memoryOf(pid).rss / MB).toFixed(0)} MB; ramp ${opts.rampSeconds} s, then ${opts.seconds} s at the full rate`,
    );

    // ---- the open loop ----
    const intervals: IntervalStats[] = [];
    const samples: MemorySample[] = [];
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    // Request i is due at t0 + (i - rampCount) / reqRate, or within the ramp before t0 (rate rising linearly).
    const ramp = opts.rampSeconds;
    const t0 = performance.now() + ramp * 1000;
    const rampCount = Math.floor((reqRate * ramp) / 2);
    const dueAt = (i: number): number =>
      i < rampCount
        ? t0 - ramp * 1000 + Math.sqrt((2 * ramp * i) / reqRate) * 1000
        : t0 + ((i - rampCount) / reqRate) * 1000;
    let measuring = false;
    let measuredPartitions = 0;
    let scheduled = 0;
    let metadataScheduled = 0;
    let nextSample = 0;
    let nextInterval = opts.intervalSeconds;
    let intervalStart = 0;
    let sendLagMax = 0;
    let cpuMark = { proxy: processCpuMs(pid), wait: runQueueMs(pid), loadgen: process.cpuUsage() };
    let faultDone = opts.fault === undefined;
    const heapAfterGc: [number, number][] = [];
    let gcScanned = proxy.output().length;

    const closeInterval = (endS: number): void => {
      const mem = memoryOf(pid);
      samples.push({ t: endS, ...mem });
      const lat = sortedCopy(shared.interval.latencies);
      const proxyCpu = processCpuMs(pid);
      const proxyWait = runQueueMs(pid);
      const loadgen = process.cpuUsage(cpuMark.loadgen);
      const wallMs = (endS - intervalStart) * 1000;
      let inFlight = 0;
      for (const c of conns) inFlight += c.inFlight;
      const row: IntervalStats = {
        endS,
        sent: shared.interval.sent,
        answered: shared.interval.answered,
        failed: shared.interval.failed,
        partitionCommitsPerS: shared.interval.partitions / (endS - intervalStart),
        p50Ms: percentile(lat, 0.5),
        p99Ms: percentile(lat, 0.99),
        maxMs: lat.length > 0 ? lat[lat.length - 1]! : NaN,
        inFlight,
        rssMb: mem.rss / MB,
        rssAnonMb: mem.anon / MB,
        rssFileMb: mem.file / MB,
        proxyCpuPct: ((proxyCpu - cpuMark.proxy) / wallMs) * 100,
        proxyCpuWaitPct: ((proxyWait - cpuMark.wait) / wallMs) * 100,
        loadgenCpuPct: ((loadgen.user + loadgen.system) / 1000 / wallMs) * 100,
        sendLagMaxMs: sendLagMax,
        load1: os.loadavg()[0]!,
      };
      intervals.push(row);
      measuredPartitions += shared.interval.partitions;
      log(formatInterval(row, loop.percentile(99) / 1e6));
      loop.reset();
      cpuMark = { proxy: proxyCpu, wait: proxyWait, loadgen: process.cpuUsage() };
      shared.interval = { sent: 0, answered: 0, failed: 0, partitions: 0, latencies: [] };
      sendLagMax = 0;
      intervalStart = endS;
    };

    await new Promise<void>((resolve, reject) => {
      let lastExpiry = 0;
      const tick = (): void => {
        try {
          const now = performance.now();
          const raw = (now - t0) / 1000;
          const elapsed = Math.min(raw, opts.seconds);
          const due =
            raw < 0
              ? Math.floor((reqRate * (raw + ramp) ** 2) / (2 * ramp))
              : rampCount + Math.floor(elapsed * reqRate);
          for (; scheduled < due; scheduled++) {
            sendLagMax = Math.max(sendLagMax, now - dueAt(scheduled));
            conns[scheduled % N]!.commit(now);
          }
          if (now - lastExpiry > 200) {
            lastExpiry = now;
            for (const c of conns) c.expire(now);
          }
          if (raw < 0) return;
          if (!measuring) {
            // The full rate starts: intervals, samples and CPU figures count from here.
            measuring = true;
            shared.interval = { sent: 0, answered: 0, failed: 0, partitions: 0, latencies: [] };
            sendLagMax = 0;
            cpuMark = { proxy: processCpuMs(pid), wait: runQueueMs(pid), loadgen: process.cpuUsage() };
            loop.reset();
          }
          if (opts.metadataEverySeconds > 0) {
            const due = Math.floor((elapsed * N) / opts.metadataEverySeconds);
            for (; metadataScheduled < due; metadataScheduled++)
              conns[(metadataScheduled + (N >> 1)) % N]!.metadata(now);
          }
          if (elapsed >= nextSample) {
            samples.push({ t: elapsed, ...memoryOf(pid) });
            nextSample = Math.floor(elapsed) + 1;
            const out = proxy!.output();
            for (const m of out.slice(gcScanned).matchAll(MARK_COMPACT))
              heapAfterGc.push([elapsed, Number(m[1])]);
            gcScanned = out.lastIndexOf('\n') + 1;
          }
          if (!faultDone && elapsed >= opts.fault!.atSecond) {
            faultDone = true;
            void Promise.resolve(opts.fault!.run(pid)).catch(reject);
          }
          if (elapsed >= nextInterval && elapsed < opts.seconds) {
            closeInterval(nextInterval);
            nextInterval += opts.intervalSeconds;
          }
          if (elapsed >= opts.seconds) {
            clearInterval(timer);
            resolve();
          }
        } catch (err) {
          clearInterval(timer);
          reject(err as Error);
        }
      };
      const timer = setInterval(tick, 2);
    });

    // Answers still on the way belong to the run (and to its last interval).
    const drainEnd = performance.now() + opts.requestTimeoutMs + 1000;
    while (conns.some((c) => c.inFlight > 0) && performance.now() < drainEnd) {
      const now = performance.now();
      for (const c of conns) c.expire(now);
      await sleep(50);
    }
    closeInterval(opts.seconds);
    loop.disable();
    shared.running = false;
    for (const c of conns) c.close();
    const loadEnd = os.loadavg();

    // ---- nothing acknowledged lost: the store itself, read directly ----
    const lost: LostCommit[] = [];
    let proxyExitCode: number | null = null;
    const proxyRefusals = httpPort !== null ? await refusalsOf(httpPort) : {};
    if (opts.store !== 'memory') proxyExitCode = await proxy.stop();
    const reader = await readerFor(opts.store, { dataDir, redis, proxy, topic, partitions: P });
    try {
      if (reader.store !== null) {
        await opts.beforeVerify?.(
          reader.store,
          conns.flatMap((c) => c.groups),
          topic,
        );
      }
      for (const c of conns) await c.verify(reader.read, lost);
    } finally {
      await reader.done();
    }
    if (opts.store === 'memory') proxyExitCode = await proxy.stop();
    const proxyWarnings = proxy
      .output()
      .split('\n')
      .filter((l) => /"level":"(warn|error)"/.test(l));

    const all = sortedCopy(shared.allLatencies);
    const totals = shared.totals;
    const achievedRate = measuredPartitions / opts.seconds;
    const rss = rssVerdict(samples, opts.seconds, opts);
    const rssAnon = rssVerdict(samples, opts.seconds, opts, 'anon');
    const rssFile = rssVerdict(samples, opts.seconds, opts, 'file');
    const reasons: string[] = [];
    if (totals.failed > 0)
      reasons.push(`${totals.failed} requests failed: ${JSON.stringify(totals.failures)}`);
    if (lost.length > 0) reasons.push(`${lost.length} partitions lost acknowledged commits`);
    if (!rss.ok) {
      reasons.push(
        `RSS not flat: last-quarter median ${rss.q4MedianMb.toFixed(0)} MB is ${rss.growthMb.toFixed(0)} MB above the second quarter's (bound ${rss.boundMb.toFixed(0)} MB)`,
      );
    }
    if (achievedRate < opts.minRateFraction * opts.rate) {
      reasons.push(
        `achieved ${achievedRate.toFixed(0)} partition commits/s, below ${opts.minRateFraction} × ${opts.rate}`,
      );
    }
    if (totals.staleFetches > 0) {
      reasons.push(
        `${totals.staleFetches} OffsetFetch answers older than an acknowledged commit sent before them`,
      );
    }
    if (proxyExitCode !== 0) reasons.push(`proxy exited with ${proxyExitCode}`);
    const { log: _log, fault: _fault, beforeVerify: _bv, cpuProfDir: _prof, ...plain } = opts;
    return {
      options: plain,
      intervals,
      totals,
      latency: {
        p50Ms: percentile(all, 0.5),
        p99Ms: percentile(all, 0.99),
        p999Ms: percentile(all, 0.999),
        maxMs: all.length > 0 ? all[all.length - 1]! : NaN,
      },
      achievedRate,
      rss,
      rssAnon,
      rssFile,
      rssSeries: samples.map((m) => [
        Math.round(m.t * 10) / 10,
        Math.round(m.rss / MB),
        Math.round(m.anon / MB),
        Math.round(m.file / MB),
      ]),
      heapAfterGc: heapAfterGc.map(([t, mb]) => [Math.round(t), mb]),
      storeDiskMb: opts.store === 'embedded' ? diskUsage(dataDir) / MB : null,
      lost,
      groupsChecked: conns.length * opts.groupsPerConnection,
      partitionsChecked: conns.length * opts.groupsPerConnection * P,
      proxyWarnings,
      proxyWarningCounts: countWarnings(proxyWarnings),
      proxyRefusals,
      proxyExitCode,
      loadAverage: { start: loadStart, end: loadEnd },
      ok: reasons.length === 0,
      reasons,
    };
  } finally {
    shared.running = false;
    for (const c of conns) c.close();
    await proxy?.stop('SIGKILL');
    await Promise.allSettled([kafka?.stop(), redis?.kill()]);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Non-zero kop_commit_refusals_total counters of the proxy, by reason. */
async function refusalsOf(httpPort: number): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  try {
    const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    for (const m of text.matchAll(/^kop_commit_refusals_total\{reason="([^"]+)"\} (\d+)/gm)) {
      if (Number(m[2]) > 0) out[m[1]!] = Number(m[2]);
    }
  } catch (err) {
    out[`metrics not read: ${(err as Error).message}`] = 0;
  }
  return out;
}

function countWarnings(lines: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of lines) {
    let key = line.slice(0, 120);
    try {
      const e = JSON.parse(line) as { event?: string; reason?: string; error?: { message?: string } };
      key = [e.event, e.reason, e.error?.message].filter((x) => x !== undefined).join(': ');
    } catch {
      // not JSON: counted by its start
    }
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

// ---- reporting -----------------------------------------------------------------------------------

const f0 = (n: number): string => (Number.isFinite(n) ? n.toFixed(0) : '-');
const f1 = (n: number): string => (Number.isFinite(n) ? n.toFixed(1) : '-');

function formatInterval(r: IntervalStats, loopP99Ms: number): string {
  return (
    `[load] ${f0(r.endS).padStart(4)} s: ${f0(r.partitionCommitsPerS)} partition commits/s, sent ${r.sent}, ` +
    `answered ${r.answered}, failed ${r.failed}, in flight ${r.inFlight}, p50/p99/max ${f1(r.p50Ms)}/` +
    `${f1(r.p99Ms)}/${f1(r.maxMs)} ms, proxy RSS ${f0(r.rssMb)} MB (anon ${f0(r.rssAnonMb)}, file ` +
    `${f0(r.rssFileMb)}), proxy CPU ${f0(r.proxyCpuPct)}% (waited for a core ${f0(r.proxyCpuWaitPct)}%), generator CPU ${f0(r.loadgenCpuPct)}%, send lag ` +
    `max ${f1(r.sendLagMaxMs)} ms, loop p99 ${f1(loopP99Ms)} ms, load ${r.load1.toFixed(2)}`
  );
}

export function formatReport(r: LoadRunResult): string {
  const o = r.options;
  const lines = [
    `${o.connections} connections, ${o.rate} partition commits/s (${o.rate / o.partitionsPerCommit} OffsetCommit/s of ` +
      `${o.partitionsPerCommit} partitions), ${o.rampSeconds} s ramp + ${o.seconds} s, ${o.store} store, ${o.groupsPerConnection} groups per ` +
      `connection, ${os.cpus().length} cores`,
    '',
    '| until s | partition commits/s | sent | answered | failed | p50 ms | p99 ms | max ms | in flight | RSS MB (anon / file) | proxy CPU % (waiting for a core %) | generator CPU % | load avg |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|',
    ...r.intervals.map(
      (i) =>
        `| ${f0(i.endS)} | ${f0(i.partitionCommitsPerS)} | ${i.sent} | ${i.answered} | ${i.failed} | ${f1(i.p50Ms)} | ` +
        `${f1(i.p99Ms)} | ${f1(i.maxMs)} | ${i.inFlight} | ${f0(i.rssMb)} (${f0(i.rssAnonMb)} / ${f0(i.rssFileMb)}) | ` +
        `${f0(i.proxyCpuPct)} (${f0(i.proxyCpuWaitPct)}) | ${f0(i.loadgenCpuPct)} | ${i.load1.toFixed(2)} |`,
    ),
    '',
    `requests: ${r.totals.sent} sent, ${r.totals.answered} answered, ${r.totals.failed} failed ` +
      `${JSON.stringify(r.totals.failures)}; error codes ${JSON.stringify(r.totals.errorCodes)}`,
    `commits acknowledged: ${r.totals.commitsAcked} (${r.totals.partitionCommitsAcked} partition commits, ` +
      `${f0(r.achievedRate)}/s achieved of ${o.rate}/s); OffsetFetch ${r.totals.fetches} ` +
      `(${r.totals.staleFetches} stale: older than an acknowledged commit sent before them on the connection); ` +
      `Metadata ${r.totals.metadata}`,
    `latency over the run: p50 ${f1(r.latency.p50Ms)} ms, p99 ${f1(r.latency.p99Ms)} ms, p99.9 ` +
      `${f1(r.latency.p999Ms)} ms, max ${f1(r.latency.maxMs)} ms`,
    `proxy RSS: start ${f0(r.rss.startMb)} MB, middle ${f0(r.rss.middleMb)} MB, end ${f0(r.rss.endMb)} MB; median ` +
      `Q2 ${f0(r.rss.q2MedianMb)} MB, Q4 ${f0(r.rss.q4MedianMb)} MB, growth ${f1(r.rss.growthMb)} MB (bound ` +
      `${f0(r.rss.boundMb)} MB), slope over the second half ${r.rss.slopeMbPerMin.toFixed(2)} MB/min: ` +
      (r.rss.ok ? 'flat' : 'NOT FLAT'),
    ...(['rssAnon', 'rssFile'] as const).map(
      (k) =>
        `  ${k === 'rssAnon' ? 'anonymous' : 'file-backed'} part: start ${f0(r[k].startMb)}, middle ${f0(r[k].middleMb)}, ` +
        `end ${f0(r[k].endMb)} MB; median Q2 ${f0(r[k].q2MedianMb)}, Q4 ${f0(r[k].q4MedianMb)} MB, growth ` +
        `${f1(r[k].growthMb)} MB, slope ${r[k].slopeMbPerMin.toFixed(2)} MB/min` +
        (k === 'rssFile' && r.storeDiskMb !== null
          ? ` (embedded store on disk at the end: ${f0(r.storeDiskMb)} MB)`
          : ''),
    ),
    `proxy V8 heap after each full GC (s: MB): ${r.heapAfterGc.map(([t, mb]) => `${t}: ${f0(mb)}`).join(', ') || 'none'}`,
    `store check: ${r.groupsChecked} groups, ${r.partitionsChecked} partitions, ${r.lost.length} wrong` +
      (r.lost.length > 0 ? `, e.g. ${JSON.stringify(r.lost.slice(0, 3))}` : ''),
    `generator: ${r.totals.frameCopies} frame copies, ${r.totals.slowAnswers} answers decoded, ` +
      `${r.totals.connectionsReopened} connections reopened`,
    `proxy: exit code ${r.proxyExitCode}, ${r.proxyWarnings.length} warn/error log lines ` +
      `${JSON.stringify(r.proxyWarningCounts)}, refused partitions by reason ${JSON.stringify(r.proxyRefusals)}`,
    `load average (1/5/15 min): start ${r.loadAverage.start.map((l) => l.toFixed(2)).join(' ')}, end ` +
      `${r.loadAverage.end.map((l) => l.toFixed(2)).join(' ')}`,
    r.ok ? 'RESULT: ok' : `RESULT: FAILED: ${r.reasons.join('; ')}`,
  ];
  return lines.join('\n');
}

// ---- command line --------------------------------------------------------------------------------

function parseArgs(argv: string[]): Partial<LoadRunOptions> {
  const names: Record<string, keyof LoadRunOptions> = {
    connections: 'connections',
    rate: 'rate',
    seconds: 'seconds',
    ramp: 'rampSeconds',
    'partitions-per-commit': 'partitionsPerCommit',
    'groups-per-connection': 'groupsPerConnection',
    interval: 'intervalSeconds',
    'fetch-every': 'fetchEvery',
    'metadata-every': 'metadataEverySeconds',
    'timeout-ms': 'requestTimeoutMs',
    'rss-growth-mb': 'rssGrowthMb',
    'rss-growth-fraction': 'rssGrowthFraction',
    'min-rate-fraction': 'minRateFraction',
    'proxy-metrics': 'proxyMetrics',
  };
  const out: Record<string, unknown> = {};
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, '');
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`--${name} needs a value`);
    if (name === 'proxy-args') {
      out['proxyArgs'] = value.split(' ').filter((a) => a !== '');
    } else if (name === 'cpu-prof') {
      out['cpuProfDir'] = value;
    } else if (name === 'store') {
      if (!['embedded', 'redis', 'memory'].includes(value))
        throw new Error(`--store ${value}: embedded|redis|memory`);
      out['store'] = value;
    } else if (names[name] !== undefined && Number.isFinite(Number(value))) {
      out[names[name]] = Number(value);
    } else {
      throw new Error(`unknown option or bad value: --${name} ${value}`);
    }
  }
  return out as Partial<LoadRunOptions>;
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const bootstrap = process.env['KOP_BOOTSTRAP'];
  const result = await runLoad({
    ...opts,
    ...(bootstrap ? { bootstrap } : {}),
    log: (line) => console.error(line),
  });
  console.log(formatReport(result));
  console.log(
    JSON.stringify({
      ...result,
      lost: result.lost.slice(0, 100),
      proxyWarnings: result.proxyWarnings.slice(0, 20),
    }),
  );
  process.exitCode = result.ok ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(2);
  });
}
