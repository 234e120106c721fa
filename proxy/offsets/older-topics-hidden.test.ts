/**
 * A re-created topic's older offsets as every reader sees them (older-topics-hidden.ts): left out
 * of reads, "none" for a compare-and-set, on a MemoryStore; the offset service's `cas:` commits
 * and the admin operations over it. The lag collector and the offsets CLI have theirs in their own
 * test files; test/integration/offsets-topic-ids.test.ts compares all of them with a broker.
 */
import { standaloneServiceOptions } from '../../test/harness/offset-service.js';
import { describe, expect, test } from 'vitest';
import { write as contractWrite } from '../../backends/contract-support.js';
import { MemoryData, MemoryStore } from '../../backends/memory-store.js';
import type {
  CommitRequest,
  OffsetStore,
  OffsetWrite,
  PartitionOffset,
  TopicPartition,
} from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { AnyRequest } from '../../protocol/messages/index.js';
import { defaultOffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import type { RequestInfo } from '../core/extension.js';
import {
  AdminError,
  exportFromStore,
  getOffsets,
  groupSummaries,
  setOffset,
} from '../ops/admin/offsets-admin.js';
import { OlderTopicsHidden } from './older-topics-hidden.js';
import { OffsetService } from './service.js';
import { TopicIds } from './topic-ids.js';
import type { TopicEntry } from './topic-ids.js';
import { TopicIncarnations } from './topic-incarnations.js';

/** Offsets of topic `t` committed before 1000 are an older topic's; `u` was never re-created. */
const HIDDEN = new Map([['t', 1_000n]]);
const hiddenBefore = (topics: readonly string[]) =>
  Promise.resolve(new Map([...HIDDEN].filter(([name]) => topics.includes(name))));

/** A partition's write committed at `at`, with an expected offset when given. */
const write = (topic: string, partition: number, offset: bigint, at: bigint, expectedOffset?: bigint) =>
  contractWrite(topic, partition, offset, {
    commitTimestamp: at,
    ...(expectedOffset !== undefined ? { expectedOffset } : {}),
  });

let request = 0;
const commit = (store: OffsetStore, writes: OffsetWrite[]) =>
  store.commit({ group: 'g', writes, requestId: `r${request++}` });

/** t-0 older (10), t-1 current (11), u-0 of a topic never re-created, committed as early (12). */
async function seeded(): Promise<{ raw: MemoryStore; current: OlderTopicsHidden }> {
  const raw = new MemoryStore(new MemoryData());
  expect(
    await commit(raw, [write('t', 0, 10n, 500n), write('t', 1, 11n, 1_500n), write('u', 0, 12n, 500n)]),
  ).toEqual({ status: 'ok' });
  return { raw, current: new OlderTopicsHidden(raw, hiddenBefore) };
}

const shown = (offsets: PartitionOffset[]) =>
  offsets.map((o) => `${o.topic}-${o.partition}=${o.offset}`).sort();

describe('OlderTopicsHidden', () => {
  test('reads leave out offsets committed before their name was re-created', async () => {
    const { raw, current } = await seeded();
    expect(shown(await current.fetch('g', null))).toEqual(['t-1=11', 'u-0=12']);
    const asked: TopicPartition[] = [
      { topic: 't', partition: 0 },
      { topic: 't', partition: 1 },
    ];
    expect(shown(await current.fetch('g', asked))).toEqual(['t-1=11']);
    // Hidden, not deleted.
    expect(shown(await raw.fetch('g', null))).toEqual(['t-0=10', 't-1=11', 'u-0=12']);
  });

  test('compare-and-set: an older offset is none (-1); expecting it is a mismatch showing none', async () => {
    const { raw, current } = await seeded();
    expect(await commit(current, [write('t', 0, 20n, 2_000n, 10n)])).toEqual({
      status: 'cas-mismatch',
      mismatches: [{ topic: 't', partition: 0, expected: 10n, actual: -1n }],
    });
    expect(await commit(current, [write('t', 0, 20n, 2_000n, 7n)])).toEqual({
      status: 'cas-mismatch',
      mismatches: [{ topic: 't', partition: 0, expected: 7n, actual: -1n }],
    });
    expect(shown(await raw.fetch('g', null))).toEqual(['t-0=10', 't-1=11', 'u-0=12']);
    expect(await commit(current, [write('t', 0, 20n, 2_000n, -1n)])).toEqual({ status: 'ok' });
    expect(shown(await current.fetch('g', null))).toEqual(['t-0=20', 't-1=11', 'u-0=12']);
    // Now current: compared as stored.
    expect((await commit(current, [write('t', 0, 21n, 2_100n, -1n)])).status).toBe('cas-mismatch');
    expect(await commit(current, [write('t', 0, 21n, 2_100n, 20n)])).toEqual({ status: 'ok' });
  });

  test('partitions of current topics, and commits without compare-and-set, are the store’s as they are', async () => {
    const { current } = await seeded();
    expect((await commit(current, [write('t', 1, 30n, 2_000n, -1n)])).status).toBe('cas-mismatch');
    expect((await commit(current, [write('u', 0, 30n, 2_000n, -1n)])).status).toBe('cas-mismatch');
    expect(await commit(current, [write('u', 0, 30n, 2_000n, 12n), write('t', 1, 31n, 2_000n)])).toEqual({
      status: 'ok',
    });
    // One write of many mismatching: nothing written, the older one reported as none.
    expect(await commit(current, [write('t', 0, 40n, 2_000n, -1n), write('u', 0, 40n, 2_000n, 1n)])).toEqual({
      status: 'cas-mismatch',
      mismatches: [{ topic: 'u', partition: 0, expected: 1n, actual: 30n }],
    });
    expect(shown(await current.fetch('g', null))).toEqual(['t-1=31', 'u-0=30']);
  });

  test('an older offset deleted between the read and the commit: "none" still holds', async () => {
    const data = new MemoryData();
    const raw = new MemoryStore(data);
    await commit(raw, [write('t', 0, 10n, 500n)]);
    /** Deletes t-0 right after each of the decorator's reads, before its commit. */
    class DeletingAfterRead extends MemoryStore {
      override async fetch(group: string, partitions: TopicPartition[] | null) {
        const rows = await super.fetch(group, partitions);
        if (rows.length > 0) await super.deleteOffsets(group, [{ topic: 't', partition: 0 }]);
        return rows;
      }
    }
    const commits: CommitRequest[] = [];
    const inner = new DeletingAfterRead(data);
    const spied = Object.assign(inner, {
      commit: (r: CommitRequest) => (commits.push(r), MemoryStore.prototype.commit.call(inner, r)),
    });
    const current = new OlderTopicsHidden(spied, hiddenBefore);
    expect(await commit(current, [write('t', 0, 20n, 2_000n, -1n)])).toEqual({ status: 'ok' });
    expect(commits.map((c) => c.writes[0]!.expectedOffset)).toEqual([10n, -1n]);
    expect(new Set(commits.map((c) => c.requestId)).size).toBe(2);
    expect(shown(await raw.fetch('g', null))).toEqual(['t-0=20']);
  });
});

describe('the admin operations over it (offsets CLI and admin API)', () => {
  test('get, export and the group summary leave older offsets out', async () => {
    const { current } = await seeded();
    expect((await getOffsets(current, 'g')).map((l) => `${l.topic}-${l.partition}=${l.offset}`)).toEqual([
      't-1=11',
      'u-0=12',
    ]);
    expect((await exportFromStore(current)).map((l) => `${l.topic}-${l.partition}`)).toEqual(['t-1', 'u-0']);
    expect(await groupSummaries(current)).toEqual([{ group: 'g', partitions: 2, lastCommit: 1_500 }]);
  });

  test('set --expected: -1 where only an older offset is stored; the older value is a conflict', async () => {
    const { current } = await seeded();
    const set = (expected: bigint) =>
      setOffset(current, { group: 'g', topic: 't', partition: 0, offset: 5n, expected });
    await expect(set(10n)).rejects.toThrow(
      new AdminError('g t-0: expected offset 10, but it is -1; nothing changed', 'conflict'),
    );
    await set(-1n);
    expect((await getOffsets(current, 'g', 't')).map((l) => `${l.partition}=${l.offset}`)).toEqual([
      '0=5',
      '1=11',
    ]);
  });
});

describe('the offset service: a `cas:` commit after a re-creation', () => {
  test('cas:-1 is accepted where the broker shows no offset; cas:<older> is refused', async () => {
    const store = new MemoryStore(new MemoryData());
    // Committed to the first topic of the name a minute ago (the service stamps commits with the clock).
    await commit(store, [write('t', 0, 10n, BigInt(Date.now() - 60_000))]);
    let topics: TopicEntry[] = [{ name: 't', id: 'ID1' }];
    // Every read refreshes the topic ids (as one 5 s after the last would).
    const ids = new TopicIds(() => Promise.resolve([...topics]), { maxAgeMs: 0 });
    const incarnations = new TopicIncarnations(store, ids, { marginMs: 1_000 });
    const s = new OffsetService({
      ...standaloneServiceOptions(store, 'cas'),
      topicIds: ids,
      incarnations,
    });
    const info = (apiKey: number, apiVersion: number): RequestInfo => ({
      connectionId: 'c',
      apiKey,
      apiVersion,
      correlationId: 1,
      nodeId: 1,
    });
    const casCommit = async (metadata: string, offset: bigint) => {
      const body = {
        ...defaultOffsetCommitRequest(),
        groupId: 'g',
        generationIdOrMemberEpoch: -1,
        topics: [
          {
            name: 't',
            topicId: '',
            partitions: [
              {
                partitionIndex: 0,
                committedOffset: offset,
                committedLeaderEpoch: -1,
                committedMetadata: metadata,
              },
            ],
          },
        ],
      };
      const d = await s.handleRequest(info(ApiKey.OffsetCommit, 8), {
        apiKey: ApiKey.OffsetCommit,
        body,
      } as AnyRequest);
      return (d as { body: OffsetCommitResponse }).body.topics[0]!.partitions[0]!.errorCode;
    };
    const fetched = async () => {
      const body = {
        ...defaultOffsetFetchRequest(),
        groups: [
          { groupId: 'g', memberId: null, memberEpoch: -1, topics: [{ name: 't', partitionIndexes: [0] }] },
        ],
      };
      const d = await s.handleRequest(info(ApiKey.OffsetFetch, 8), {
        apiKey: ApiKey.OffsetFetch,
        body,
      } as AnyRequest);
      return (d as { body: OffsetFetchResponse }).body.groups[0]!.topics[0]!.partitions[0]!.committedOffset;
    };
    expect(await fetched()).toBe(10n);
    topics = [{ name: 't', id: 'ID2' }];
    expect(await fetched()).toBe(-1n);
    expect(await casCommit('cas:10', 11n)).toBe(ErrorCode.INVALID_COMMIT_OFFSET_SIZE);
    expect(await casCommit('cas:-1', 12n)).toBe(ErrorCode.NONE);
    expect(await fetched()).toBe(12n);
    ids.close();
  });
});
