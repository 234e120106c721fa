// The "nothing acknowledged is lost" checker of the reliability tests: raw clients commit strictly
// increasing offsets for several groups in a loop through the proxy, record which commits the
// proxy acknowledged (error code NONE), and at the end compare with what the store holds. Every
// acknowledged offset must be there, or superseded by a later commit (offsets only grow, so the
// stored offset must be >= the highest acknowledged one and <= the highest one ever sent).
import { readFileSync } from 'node:fs';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import { commitBody } from '../harness/commit-body.js';
import { RawClient } from '../harness/raw-client.js';

export interface CheckerOptions {
  /** The proxy's current bootstrap address (asked again before every reconnect). */
  target: () => string;
  groups: string[];
  topic: string;
  partitions: number;
  /** Pause between a group's commits (default 5 ms). */
  intervalMs?: number;
  /** Per-request deadline before the connection is dropped and the commit counted as unanswered. */
  requestTimeoutMs?: number;
}

export interface GroupTally {
  /** Highest offset sent in a commit (answered or not). */
  sent: bigint;
  /** Highest offset acknowledged with NONE, per partition (-1 = none yet). */
  acked: bigint[];
}

export interface CheckerStats {
  attempts: number;
  acknowledged: number;
  /** Error code -> number of partition answers with it. */
  errors: Record<number, number>;
  /** Requests that got no answer (connection refused, closed, or timed out). */
  unanswered: number;
  reconnects: number;
  /** Round-trip times of answered commits, in ms. */
  latencies: number[];
}

export interface Violation {
  group: string;
  partition: number;
  acked: bigint;
  stored: bigint | null;
  sent: bigint;
}

let correlation = 1;

export { commitBody };

/** OffsetCommit v8 of `offset` on partitions 0..n-1; returns the per-partition error codes. */
export async function commitOnce(
  client: RawClient,
  group: string,
  topic: string,
  partitions: number,
  offset: bigint,
): Promise<number[]> {
  const r = await client.request<OffsetCommitResponse>(
    ApiKey.OffsetCommit,
    8,
    correlation++,
    commitBody(group, topic, partitions, offset) as never,
  );
  return r.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
}

/** OffsetFetch v8 of partitions 0..n-1: partition -> committed offset (-1 = none). */
export async function fetchOnce(
  client: RawClient,
  group: string,
  topic: string,
  partitions: number,
): Promise<{ errorCode: number; offsets: Map<number, bigint> }> {
  const r = await client.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 8, correlation++, {
    ...defaultOffsetFetchRequest(),
    groups: [
      {
        groupId: group,
        memberId: null,
        memberEpoch: -1,
        topics: [
          {
            name: topic,
            topicId: ZERO_UUID,
            partitionIndexes: Array.from({ length: partitions }, (_, p) => p),
          },
        ],
      },
    ],
  });
  const g = r.groups[0]!;
  const offsets = new Map<number, bigint>();
  for (const t of g.topics) for (const p of t.partitions) offsets.set(p.partitionIndex, p.committedOffset);
  return { errorCode: g.errorCode, offsets };
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

export class CommitChecker {
  readonly tallies = new Map<string, GroupTally>();
  readonly stats: CheckerStats = {
    attempts: 0,
    acknowledged: 0,
    errors: {},
    unanswered: 0,
    reconnects: 0,
    latencies: [],
  };
  private running = false;
  private loops: Promise<void>[] = [];
  private readonly clients = new Set<RawClient>();
  /** Canary mode: each group stops right after its first acknowledged commit sent from then on. */
  private stopSince: number | undefined;
  /** Groups stopped that way. */
  readonly stopped = new Set<string>();

  constructor(private readonly opts: CheckerOptions) {
    for (const g of opts.groups) {
      this.tallies.set(g, { sent: -1n, acked: Array.from({ length: opts.partitions }, () => -1n) });
    }
  }

  start(): void {
    this.running = true;
    this.loops = this.opts.groups.map((g) => this.loop(g));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    for (const c of this.clients) c.close();
    this.clients.clear();
  }

  /**
   * From now on each group stops right after its first acknowledged commit (a canary: its last
   * acknowledged offset must survive whatever the store does later, nothing it writes later can
   * hide a loss). Resolves once every group has stopped, or throws after `timeoutMs`.
   */
  async stopAfterNextAck(timeoutMs = 30_000): Promise<void> {
    this.stopSince = Date.now();
    const deadline = Date.now() + timeoutMs;
    while (this.stopped.size < this.tallies.size) {
      if (Date.now() > deadline)
        throw new Error(
          `only ${this.stopped.size} of ${this.tallies.size} canary groups acknowledged within ${timeoutMs} ms`,
        );
      await sleep(50);
    }
  }

  /** Acknowledged commits so far (partition answers with NONE, counted per request). */
  get acknowledged(): number {
    return this.stats.acknowledged;
  }

  /** Waits until at least `n` more commits have been acknowledged, or throws after `timeoutMs`. */
  async waitForAcks(n: number, timeoutMs = 30_000): Promise<void> {
    const target = this.stats.acknowledged + n;
    const deadline = Date.now() + timeoutMs;
    while (this.stats.acknowledged < target) {
      if (Date.now() > deadline) {
        throw new Error(
          `only ${this.stats.acknowledged} of ${target} acknowledged commits within ${timeoutMs} ms`,
        );
      }
      await sleep(50);
    }
  }

  private async loop(group: string): Promise<void> {
    const tally = this.tallies.get(group)!;
    const interval = this.opts.intervalMs ?? 5;
    const timeout = this.opts.requestTimeoutMs ?? 5_000;
    let client: RawClient | null = null;
    let next = 1n;
    while (this.running && !this.stopped.has(group)) {
      if (client === null || client.hasClosed) {
        if (client !== null) {
          this.clients.delete(client);
          this.stats.reconnects++;
        }
        try {
          client = await withTimeout(RawClient.connect(this.opts.target()), timeout, 'connect');
          this.clients.add(client);
        } catch {
          client = null;
          await sleep(100);
          continue;
        }
      }
      const offset = next++;
      tally.sent = offset;
      this.stats.attempts++;
      const t0 = performance.now();
      const sentAt = Date.now();
      try {
        const codes = await withTimeout(
          commitOnce(client, group, this.opts.topic, this.opts.partitions, offset),
          timeout,
          'commit',
        );
        this.stats.latencies.push(performance.now() - t0);
        let allOk = true;
        for (const [p, code] of codes.entries()) {
          if (code === 0) {
            if (offset > tally.acked[p]!) tally.acked[p] = offset;
          } else {
            allOk = false;
            this.stats.errors[code] = (this.stats.errors[code] ?? 0) + 1;
          }
        }
        if (allOk) {
          this.stats.acknowledged++;
          if (this.stopSince !== undefined && sentAt >= this.stopSince) this.stopped.add(group);
        } else await sleep(50);
      } catch {
        // No answer: the outcome is unknown (it may have been applied). Drop the connection.
        this.stats.unanswered++;
        client.close();
        await sleep(50);
      }
      if (interval > 0) await sleep(interval);
    }
  }

  /**
   * Compares the acknowledged commits with the stored offsets (`read(group)` gives partition ->
   * offset). A violation is a partition whose stored offset is missing or below the highest
   * acknowledged one, or above the highest offset ever sent.
   */
  async verify(read: (group: string) => Promise<Map<number, bigint>>): Promise<Violation[]> {
    const violations: Violation[] = [];
    for (const [group, tally] of this.tallies) {
      const stored = await read(group);
      for (const [p, acked] of tally.acked.entries()) {
        const s = stored.get(p) ?? null;
        const ok = acked < 0n ? s === null || s <= tally.sent : s !== null && s >= acked && s <= tally.sent;
        if (!ok) violations.push({ group, partition: p, acked, stored: s, sent: tally.sent });
      }
    }
    return violations;
  }

  /** The sum over groups of the highest acknowledged offset of partition 0 (a figure for reports). */
  ackedTotal(): bigint {
    let sum = 0n;
    for (const t of this.tallies.values()) sum += t.acked[0]! < 0n ? 0n : t.acked[0]!;
    return sum;
  }

  summary(): string {
    const l = [...this.stats.latencies].sort((a, b) => a - b);
    const q = (f: number) => (l.length === 0 ? NaN : l[Math.min(l.length - 1, Math.floor(f * l.length))]!);
    return (
      `${this.stats.attempts} commits sent, ${this.stats.acknowledged} acknowledged, ` +
      `${this.stats.unanswered} unanswered, errors ${JSON.stringify(this.stats.errors)}, ` +
      `${this.stats.reconnects} reconnects, p50 ${q(0.5).toFixed(1)} ms, p99 ${q(0.99).toFixed(1)} ms, ` +
      `max ${(l.at(-1) ?? NaN).toFixed(1)} ms`
    );
  }
}

/** What a client retries an OffsetFetch on: REQUEST_TIMED_OUT, COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS. */
const RETRIABLE_FETCH_ERRORS = new Set([7, 14, 15]);

/**
 * Reads the committed offsets of `group` through a proxy (OffsetFetch v8, fresh connection),
 * retrying retriable errors for up to `retryMs` as a client does: right after a store fault the
 * store may still be reconnecting, which is an answer about availability, not about the offsets.
 */
export async function readThroughProxy(
  bootstrap: string,
  group: string,
  topic: string,
  partitions: number,
  retryMs = 30_000,
): Promise<Map<number, bigint>> {
  const deadline = Date.now() + retryMs;
  for (;;) {
    const client = await RawClient.connect(bootstrap);
    try {
      const { errorCode, offsets } = await fetchOnce(client, group, topic, partitions);
      if (errorCode === 0) {
        for (const [p, o] of offsets) if (o < 0n) offsets.delete(p);
        return offsets;
      }
      if (!RETRIABLE_FETCH_ERRORS.has(errorCode) || Date.now() > deadline)
        throw new Error(`OffsetFetch of ${group}: error ${errorCode}`);
    } finally {
      client.close();
    }
    await sleep(200);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** VmRSS of a process in bytes (Linux /proc). */
/** VmRSS and its anonymous and file-backed parts (an mmap'd store shows as file), in bytes. */
export function memoryOf(pid: number): { rss: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string): number =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kb('VmRSS') * 1024, anon: kb('RssAnon') * 1024, file: kb('RssFile') * 1024 };
}

export function rssOf(pid: number): number {
  const { rss } = memoryOf(pid);
  if (Number.isNaN(rss)) throw new Error(`no VmRSS for pid ${pid}`);
  return rss;
}
