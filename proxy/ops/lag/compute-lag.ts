/**
 * Lag rows from committed offsets and log-end offsets. Pure, so the arithmetic is unit-tested
 * without a broker.
 *
 * lag = log-end offset - committed offset, unclamped: that is what kafka-consumer-groups and the
 * Kafka exporter report, and a negative lag (offset beyond the log end, e.g. a recreated topic)
 * is worth seeing rather than hiding.
 */
import type { PartitionOffset } from '../../../backends/store.js';

export interface LagRow {
  group: string;
  topic: string;
  partition: number;
  /** -1n for a partition of a consumed topic that the group has not committed (Kafka exporter). */
  committed: bigint;
  /** Undefined when the log end could not be read (unknown topic, leader unavailable). */
  logEnd: bigint | undefined;
  /** -1n when `uncommitted` (as the Kafka exporter reports it); undefined without a log end. */
  lag: bigint | undefined;
  uncommitted: boolean;
  /** Milliseconds since the epoch (0n when uncommitted). */
  commitTimestamp: bigint;
}

export function partitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

/**
 * One row per partition of every topic a group has committed to, as the Kafka exporter
 * (danielqsj/kafka_exporter) reports them: a topic counts once any of its partitions has an offset,
 * and its other partitions (from `partitionsOf`, the cluster's metadata) show offset -1 and lag -1.
 */
export function computeLag(
  committed: ReadonlyMap<string, readonly PartitionOffset[]>,
  logEnds: ReadonlyMap<string, bigint>,
  partitionsOf: ReadonlyMap<string, readonly number[]> = new Map(),
): LagRow[] {
  const rows: LagRow[] = [];
  for (const [group, offsets] of committed) {
    const seen = new Set<string>();
    const topics = new Set<string>();
    for (const o of offsets) {
      // A stored offset < 0 is "no position" (a commit of -1 by some tools): nothing to measure.
      if (o.offset < 0n) continue;
      const key = partitionKey(o.topic, o.partition);
      seen.add(key);
      topics.add(o.topic);
      const logEnd = logEnds.get(key);
      rows.push({
        group,
        topic: o.topic,
        partition: o.partition,
        committed: o.offset,
        logEnd,
        lag: logEnd === undefined ? undefined : logEnd - o.offset,
        uncommitted: false,
        commitTimestamp: o.commitTimestamp,
      });
    }
    for (const topic of topics) {
      for (const partition of partitionsOf.get(topic) ?? []) {
        const key = partitionKey(topic, partition);
        if (seen.has(key)) continue;
        rows.push({
          group,
          topic,
          partition,
          committed: -1n,
          logEnd: logEnds.get(key),
          lag: -1n,
          uncommitted: true,
          commitTimestamp: 0n,
        });
      }
    }
  }
  return rows;
}

export interface GroupTopicSum {
  group: string;
  topic: string;
  sum: bigint;
}

/** Sums of `value` over rows, per group and topic (the Kafka exporter's sums are per both). */
function sumByGroupTopic(rows: readonly LagRow[], value: (r: LagRow) => bigint | undefined): GroupTopicSum[] {
  const byGroup = new Map<string, Map<string, GroupTopicSum>>();
  for (const r of rows) {
    const v = value(r);
    if (v === undefined) continue;
    let topics = byGroup.get(r.group);
    if (!topics) byGroup.set(r.group, (topics = new Map()));
    const s = topics.get(r.topic);
    if (s) s.sum += v;
    else topics.set(r.topic, { group: r.group, topic: r.topic, sum: v });
  }
  return [...byGroup.values()].flatMap((t) => [...t.values()]);
}

/** Per group and topic: the sum of the lags it has a log end for (uncommitted partitions left out). */
export const lagSums = (rows: readonly LagRow[]): GroupTopicSum[] =>
  sumByGroupTopic(rows, (r) => (r.uncommitted ? undefined : r.lag));

/** Per group and topic: the current offsets, -1 of uncommitted partitions included (as the exporter adds them). */
export const currentOffsetSums = (rows: readonly LagRow[]): GroupTopicSum[] =>
  sumByGroupTopic(rows, (r) => r.committed);
