/**
 * OffsetCommit and OffsetFetch v10 (topic ids) through the offset service on a MemoryStore, with
 * topic ids from a fake metadata source: offsets are kept by name (read back by v9 and by the
 * store), answers echo the ids, and ids the cluster does not know get UNKNOWN_TOPIC_ID as the
 * broker gives it. Against a real broker: offsets-topic-ids.test.ts.
 */
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { AnyRequest } from '../../protocol/messages/index.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import {
  defaultOffsetCommitRequest,
  defaultOffsetCommitRequestPartition,
} from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import type { RequestDecision, RequestInfo } from '../core/extension.js';
import { silentLogger } from '../common/log.js';
import { BrokerAuthorizer } from './authorizer.js';
import type { Decision } from './authorizer.js';
import { GuardPolicy } from './guard-policy.js';
import type { CommitRefusal } from './offset-commit.js';
import { OffsetService } from './service.js';
import type { TopicEntry } from './topic-ids.js';
import { TopicIds } from './topic-ids.js';

const A = 'AAAAAAAAAAAAAAAAAAAAAQ';
const B = 'AAAAAAAAAAAAAAAAAAAAAg';
const UNKNOWN = 'AAAAAAAAAAAAAAAAAAAAAw';

function service(
  topics: { list: TopicEntry[]; down?: boolean },
  missGapMs = 500,
  authorizer: BrokerAuthorizer | null = null,
) {
  const store = new MemoryStore();
  const refused: [string, CommitRefusal, number][] = [];
  const s = new OffsetService({
    store,
    guards: new GuardPolicy('fence'),
    unknownTopics: 'allow',
    fallbackUpstream: false,
    mirrorCommits: false,
    lookups: null,
    log: silentLogger,
    authorizer,
    metrics: {
      commitAccepted: () => undefined,
      commitRefused: (g, reason, n) => refused.push([g, reason, n]),
      mirrored: () => undefined,
    },
    topicIds: new TopicIds(
      () => (topics.down ? Promise.reject(new Error('no broker')) : Promise.resolve(topics.list)),
      { missGapMs },
    ),
  });
  return { s, store, refused };
}

const info = (apiKey: number, apiVersion: number): RequestInfo => ({
  connectionId: 'c1',
  apiKey,
  apiVersion,
  correlationId: 1,
  nodeId: 1,
});

async function ask<T>(s: OffsetService, apiKey: number, version: number, req: unknown): Promise<T> {
  const d: RequestDecision = await s.handleRequest(info(apiKey, version), {
    apiKey,
    body: req,
  } as AnyRequest);
  expect(d.action).toBe('respond');
  return (d as { body: unknown }).body as T;
}

const commitV10 = (
  group: string,
  topics: [string, number[]][],
  offset = 7n,
  generation = -1,
): OffsetCommitRequest => ({
  ...defaultOffsetCommitRequest(),
  groupId: group,
  generationIdOrMemberEpoch: generation,
  memberId: generation < 0 ? '' : 'm1',
  topics: topics.map(([topicId, parts]) => ({
    name: '',
    topicId,
    partitions: parts.map((partitionIndex) => ({
      ...defaultOffsetCommitRequestPartition(),
      partitionIndex,
      committedOffset: offset,
      committedLeaderEpoch: 3,
      committedMetadata: 'md',
    })),
  })),
});

const fetchV10 = (group: string, topics: [string, number[]][] | null) => ({
  ...defaultOffsetFetchRequest(),
  groups: [
    {
      groupId: group,
      memberId: null,
      memberEpoch: -1,
      topics:
        topics === null
          ? null
          : topics.map(([topicId, partitionIndexes]) => ({ name: '', topicId, partitionIndexes })),
    },
  ],
  requireStable: true,
});

const byId = (res: OffsetCommitResponse) =>
  res.topics.map((t) => [t.topicId, t.partitions.map((p) => [p.partitionIndex, p.errorCode])]);

describe('OffsetCommit and OffsetFetch v10 (topic ids)', () => {
  test('a v10 commit is stored by name, read back by v9 and by v10 under its id', async () => {
    const { s, store } = service({ list: [{ name: 'a', id: A }] });
    const res = await ask<OffsetCommitResponse>(s, ApiKey.OffsetCommit, 10, commitV10('g', [[A, [0, 1]]]));
    expect(byId(res)).toEqual([
      [
        A,
        [
          [0, 0],
          [1, 0],
        ],
      ],
    ]);
    const stored = await store.fetch('g', null);
    expect(stored.map((o) => [o.topic, o.partition, o.offset, o.leaderEpoch, o.metadata])).toEqual([
      ['a', 0, 7n, 3, 'md'],
      ['a', 1, 7n, 3, 'md'],
    ]);
    const v9 = await ask<OffsetFetchResponse>(s, ApiKey.OffsetFetch, 9, {
      ...defaultOffsetFetchRequest(),
      groups: [
        {
          groupId: 'g',
          memberId: null,
          memberEpoch: -1,
          topics: [{ name: 'a', topicId: '', partitionIndexes: [1] }],
        },
      ],
    });
    expect(v9.groups[0]!.topics[0]!.partitions[0]!.committedOffset).toBe(7n);
    const v10 = await ask<OffsetFetchResponse>(s, ApiKey.OffsetFetch, 10, fetchV10('g', [[A, [0, 2]]]));
    expect(v10.groups[0]!.errorCode).toBe(0);
    expect(v10.groups[0]!.topics.map((t) => t.topicId)).toEqual([A]);
    expect(
      v10.groups[0]!.topics[0]!.partitions.map((p) => [
        p.committedOffset,
        p.committedLeaderEpoch,
        p.metadata,
      ]),
    ).toEqual([
      [7n, 3, 'md'],
      [-1n, -1, ''],
    ]);
  });

  test('an unknown id gets UNKNOWN_TOPIC_ID on each partition, beside known ones, in request order', async () => {
    const { s, store, refused } = service({
      list: [
        { name: 'a', id: A },
        { name: 'b', id: B },
      ],
    });
    const res = await ask<OffsetCommitResponse>(
      s,
      ApiKey.OffsetCommit,
      10,
      commitV10('g', [
        [UNKNOWN, [0, 1]],
        [B, [0]],
        [A, [2]],
      ]),
    );
    expect(byId(res)).toEqual([
      [
        UNKNOWN,
        [
          [0, ErrorCode.UNKNOWN_TOPIC_ID],
          [1, ErrorCode.UNKNOWN_TOPIC_ID],
        ],
      ],
      [B, [[0, 0]]],
      [A, [[2, 0]]],
    ]);
    expect(refused).toEqual([['g', 'unknown_topic', 2]]);
    expect((await store.fetch('g', null)).map((o) => `${o.topic}/${o.partition}`).sort()).toEqual([
      'a/2',
      'b/0',
    ]);
  });

  test('only unknown ids: answered at once, the group not checked (no GROUP_ID_NOT_FOUND)', async () => {
    const { s, store } = service({ list: [{ name: 'a', id: A }] });
    // A member's epoch in a group the store does not know would be GROUP_ID_NOT_FOUND at v9+.
    const res = await ask<OffsetCommitResponse>(
      s,
      ApiKey.OffsetCommit,
      10,
      commitV10('g', [[UNKNOWN, [0]]], 7n, 5),
    );
    expect(byId(res)).toEqual([[UNKNOWN, [[0, ErrorCode.UNKNOWN_TOPIC_ID]]]]);
    const known = await ask<OffsetCommitResponse>(
      s,
      ApiKey.OffsetCommit,
      10,
      commitV10('g', [[A, [0]]], 7n, 5),
    );
    expect(byId(known)).toEqual([[A, [[0, ErrorCode.GROUP_ID_NOT_FOUND]]]]);
    expect(await store.fetch('g', null)).toEqual([]);
  });

  test('a group the client may not READ: GROUP_AUTHORIZATION_FAILED on unknown ids too, as the broker checks it first', async () => {
    const denied = new (class extends BrokerAuthorizer {
      override authorize(): Promise<Decision> {
        return Promise.resolve({ groupError: ErrorCode.GROUP_AUTHORIZATION_FAILED, deniedTopics: new Set() });
      }
    })();
    const { s, refused } = service({ list: [{ name: 'a', id: A }] }, 500, denied);
    const res = await ask<OffsetCommitResponse>(
      s,
      ApiKey.OffsetCommit,
      10,
      commitV10('g', [
        [UNKNOWN, [0]],
        [A, [0]],
      ]),
    );
    expect(byId(res)).toEqual([
      [UNKNOWN, [[0, ErrorCode.GROUP_AUTHORIZATION_FAILED]]],
      [A, [[0, ErrorCode.GROUP_AUTHORIZATION_FAILED]]],
    ]);
    expect(refused).toEqual([['g', 'unauthorized', 2]]);
  });

  test('a fetch of an unknown id: offset -1 and UNKNOWN_TOPIC_ID on each partition, the group NONE', async () => {
    const { s } = service({ list: [{ name: 'a', id: A }] });
    await ask(s, ApiKey.OffsetCommit, 10, commitV10('g', [[A, [0]]]));
    const res = await ask<OffsetFetchResponse>(
      s,
      ApiKey.OffsetFetch,
      10,
      fetchV10('g', [
        [UNKNOWN, [0, 1]],
        [A, [0]],
      ]),
    );
    const g = res.groups[0]!;
    expect(g.errorCode).toBe(0);
    expect(
      g.topics.map((t) => [t.topicId, t.partitions.map((p) => [p.committedOffset, p.metadata, p.errorCode])]),
    ).toEqual([
      [
        UNKNOWN,
        [
          [-1n, '', ErrorCode.UNKNOWN_TOPIC_ID],
          [-1n, '', ErrorCode.UNKNOWN_TOPIC_ID],
        ],
      ],
      [A, [[7n, 'md', 0]]],
    ]);
  });

  test('a fetch of all topics names stored topics by their ids and leaves out names the cluster lacks', async () => {
    const topics = {
      list: [
        { name: 'a', id: A },
        { name: 'b', id: B },
      ],
    };
    const { s, store } = service(topics, 0);
    await ask(
      s,
      ApiKey.OffsetCommit,
      10,
      commitV10('g', [
        [A, [0]],
        [B, [1]],
      ]),
    );
    const all = () => ask<OffsetFetchResponse>(s, ApiKey.OffsetFetch, 10, fetchV10('g', null));
    const ids = (r: OffsetFetchResponse) =>
      r.groups[0]!.topics.map((t) => [
        t.topicId,
        t.partitions.map((p) => [p.partitionIndex, p.committedOffset]),
      ]);
    expect(ids(await all())).toEqual([
      [A, [[0, 7n]]],
      [B, [[1, 7n]]],
    ]);
    topics.list = [{ name: 'a', id: A }]; // b deleted; a lookup of an unknown id refreshes the cache
    await ask(s, ApiKey.OffsetFetch, 10, fetchV10('g', [[UNKNOWN, [0]]]));
    expect(ids(await all())).toEqual([[A, [[0, 7n]]]]);
    // Still in the store, by name (v9 and `offsets get` see it).
    expect((await store.fetch('g', null)).map((o) => o.topic).sort()).toEqual(['a', 'b']);
  });

  test('no cluster to ask for an id: COORDINATOR_NOT_AVAILABLE (retriable), nothing stored', async () => {
    const { s, store, refused } = service({ list: [], down: true });
    const res = await ask<OffsetCommitResponse>(s, ApiKey.OffsetCommit, 10, commitV10('g', [[A, [0]]]));
    expect(byId(res)).toEqual([[A, [[0, ErrorCode.COORDINATOR_NOT_AVAILABLE]]]]);
    expect(refused).toEqual([['g', 'broker_unanswered', 1]]);
    const fetched = await ask<OffsetFetchResponse>(s, ApiKey.OffsetFetch, 10, fetchV10('g', [[A, [0]]]));
    expect(fetched.groups[0]).toMatchObject({ errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE, topics: [] });
    expect(await store.fetch('g', null)).toEqual([]);
  });

  test('v10 is offered only where the broker offers it', () => {
    const { s } = service({ list: [] });
    expect(s.advertisedVersions(ApiKey.OffsetCommit, { min: 2, max: 10 })).toEqual({ min: 2, max: 10 });
    expect(s.advertisedVersions(ApiKey.OffsetCommit, { min: 0, max: 9 })).toEqual({ min: 2, max: 9 });
    expect(s.advertisedVersions(ApiKey.OffsetFetch, { min: 1, max: 9 })).toEqual({ min: 1, max: 9 });
    expect(s.advertisedVersions(ApiKey.OffsetFetch, { min: 1, max: 10 })).toEqual({ min: 1, max: 10 });
    // Without a broker range (a request's version is checked): up to v10.
    expect(s.advertisedVersions(ApiKey.OffsetCommit)).toEqual({ min: 2, max: 10 });
  });
});
