/**
 * Lag rows from committed offsets and log-end offsets. Pure, so the arithmetic is unit-tested
 * without a broker.
 *
 * lag = log-end offset - committed offset, unclamped: that is what kafka-consumer-groups and the
 * Kafka exporter report, and a negative lag (offset beyond the log end, e.g. a recreated topic)
 * is worth seeing rather than hiding.
 */
import type { PartitionOffset } from '../../backends/store.js';

export interface LagRow {
  group: string;
  topic: string;
  partition: number;
  committed: bigint;
  /** Undefined when the log end could not be read (unknown topic, leader unavailable). */
  logEnd: bigint | undefined;
  lag: bigint | undefined;
  /** Milliseconds since the epoch. */
  commitTimestamp: bigint;
}

export function partitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

export function computeLag(
  committed: ReadonlyMap<string, readonly PartitionOffset[]>,
  logEnds: ReadonlyMap<string, bigint>,
): LagRow[] {
  const rows: LagRow[] = [];
  for (const [group, offsets] of committed) {
    for (const o of offsets) {
      // A stored offset < 0 is "no position" (a commit of -1 by some tools): nothing to measure.
      if (o.offset < 0n) continue;
      const logEnd = logEnds.get(partitionKey(o.topic, o.partition));
      rows.push({
        group,
        topic: o.topic,
        partition: o.partition,
        committed: o.offset,
        logEnd,
        lag: logEnd === undefined ? undefined : logEnd - o.offset,
        commitTimestamp: o.commitTimestamp,
      });
    }
  }
  return rows;
}

/** Per group: the sum of the lags it has a log end for. */
export function lagSums(rows: readonly LagRow[]): Map<string, bigint> {
  const sums = new Map<string, bigint>();
  for (const r of rows) {
    if (r.lag === undefined) continue;
    sums.set(r.group, (sums.get(r.group) ?? 0n) + r.lag);
  }
  return sums;
}
