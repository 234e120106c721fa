/**
 * OffsetFetch's version rules and its paths to the broker (docs/errors.md, OffsetFetch), on a
 * MemoryStore and fake broker lookups. The same answers are compared with a real broker in
 * test/integration/offsets-semantics.test.ts; these run in milliseconds.
 */
import { describe, expect, test } from 'vitest';
import { StoreUnavailableError } from '../../backends/errors.js';
import { MemoryStore } from '../../backends/memory-store.js';
import type { OffsetStore, TopicPartition } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import type { Decision } from './authorizer.js';
import { storeOffset } from '../../test/harness/stored-offsets.js';
import { handleOffsetFetch } from './offset-fetch.js';
import type { FetchDeps, FetchedGroup } from './offset-fetch.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';

type Topics = Record<string, number[]> | null;

const asTopics = (topics: Topics) =>
  topics === null
    ? null
    : Object.entries(topics).map(([name, partitionIndexes]) => ({
        name,
        topicId: ZERO_UUID,
        partitionIndexes,
      }));

/** A request of one group, in the shape of `version`. */
function request(
  version: number,
  group: string,
  topics: Topics,
  member: { memberId?: string | null; memberEpoch?: number } = {},
  requireStable = false,
): OffsetFetchRequest {
  if (version >= 8) {
    return {
      ...defaultOffsetFetchRequest(),
      requireStable,
      groups: [
        {
          groupId: group,
          memberId: member.memberId ?? null,
          memberEpoch: member.memberEpoch ?? -1,
          topics: asTopics(topics),
        },
      ],
    };
  }
  return { ...defaultOffsetFetchRequest(), requireStable, groupId: group, topics: asTopics(topics) };
}

/** The one group's error and topics, wherever the version puts them. */
function only(res: OffsetFetchResponse, version: number): FetchedGroup {
  if (version >= 8) {
    expect(res.groups).toHaveLength(1);
    // Topic ids are v10's; below it they stay the zero id, left out to compare with older versions.
    const topics = res.groups[0]!.topics.map(({ topicId, ...t }) => {
      expect(topicId).toBe(ZERO_UUID);
      return t;
    });
    return { errorCode: res.groups[0]!.errorCode, topics };
  }
  return { errorCode: res.errorCode, topics: res.topics };
}

const ALL_VERSIONS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];

describe('OffsetFetch: what the store holds', () => {
  test('no committed offset: -1, leader epoch -1, metadata "" and NONE, in every version', async () => {
    for (const version of ALL_VERSIONS) {
      const res = await handleOffsetFetch(request(version, 'nobody', { t: [0, 1] }), version, {
        store: new MemoryStore(),
      });
      const g = only(res, version);
      expect(g.errorCode, `v${version}`).toBe(ErrorCode.NONE);
      expect(g.topics, `v${version}`).toEqual([
        {
          name: 't',
          partitions: [0, 1].map((p) => ({
            partitionIndex: p,
            committedOffset: -1n,
            committedLeaderEpoch: -1,
            metadata: '',
            errorCode: ErrorCode.NONE,
          })),
        },
      ]);
    }
  });

  test('committed offsets read back; the leader epoch only from v5', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 1, 42n);
    for (const version of ALL_VERSIONS) {
      const g = only(
        await handleOffsetFetch(request(version, 'g', { t: [1, 0] }), version, { store }),
        version,
      );
      expect(g.topics[0]!.partitions, `v${version}`).toEqual([
        {
          partitionIndex: 1,
          committedOffset: 42n,
          committedLeaderEpoch: version >= 5 ? 6 : -1,
          metadata: 'meta',
          errorCode: ErrorCode.NONE,
        },
        { partitionIndex: 0, committedOffset: -1n, committedLeaderEpoch: -1, metadata: '', errorCode: 0 },
      ]);
    }
  });

  test('null topics: only partitions with a committed offset, topics by name and partitions by index', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 'zeta', 3, 1n);
    await storeOffset(store, 'g', 'alpha', 2, 2n);
    await storeOffset(store, 'g', 'zeta', 0, 3n);
    for (const version of [2, 7, 8, 9]) {
      const g = only(await handleOffsetFetch(request(version, 'g', null), version, { store }), version);
      expect(
        g.topics.map((t) => [t.name, t.partitions.map((p) => [p.partitionIndex, p.committedOffset])]),
        `v${version}`,
      ).toEqual([
        ['alpha', [[2, 2n]]],
        [
          'zeta',
          [
            [0, 3n],
            [3, 1n],
          ],
        ],
      ]);
      // A group the store does not have: an empty list, never GROUP_ID_NOT_FOUND.
      expect(
        only(await handleOffsetFetch(request(version, 'none', null), version, { store }), version),
      ).toEqual({
        errorCode: ErrorCode.NONE,
        topics: [],
      });
    }
  });

  test('v8+: several groups in one request, each answered on its own', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'a', 't', 0, 1n);
    await storeOffset(store, 'b', 't', 0, 2n);
    const req: OffsetFetchRequest = {
      ...defaultOffsetFetchRequest(),
      groups: ['b', 'a', 'c'].map((groupId) => ({
        groupId,
        memberId: null,
        memberEpoch: -1,
        topics: [{ name: 't', topicId: ZERO_UUID, partitionIndexes: [0] }],
      })),
    };
    const res = await handleOffsetFetch(req, 8, { store });
    expect(
      res.groups.map((g) => [g.groupId, g.errorCode, g.topics[0]!.partitions[0]!.committedOffset]),
    ).toEqual([
      ['b', 0, 2n],
      ['a', 0, 1n],
      ['c', 0, -1n],
    ]);
    expect(res.topics).toEqual([]);
  });
});

describe('OffsetFetch: where each version puts a group-level error', () => {
  const failing = (): OffsetStore => {
    const s = new MemoryStore();
    s.fetch = () => Promise.reject(new StoreUnavailableError('down'));
    return s;
  };

  test('v0-1: copied into every requested partition, with the no-offset defaults', async () => {
    for (const version of [0, 1]) {
      const res = await handleOffsetFetch(request(version, 'g', { a: [0, 1], b: [4] }), version, {
        store: failing(),
      });
      expect(res.errorCode, `v${version}`).toBe(ErrorCode.NONE);
      expect(
        res.topics.map((t) => [t.name, t.partitions.map((p) => [p.partitionIndex, p.errorCode])]),
      ).toEqual([
        [
          'a',
          [
            [0, ErrorCode.COORDINATOR_NOT_AVAILABLE],
            [1, ErrorCode.COORDINATOR_NOT_AVAILABLE],
          ],
        ],
        ['b', [[4, ErrorCode.COORDINATOR_NOT_AVAILABLE]]],
      ]);
      expect(res.topics[0]!.partitions[0]).toMatchObject({
        committedOffset: -1n,
        committedLeaderEpoch: -1,
        metadata: '',
      });
    }
  });

  test('v2-7: at the top level, with no topics', async () => {
    for (const version of [2, 5, 7]) {
      const res = await handleOffsetFetch(request(version, 'g', { t: [0] }), version, { store: failing() });
      expect([res.errorCode, res.topics, res.groups], `v${version}`).toEqual([
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        [],
        [],
      ]);
    }
  });

  test('v8+: per group, with no topics; the top level stays NONE', async () => {
    for (const version of [8, 9]) {
      const res = await handleOffsetFetch(request(version, 'g', { t: [0] }), version, { store: failing() });
      expect(res.errorCode).toBe(ErrorCode.NONE);
      expect(res.groups).toEqual([
        { groupId: 'g', errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE, topics: [] },
      ]);
    }
  });

  test('a store slower than its deadline is REQUEST_TIMED_OUT', async () => {
    const store = new MemoryStore();
    store.getGroup = () => Promise.reject(new StoreUnavailableError('slow', { timedOut: true }));
    const res = await handleOffsetFetch(request(8, 'g', { t: [0] }), 8, { store });
    expect(res.groups[0]!.errorCode).toBe(ErrorCode.REQUEST_TIMED_OUT);
  });
});

describe('OffsetFetch: authorization (DESCRIBE)', () => {
  const decide =
    (decision: Partial<Decision>, calls: string[][] = []) =>
    async (_g: string, topics: string[]): Promise<Decision> => {
      calls.push(topics);
      return { groupError: ErrorCode.NONE, deniedTopics: new Set(), ...decision };
    };

  test('a refused group gets the group-level code where the version puts it', async () => {
    const authorize = decide({ groupError: ErrorCode.GROUP_AUTHORIZATION_FAILED });
    const store = new MemoryStore();
    const v8 = await handleOffsetFetch(request(8, 'g', { t: [0] }), 8, { store, authorize });
    expect(v8.groups[0]).toEqual({
      groupId: 'g',
      errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED,
      topics: [],
    });
    const v3 = await handleOffsetFetch(request(3, 'g', { t: [0] }), 3, { store, authorize });
    expect(v3.errorCode).toBe(ErrorCode.GROUP_AUTHORIZATION_FAILED);
    const v1 = await handleOffsetFetch(request(1, 'g', { t: [0] }), 1, { store, authorize });
    expect(v1.topics[0]!.partitions[0]!.errorCode).toBe(ErrorCode.GROUP_AUTHORIZATION_FAILED);
  });

  test("a denied topic's partitions say TOPIC_AUTHORIZATION_FAILED and show no offset", async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 'secret', 0, 5n);
    await storeOffset(store, 'g', 'open', 0, 6n);
    const calls: string[][] = [];
    const authorize = decide({ deniedTopics: new Set(['secret']) }, calls);
    const g = only(
      await handleOffsetFetch(request(8, 'g', { secret: [0], open: [0] }), 8, { store, authorize }),
      8,
    );
    expect(calls).toEqual([['secret', 'open']]);
    expect(g.topics).toEqual([
      {
        name: 'secret',
        partitions: [
          {
            partitionIndex: 0,
            committedOffset: -1n,
            committedLeaderEpoch: -1,
            metadata: '',
            errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
          },
        ],
      },
      {
        name: 'open',
        partitions: [
          { partitionIndex: 0, committedOffset: 6n, committedLeaderEpoch: 6, metadata: 'meta', errorCode: 0 },
        ],
      },
    ]);
  });

  test('null topics: the stored topics are checked after the read, and denied ones left out', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 'secret', 0, 5n);
    await storeOffset(store, 'g', 'open', 0, 6n);
    await storeOffset(store, 'g', 'open', 1, 7n);
    const calls: string[][] = [];
    const authorize = decide({ deniedTopics: new Set(['secret']) }, calls);
    const g = only(await handleOffsetFetch(request(8, 'g', null), 8, { store, authorize }), 8);
    expect(calls).toEqual([['open', 'secret']]);
    expect(g.topics.map((t) => t.name)).toEqual(['open']);
  });
});

describe('OffsetFetch v9: the member of a KIP-848 group', () => {
  async function consumerGroup(): Promise<MemoryStore> {
    const store = new MemoryStore();
    await store.updateGroup('g', { kind: 'member-epoch', memberId: 'm1', memberEpoch: 5, exact: true });
    await storeOffset(store, 'g', 't', 0, 9n);
    return store;
  }
  const fetch = async (
    store: OffsetStore,
    member: { memberId?: string | null; memberEpoch?: number },
    version = 9,
    deps: Partial<FetchDeps> = {},
  ) =>
    only(
      await handleOffsetFetch(request(version, 'g', { t: [0] }, member), version, { store, ...deps }),
      version,
    );

  test('unknown member: UNKNOWN_MEMBER_ID; other epoch: STALE_MEMBER_EPOCH; the current one reads', async () => {
    const store = await consumerGroup();
    expect((await fetch(store, { memberId: 'zz', memberEpoch: 5 })).errorCode).toBe(
      ErrorCode.UNKNOWN_MEMBER_ID,
    );
    expect((await fetch(store, { memberId: 'm1', memberEpoch: 4 })).errorCode).toBe(
      ErrorCode.STALE_MEMBER_EPOCH,
    );
    const ok = await fetch(store, { memberId: 'm1', memberEpoch: 5 });
    expect(ok.errorCode).toBe(ErrorCode.NONE);
    expect(ok.topics[0]!.partitions[0]!.committedOffset).toBe(9n);
  });

  test('no member named (null id, epoch -1), below v9, or a classic group: not validated', async () => {
    const store = await consumerGroup();
    expect((await fetch(store, {})).errorCode).toBe(ErrorCode.NONE);
    expect((await fetch(store, { memberId: 'zz', memberEpoch: 5 }, 8)).errorCode).toBe(ErrorCode.NONE);
    const classic = new MemoryStore();
    await classic.updateGroup('g', {
      kind: 'joined',
      generationId: 1,
      memberId: 'c1',
      groupInstanceId: null,
      members: [{ memberId: 'c1', groupInstanceId: null }],
    });
    expect((await fetch(classic, { memberId: 'zz', memberEpoch: 5 })).errorCode).toBe(ErrorCode.NONE);
  });

  test("without fresh evidence the broker's answer decides, and its updates reach the store", async () => {
    const store = await consumerGroup();
    const asked: [string | null, number][] = [];
    const deps: Partial<FetchDeps> = {
      memberFresh: () => false,
      memberVerdict: async (_g, m, e) => {
        asked.push([m, e]);
        return {
          code: ErrorCode.STALE_MEMBER_EPOCH,
          updates: [{ kind: 'member-epoch', memberId: 'm1', memberEpoch: 6, exact: true }],
        };
      },
    };
    expect((await fetch(store, { memberId: 'm1', memberEpoch: 5 }, 9, deps)).errorCode).toBe(
      ErrorCode.STALE_MEMBER_EPOCH,
    );
    expect(asked).toEqual([['m1', 5]]);
    expect((await store.getGroup('g'))!.members[0]!.memberEpoch).toBe(6);
  });

  test('a fresh member the store accepts is not asked about; a refusal is, and the broker may accept', async () => {
    const store = await consumerGroup();
    let asked = 0;
    const deps: Partial<FetchDeps> = {
      memberFresh: () => true,
      memberVerdict: async () => {
        asked++;
        return { code: null, updates: [] };
      },
    };
    expect((await fetch(store, { memberId: 'm1', memberEpoch: 5 }, 9, deps)).errorCode).toBe(ErrorCode.NONE);
    expect(asked).toBe(0);
    expect((await fetch(store, { memberId: 'm1', memberEpoch: 7 }, 9, deps)).errorCode).toBe(ErrorCode.NONE);
    expect(asked).toBe(1);
  });

  test('a refusal the broker cannot confirm is retriable; an acceptance stands', async () => {
    const store = await consumerGroup();
    const deps: Partial<FetchDeps> = {
      memberFresh: () => false,
      memberVerdict: () => Promise.reject(new Error('down')),
    };
    expect((await fetch(store, { memberId: 'm1', memberEpoch: 4 }, 9, deps)).errorCode).toBe(
      ErrorCode.COORDINATOR_NOT_AVAILABLE,
    );
    expect((await fetch(store, { memberId: 'm1', memberEpoch: 5 }, 9, deps)).errorCode).toBe(ErrorCode.NONE);
  });
});

describe('OffsetFetch: answers from the broker', () => {
  test("a transactional group is answered from the broker's offsets; require_stable from v7 only", async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 0, 1n);
    await store.updateGroup('g', { kind: 'transactional' });
    const asked: [TopicPartition[] | null, boolean][] = [];
    const fetchFromBroker = async (
      _g: string,
      tps: TopicPartition[] | null,
      stable: boolean,
    ): Promise<FetchedGroup> => {
      asked.push([tps, stable]);
      return {
        errorCode: ErrorCode.NONE,
        topics: [
          {
            name: 't',
            partitions: [
              {
                partitionIndex: 0,
                committedOffset: 77n,
                committedLeaderEpoch: 2,
                metadata: '',
                errorCode: ErrorCode.UNSTABLE_OFFSET_COMMIT,
              },
            ],
          },
        ],
      };
    };
    const v8 = only(
      await handleOffsetFetch(request(8, 'g', { t: [0] }, {}, true), 8, { store, fetchFromBroker }),
      8,
    );
    expect(v8.topics[0]!.partitions[0]).toMatchObject({
      committedOffset: 77n,
      errorCode: ErrorCode.UNSTABLE_OFFSET_COMMIT,
    });
    await handleOffsetFetch(request(6, 'g', { t: [0] }, {}, true), 6, { store, fetchFromBroker });
    await handleOffsetFetch(request(7, 'g', null, {}, true), 7, { store, fetchFromBroker });
    expect(asked).toEqual([
      [[{ topic: 't', partition: 0 }], true],
      [[{ topic: 't', partition: 0 }], false],
      [null, true],
    ]);
    // Without a broker to ask, the store answers.
    const alone = only(await handleOffsetFetch(request(8, 'g', { t: [0] }), 8, { store }), 8);
    expect(alone.topics[0]!.partitions[0]!.committedOffset).toBe(1n);
  });

  test('a transactional group: the broker answers, and offsets committed before only the store has fill in', async () => {
    const store = new MemoryStore();
    // Committed through the proxy before the group's first transaction.
    await storeOffset(store, 'g', 't', 0, 10n);
    await storeOffset(store, 'g', 't', 1, 20n);
    await storeOffset(store, 'g', 'u', 0, 5n);
    await store.updateGroup('g', { kind: 'transactional' });
    const part = (partitionIndex: number, committedOffset: bigint) => ({
      partitionIndex,
      committedOffset,
      committedLeaderEpoch: -1,
      metadata: '',
      errorCode: ErrorCode.NONE,
    });
    // The broker has t:0 from a TxnOffsetCommit, nothing for t:1 or u:0.
    const fetchFromBroker = async (_g: string, tps: TopicPartition[] | null): Promise<FetchedGroup> => ({
      errorCode: ErrorCode.NONE,
      topics:
        tps === null
          ? [{ name: 't', partitions: [part(0, 30n)] }]
          : [{ name: 't', partitions: tps.map((tp) => part(tp.partition, tp.partition === 0 ? 30n : -1n)) }],
    });
    const named = only(
      await handleOffsetFetch(request(8, 'g', { t: [0, 1] }), 8, { store, fetchFromBroker }),
      8,
    );
    expect(named.topics[0]!.partitions.map((p) => p.committedOffset)).toEqual([30n, 20n]);
    const whole = only(await handleOffsetFetch(request(8, 'g', null), 8, { store, fetchFromBroker }), 8);
    expect(
      whole.topics.map((t) => [t.name, t.partitions.map((p) => [p.partitionIndex, p.committedOffset])]),
    ).toEqual([
      [
        't',
        [
          [0, 30n],
          [1, 20n],
        ],
      ],
      ['u', [[0, 5n]]],
    ]);
    // A broker that answers with an error: its error, not the store's offsets.
    const failing = async (): Promise<FetchedGroup> => ({
      errorCode: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
      topics: [],
    });
    expect(
      only(await handleOffsetFetch(request(8, 'g', { t: [1] }), 8, { store, fetchFromBroker: failing }), 8)
        .errorCode,
    ).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
  });

  test("a transactional group's fetch naming a KIP-848 member checks the member before the broker's offsets", async () => {
    const store = new MemoryStore();
    await store.updateGroup('g', { kind: 'member-epoch', memberId: 'm1', memberEpoch: 5, exact: true });
    await store.updateGroup('g', { kind: 'transactional' });
    let read = 0;
    const fetchFromBroker = async (): Promise<FetchedGroup> => {
      read++;
      return { errorCode: ErrorCode.NONE, topics: [{ name: 't', partitions: [] }] };
    };
    const deps: FetchDeps = {
      store,
      fetchFromBroker,
      memberFresh: () => false,
      memberVerdict: async (_g, m, e) => ({
        code: m !== 'm1' ? ErrorCode.UNKNOWN_MEMBER_ID : e === 5 ? null : ErrorCode.STALE_MEMBER_EPOCH,
        updates: [],
      }),
    };
    const at = (memberId: string, memberEpoch: number) =>
      handleOffsetFetch(request(9, 'g', { t: [0] }, { memberId, memberEpoch }), 9, deps).then((r) =>
        only(r, 9),
      );
    expect((await at('m1', 4)).errorCode).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    expect((await at('gone', 3)).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(read).toBe(0);
    expect((await at('m1', 5)).errorCode).toBe(ErrorCode.NONE);
    expect(read).toBe(1);
  });

  test("--fallback upstream: offsets the store lacks are copied from the broker once; the store's win", async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 0, 10n);
    const asked: (TopicPartition[] | null)[] = [];
    const broker: Record<number, bigint> = { 0: 500n, 1: 501n, 2: -1n };
    const fetchFromBroker = async (_g: string, tps: TopicPartition[] | null): Promise<FetchedGroup> => {
      asked.push(tps);
      return {
        errorCode: ErrorCode.NONE,
        topics: [
          {
            name: 't',
            partitions: (tps ?? []).map((tp) => ({
              partitionIndex: tp.partition,
              committedOffset: broker[tp.partition]!,
              committedLeaderEpoch: 1,
              metadata: 'up',
              errorCode: ErrorCode.NONE,
            })),
          },
        ],
      };
    };
    const deps = { store, fetchFromBroker, fallbackUpstream: true };
    const first = only(await handleOffsetFetch(request(8, 'g', { t: [0, 1, 2] }), 8, deps), 8);
    expect(first.topics[0]!.partitions.map((p) => p.committedOffset)).toEqual([10n, 501n, -1n]);
    expect(asked).toEqual([
      [
        { topic: 't', partition: 1 },
        { topic: 't', partition: 2 },
      ],
    ]);
    expect((await store.fetch('g', [{ topic: 't', partition: 1 }]))[0]).toMatchObject({
      offset: 501n,
      metadata: 'up',
    });
    // Copied: the next fetch of the copied partition does not ask again.
    await handleOffsetFetch(request(8, 'g', { t: [0, 1] }), 8, deps);
    expect(asked).toHaveLength(1);
    // Without the option the broker is not asked at all.
    await handleOffsetFetch(request(8, 'g', { t: [5] }), 8, { store, fetchFromBroker });
    expect(asked).toHaveLength(1);
  });

  test('--fallback upstream with null topics asks only for a group the store does not know', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'known', 't', 0, 1n);
    const asked: string[] = [];
    const fetchFromBroker = async (g: string): Promise<FetchedGroup> => {
      asked.push(g);
      return { errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE, topics: [] };
    };
    const deps = { store, fetchFromBroker, fallbackUpstream: true };
    await handleOffsetFetch(request(8, 'known', null), 8, deps);
    // A broker error leaves the store's (empty) answer.
    expect(only(await handleOffsetFetch(request(8, 'new', null), 8, deps), 8)).toEqual({
      errorCode: 0,
      topics: [],
    });
    expect(asked).toEqual(['new']);
  });
});
