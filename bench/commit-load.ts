/**
 * The offset-commit load the commit benchmarks share: connections in closed loops, each sending one
 * OffsetCommit of `partitions` partitions at a time for groups of its own (admin-style commits,
 * generation -1, as tools and assign() consumers send), with the CPU of named processes sampled
 * over the measured window (after a warm-up).
 */
import { ApiKey } from '../protocol/messages/index.js';
import { decodeResponseFrame, encodeRequestFrame } from '../protocol/frames.js';
import type { OffsetCommitResponse } from '../protocol/messages/offset-commit-response.js';
import { commitBody } from '../test/harness/commit-body.js';
import { RawClient } from '../test/harness/raw-client.js';
import { cpuMs } from './process-stats.js';

/** A placeholder offset whose 8 bytes occur nowhere else in a request: where the offsets go. */
const MARK = 0x5eed_c0de_5eed_c0den;

/**
 * One group's OffsetCommit v8 request frame, encoded once with the project's codec; each send only
 * patches the correlation id and the offsets in place. Encoding 100 partitions from objects for
 * every request made this load generator, which shares the two cores with the system under test,
 * take ~0.1 ms of CPU per commit; real clients are on other machines. The same bytes go to every
 * target. One request per connection is in flight, and a connection's next request is written only
 * after the previous response, so reusing the buffer never changes bytes still being sent.
 */
export class CommitFrame {
  private readonly frame: Buffer;
  private readonly offsetAt: number[] = [];

  constructor(group: string, topic: string, partitions: number) {
    this.frame = encodeRequestFrame(
      { apiKey: ApiKey.OffsetCommit, apiVersion: 8, correlationId: 0, clientId: 'bench' },
      commitBody(group, topic, partitions, MARK),
    );
    for (let at = 0; at + 8 <= this.frame.length; at++) {
      if (this.frame.readBigInt64BE(at) === MARK) this.offsetAt.push(at);
    }
    if (this.offsetAt.length !== partitions)
      throw new Error(`found ${this.offsetAt.length} offsets in the template`);
  }

  /** The frame with this correlation id and offset (below 2^31) in every partition. */
  with(correlationId: number, offset: number): Buffer {
    const f = this.frame;
    f.writeInt32BE(correlationId, 8); // after size (4), api key (2) and version (2)
    for (const at of this.offsetAt) {
      f.writeInt32BE(0, at);
      f.writeInt32BE(offset, at + 4);
    }
    return f;
  }
}

export interface CommitLoad {
  /** Connection c goes to bootstraps[c % length]. */
  bootstraps: string[];
  /** Prefix of the group names, unique per run so no run sees another's offsets. */
  runId: string;
  connections: number;
  /** Groups in all; each connection cycles through its share (at least one). */
  groups: number;
  topic: string;
  partitions: number;
  seconds: number;
  warmupMs?: number;
  /** Processes whose CPU is measured over the window, by label (a missing pid reads NaN). */
  processes: Record<string, number | undefined>;
  /** More counters read at the window's start and end, by label (their differences are returned). */
  counters?: () => Record<string, number>;
}

export interface CommitLoadResult {
  commits: number;
  /** Commits answered without error through each bootstrap, in the order given. */
  commitsVia: number[];
  /** Answers with an error code in any partition. */
  errors: number;
  latenciesMs: number[];
  seconds: number;
  /**
   * CPU ms over the measured window, per label of `processes`, plus `loadgen` (this process), and
   * the differences of `counters`.
   */
  cpuMs: Record<string, number>;
}

export async function runCommitLoad(load: CommitLoad): Promise<CommitLoadResult> {
  const clients = await Promise.all(
    Array.from({ length: load.connections }, (_, c) =>
      RawClient.connect(load.bootstraps[c % load.bootstraps.length]!),
    ),
  );
  const sample = (): Record<string, number> => {
    const own = process.cpuUsage();
    return {
      ...Object.fromEntries(Object.entries(load.processes).map(([label, pid]) => [label, cpuMs(pid)])),
      loadgen: (own.user + own.system) / 1000,
      ...load.counters?.(),
    };
  };
  const latencies: number[] = [];
  let commits = 0;
  const commitsVia = load.bootstraps.map(() => 0);
  let errors = 0;
  let correlation = 1;
  const warmupEnd = Date.now() + (load.warmupMs ?? 1000);
  const end = warmupEnd + load.seconds * 1000;
  let start: Record<string, number> = {};
  const warmupTimer = setTimeout(() => (start = sample()), warmupEnd - Date.now());
  await Promise.all(
    clients.map(async (client, c) => {
      const frames = Array.from(
        { length: Math.max(1, Math.floor(load.groups / load.connections)) },
        (_, g) => new CommitFrame(`${load.runId}-${c}-${g}`, load.topic, load.partitions),
      );
      let offset = 1;
      let g = 0;
      while (Date.now() < end) {
        const started = performance.now();
        const id = correlation++;
        client.write(frames[g++ % frames.length]!.with(id, offset++));
        const [frame] = await client.read(1);
        const { header, body } = decodeResponseFrame(frame!, ApiKey.OffsetCommit, 8);
        if (header.correlationId !== id)
          throw new Error(`correlation id ${header.correlationId}, expected ${id}`);
        const response = body as OffsetCommitResponse;
        const ms = performance.now() - started;
        if (Date.now() < warmupEnd) continue;
        if (response.topics.some((t) => t.partitions.some((p) => p.errorCode !== 0))) errors++;
        else {
          commits++;
          commitsVia[c % load.bootstraps.length]!++;
        }
        latencies.push(ms);
      }
    }),
  );
  clearTimeout(warmupTimer);
  const stop = sample();
  for (const client of clients) client.close();
  const cpu = Object.fromEntries(Object.entries(stop).map(([k, v]) => [k, v - (start[k] ?? NaN)]));
  return { commits, commitsVia, errors, latenciesMs: latencies, seconds: load.seconds, cpuMs: cpu };
}

/** The p-th percentile of ascending values (NaN for none). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
