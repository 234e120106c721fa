// End-to-end scenarios written against the BedClient interface and a bootstrap string, so the same
// checks run directly against brokers (the baseline) and, later, through the proxy.
//
// Every scenario works on a fresh topic and group, so scenarios can run concurrently on one cluster.

import { randomBytes } from 'node:crypto';

import { expect } from 'vitest';

import { createTopics } from './kafkajs.js';
import {
  paddedRecordValue,
  recordKey,
  recordValue,
  type BedClient,
  type ClientTarget,
  type CommittedOffset,
  type ConsumedRecord,
} from './types.js';

export interface ScenarioOptions {
  /** Where topics are created (kafkajs admin); defaults to the scenario's target. */
  admin?: ClientTarget;
  partitions?: number;
  replicationFactor?: number;
  /** Deadline of each consume call. */
  timeoutMs?: number;
}

/** A topic or group name unique to this run, readable in broker logs. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

/**
 * The records are exactly record `from` .. `to - 1` of the bed's convention, each once, with keys
 * matching values, and offsets strictly increasing within each partition.
 */
export function expectExactlyRecords(records: ConsumedRecord[], from: number, to: number): void {
  const values = records.map((r) => r.value);
  const duplicates = values.filter((v, i) => values.indexOf(v) !== i);
  expect(duplicates, 'records delivered more than once').toEqual([]);
  const expected = Array.from({ length: to - from }, (_, n) => recordValue(from + n));
  const missing = expected.filter((v) => !values.includes(v));
  expect(missing.slice(0, 20), `${missing.length} records missing`).toEqual([]);
  expect(records.length).toBe(to - from);
  for (const r of records) {
    const i = Number(r.value?.slice('value-'.length));
    expect(r.key).toBe(recordKey(i));
  }
  const lastOffset = new Map<number, number>();
  for (const r of records) {
    const previous = lastOffset.get(r.partition) ?? -1;
    expect(r.offset, `offsets of partition ${r.partition} go backwards`).toBeGreaterThan(previous);
    lastOffset.set(r.partition, r.offset);
  }
}

/**
 * The records are exactly records `from` .. `to - 1` written with values padded to `bytes`
 * characters (paddedRecordValue: the Java driver's --value-bytes), each once and byte for byte.
 */
export function expectExactlyPaddedRecords(
  records: ConsumedRecord[],
  from: number,
  to: number,
  bytes: number,
): void {
  const seen = new Set<number>();
  const wrong: string[] = [];
  for (const r of records) {
    const value = r.value ?? '';
    const i = Number(value.slice('value-'.length, value.indexOf('|')));
    if (!Number.isInteger(i) || value !== paddedRecordValue(i, bytes) || r.key !== recordKey(i)) {
      wrong.push(`${r.partition}@${r.offset}: key ${r.key}, ${value.length} characters`);
    } else if (seen.has(i)) {
      wrong.push(`record ${i} again at ${r.partition}@${r.offset}`);
    }
    seen.add(i);
  }
  expect(wrong.slice(0, 10), `${wrong.length} records not as written`).toEqual([]);
  const missing = Array.from({ length: to - from }, (_, n) => from + n).filter((i) => !seen.has(i));
  expect(missing.slice(0, 20), `${missing.length} records missing`).toEqual([]);
  expect(records.length).toBe(to - from);
}

/**
 * After consuming `records` (everything consumed so far by the group on a fresh topic), the
 * committed offset of each partition is one past the last record consumed from it.
 */
export function expectCommittedAfter(
  committed: CommittedOffset[],
  records: ConsumedRecord[],
  topic: string,
): void {
  const expected = new Map<number, number>();
  for (const r of records) expected.set(r.partition, Math.max(expected.get(r.partition) ?? 0, r.offset + 1));
  const actual = committed.filter((c) => c.topic === topic);
  expect(
    actual.map((c) => [c.partition, c.offset]),
    'committed offsets',
  ).toEqual([...expected.entries()].sort((a, b) => a[0] - b[0]));
}

export interface ScenarioReport {
  topic: string;
  group: string;
  /** Wall time of the scenario, for the test log. */
  elapsedMs: number;
}

/** Produce `count` records with `client`, consume them all in a group with `client`, check records and commits. */
export async function produceAndConsume(
  client: BedClient,
  target: ClientTarget,
  opts: ScenarioOptions & { count?: number } = {},
): Promise<ScenarioReport> {
  const started = Date.now();
  const count = opts.count ?? 1000;
  const topic = uniqueName(`pc-${client.name}`);
  const group = `${topic}-group`;
  await createTopics(opts.admin ?? target, [
    { topic, partitions: opts.partitions ?? 3, replicationFactor: opts.replicationFactor ?? 1 },
  ]);
  const produced = await client.produce(target, { topic, count });
  expect(produced.count).toBe(count);
  const consumed = await client.consume(target, { topic, group, max: count, ...timeout(opts) });
  expect(
    consumed.timedOut,
    `${client.name} timed out after ${consumed.records.length} of ${count} records`,
  ).toBe(false);
  expectExactlyRecords(consumed.records, 0, count);
  expectCommittedAfter(consumed.committed, consumed.records, topic);
  return { topic, group, elapsedMs: Date.now() - started };
}

/**
 * A group consumes part of a topic and commits, its consumer stops, a new consumer of the same group
 * resumes: it must start exactly at the committed offsets (nothing lost, nothing repeated). A last
 * consumer reads a later batch to show the second one committed its end position too.
 * `resumeWith` lets another client resume the group (cross-client offset compatibility).
 */
export async function commitStopResume(
  client: BedClient,
  target: ClientTarget,
  opts: ScenarioOptions & { count?: number; firstBatch?: number; resumeWith?: BedClient } = {},
): Promise<ScenarioReport> {
  const started = Date.now();
  const count = opts.count ?? 1000;
  const firstBatch = opts.firstBatch ?? Math.floor(count * 0.4);
  const resumer = opts.resumeWith ?? client;
  const topic = uniqueName(`csr-${client.name}`);
  const group = `${topic}-group`;
  await createTopics(opts.admin ?? target, [
    { topic, partitions: opts.partitions ?? 3, replicationFactor: opts.replicationFactor ?? 1 },
  ]);
  await client.produce(target, { topic, count });

  const first = await client.consume(target, { topic, group, max: firstBatch, ...timeout(opts) });
  expect(first.timedOut, `first consumer timed out after ${first.records.length} records`).toBe(false);
  expect(first.records).toHaveLength(firstBatch);
  expectCommittedAfter(first.committed, first.records, topic);
  const firstTotal = first.committed.reduce((sum, c) => sum + c.offset, 0);
  expect(firstTotal, 'committed offsets add up to the records consumed').toBe(firstBatch);

  const second = await resumer.consume(target, { topic, group, max: count - firstBatch, ...timeout(opts) });
  expect(second.timedOut, `resuming consumer timed out after ${second.records.length} records`).toBe(false);
  // Together exactly the produced records, so the second consumer started at the committed offsets.
  expectExactlyRecords([...first.records, ...second.records], 0, count);
  for (const r of second.records) {
    const committedBefore = first.committed.find((c) => c.partition === r.partition)?.offset ?? 0;
    expect(r.offset).toBeGreaterThanOrEqual(committedBefore);
  }
  expectCommittedAfter(second.committed, [...first.records, ...second.records], topic);

  // Had the second consumer not committed its end, this one would re-read old records.
  const extra = 10;
  await client.produce(target, { topic, count: extra, start: count });
  const third = await client.consume(target, { topic, group, max: extra, ...timeout(opts) });
  expectExactlyRecords(third.records, count, count + extra);
  return { topic, group, elapsedMs: Date.now() - started };
}

function timeout(opts: ScenarioOptions): { timeoutMs?: number } {
  return opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs };
}
