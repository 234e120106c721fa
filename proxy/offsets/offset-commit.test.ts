/**
 * OffsetCommit's order of checks and version rules (docs/errors.md, OffsetCommit), on a
 * MemoryStore and fake broker lookups. The same behaviour is proven against a real broker in
 * test/integration/offsets-semantics.test.ts; these run in milliseconds.
 */
import { describe, expect, test } from 'vitest';
import { StoreCorruptError, StoreUnavailableError } from '../../backends/errors.js';
import { MemoryStore } from '../../backends/memory-store.js';
import type { CommitIdentity, CommitRequest, OffsetStore } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import {
  defaultOffsetCommitRequest,
  defaultOffsetCommitRequestPartition,
} from '../../protocol/messages/offset-commit-request.js';
import type { Verdict } from './broker-verdict.js';
import { GuardPolicy } from './guard-policy.js';
import type { CommitGuardMode } from './guard-policy.js';
import { CAS_MISMATCH, CAS_TRANSACTIONAL } from './kafka-errors.js';
import { CommitFence } from './commit-fence.js';
import type { FenceSeams } from './commit-fence.js';
import { handleOffsetCommit } from './offset-commit.js';
import type { CommitDeps, CommitRefusal } from './offset-commit.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { classicGroup } from '../../test/harness/stored-offsets.js';

interface Part {
  partition: number;
  offset?: bigint;
  metadata?: string | null;
  leaderEpoch?: number;
}

function request(
  group: string,
  topics: Record<string, Part[]>,
  identity: Partial<
    Pick<OffsetCommitRequest, 'generationIdOrMemberEpoch' | 'memberId' | 'groupInstanceId'>
  > = {},
  retentionTimeMs = -1n,
): OffsetCommitRequest {
  return {
    ...defaultOffsetCommitRequest(),
    groupId: group,
    ...identity,
    retentionTimeMs,
    topics: Object.entries(topics).map(([name, parts]) => ({
      name,
      topicId: ZERO_UUID,
      partitions: parts.map((p) => ({
        ...defaultOffsetCommitRequestPartition(),
        partitionIndex: p.partition,
        committedOffset: p.offset ?? 1n,
        committedMetadata: p.metadata === undefined ? '' : p.metadata,
        committedLeaderEpoch: p.leaderEpoch ?? -1,
      })),
    })),
  };
}

/** Every partition's code, in request order. */
const codes = (res: Awaited<ReturnType<typeof handleOffsetCommit>>): number[] =>
  res.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));

interface Recorded {
  refused: [string, CommitRefusal, number][];
  accepted: number[];
}

/** The fence's questions to the broker and to what the instance saw, as a test answers them. */
type Seams = Omit<FenceSeams, 'store'>;

function deps(store: OffsetStore, mode: CommitGuardMode = 'fence', extra: Partial<CommitDeps> & Seams = {}) {
  const seen: Recorded = { refused: [], accepted: [] };
  const { brokerVerdict, committerFresh, vouchedOutsideRecord, ...rest } = extra;
  const seams: Seams = {
    ...(brokerVerdict ? { brokerVerdict } : {}),
    ...(committerFresh ? { committerFresh } : {}),
    ...(vouchedOutsideRecord ? { vouchedOutsideRecord } : {}),
  };
  const d: CommitDeps = {
    guards: new GuardPolicy(mode),
    fence: new CommitFence({ store, ...seams }),
    now: () => 1_000n,
    onRefused: (g, reason, n) => seen.refused.push([g, reason, n]),
    onAccepted: (_g, writes) => seen.accepted.push(writes.length),
    ...rest,
  };
  return { d, seen };
}

describe('OffsetCommit: order of checks', () => {
  test('a denied topic is refused first, and is not looked up in the metadata', async () => {
    const store = new MemoryStore();
    const asked: string[] = [];
    const { d, seen } = deps(store, 'fence', {
      authorize: async () => ({ groupError: ErrorCode.NONE, deniedTopics: new Set(['secret']) }),
      topicExists: async (t) => {
        asked.push(t);
        return t !== 'missing';
      },
    });
    const res = await handleOffsetCommit(
      request('g', { secret: [{ partition: 0 }], missing: [{ partition: 0 }], ok: [{ partition: 0 }] }),
      8,
      d,
    );
    expect(codes(res)).toEqual([
      ErrorCode.TOPIC_AUTHORIZATION_FAILED,
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      ErrorCode.NONE,
    ]);
    expect(asked).toEqual(['missing', 'ok']);
    expect(seen.refused).toEqual([
      ['g', 'unauthorized', 1],
      ['g', 'unknown_topic', 1],
    ]);
    expect((await store.fetch('g', null)).map((o) => o.topic)).toEqual(['ok']);
  });

  test('the topic cache answers what it can; the rest is looked up, in request order', async () => {
    const store = new MemoryStore();
    const asked: string[] = [];
    const { d, seen } = deps(store, 'fence', {
      topicExists: async (t, p) => {
        asked.push(`${t}-${p}`);
        return t === 'new';
      },
      // 'fresh' has 2 partitions and the cache is fresh: partition 5 is known missing. 'stale' has
      // 2 partitions in an old cache: partition 5 may have been added since, so it is asked.
      cachedTopic: (t) =>
        t === 'fresh'
          ? { partitions: 2, fresh: true }
          : t === 'stale'
            ? { partitions: 2, fresh: false }
            : undefined,
    });
    const res = await handleOffsetCommit(
      request('g', {
        fresh: [{ partition: 1 }, { partition: 5 }],
        stale: [{ partition: 0 }, { partition: 5 }],
        new: [{ partition: 0 }],
      }),
      8,
      d,
    );
    expect(codes(res)).toEqual([
      ErrorCode.NONE,
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      ErrorCode.NONE,
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      ErrorCode.NONE,
    ]);
    expect(asked).toEqual(['stale-5', 'new-0']);
    expect(seen.refused).toEqual(Array(2).fill(['g', 'unknown_topic', 1]));
    expect((await store.fetch('g', null)).map((o) => `${o.topic}-${o.partition}`)).toEqual([
      'fresh-1',
      'stale-0',
      'new-0',
    ]);
  });

  test('without a topic lookup (unknown topics allowed) every topic is stored', async () => {
    const store = new MemoryStore();
    const { d } = deps(store);
    const res = await handleOffsetCommit(request('g', { anything: [{ partition: 99 }] }), 8, d);
    expect(codes(res)).toEqual([ErrorCode.NONE]);
    expect(await store.fetch('g', null)).toHaveLength(1);
  });

  test('nothing left after the partition checks: no group validation at all', async () => {
    // A generation in a group the store never saw would be ILLEGAL_GENERATION, were it checked.
    const store = new MemoryStore();
    let verdicts = 0;
    const { d, seen } = deps(store, 'fence', {
      topicExists: async () => false,
      brokerVerdict: async () => {
        verdicts++;
        return { code: null, updates: [] };
      },
    });
    const res = await handleOffsetCommit(
      request(
        'g',
        { gone: [{ partition: 0 }, { partition: 1 }] },
        { generationIdOrMemberEpoch: 5, memberId: 'x' },
      ),
      8,
      d,
    );
    expect(codes(res)).toEqual([ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]);
    expect(verdicts).toBe(0);
    expect(seen.accepted).toEqual([]);
    expect(await store.getGroup('g')).toBeNull();
  });

  test('an empty topic list is answered at once, with an empty answer', async () => {
    const { d } = deps(new MemoryStore());
    const res = await handleOffsetCommit(
      request('g', {}, { generationIdOrMemberEpoch: 5, memberId: 'x' }),
      8,
      d,
    );
    expect(res).toEqual({ throttleTimeMs: 0, topics: [] });
  });

  test('a group-level refusal goes onto every remaining partition, not onto those refused before', async () => {
    const store = new MemoryStore();
    const { d, seen } = deps(store, 'fence', { topicExists: async (t) => t !== 'missing' });
    const res = await handleOffsetCommit(
      request(
        'never-seen',
        { missing: [{ partition: 0 }], ok: [{ partition: 0 }, { partition: 1, metadata: 'x'.repeat(4097) }] },
        { generationIdOrMemberEpoch: 2, memberId: 'm' },
      ),
      8,
      d,
    );
    expect(codes(res)).toEqual([
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      ErrorCode.ILLEGAL_GENERATION,
      ErrorCode.ILLEGAL_GENERATION,
    ]);
    expect(seen.refused).toEqual([
      ['never-seen', 'unknown_topic', 1],
      ['never-seen', 'fence', 2],
    ]);
  });

  test('metadata over 4096 code units is refused for that partition only, after the group check', async () => {
    const store = new MemoryStore();
    const { d, seen } = deps(store);
    const res = await handleOffsetCommit(
      request('g', {
        t: [
          { partition: 0, metadata: 'x'.repeat(4096) },
          { partition: 1, metadata: 'x'.repeat(4097) },
        ],
      }),
      8,
      d,
    );
    expect(codes(res)).toEqual([ErrorCode.NONE, ErrorCode.OFFSET_METADATA_TOO_LARGE]);
    expect(seen.refused).toEqual([['g', 'too_large', 1]]);
    expect(seen.accepted).toEqual([1]);
    expect((await store.fetch('g', null)).map((o) => o.partition)).toEqual([0]);
  });

  test('only too-large partitions: nothing is written, nothing is created', async () => {
    const store = new MemoryStore();
    const { d } = deps(store);
    const big = { t: [{ partition: 0, metadata: 'x'.repeat(5000) }] };
    expect(codes(await handleOffsetCommit(request('g', big), 8, d))).toEqual([
      ErrorCode.OFFSET_METADATA_TOO_LARGE,
    ]);
    expect(await store.listGroups()).toEqual([]);
  });

  test('only too-large partitions: the group is still checked first, the broker deciding a refusal', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    const big = { t: [{ partition: 0, metadata: 'x'.repeat(5000) }] };
    const zombie = { generationIdOrMemberEpoch: 2, memberId: 'm1' };
    const alone = deps(store);
    expect(codes(await handleOffsetCommit(request('g', big, zombie), 8, alone.d))).toEqual([
      ErrorCode.ILLEGAL_GENERATION,
    ]);
    expect(alone.seen.refused).toEqual([['g', 'fence', 1]]);
    let asked = 0;
    const withBroker = deps(store, 'fence', {
      brokerVerdict: async () => {
        asked += 1;
        return { code: ErrorCode.UNKNOWN_MEMBER_ID, updates: [] };
      },
    });
    expect(codes(await handleOffsetCommit(request('g', big, zombie), 8, withBroker.d))).toEqual([
      ErrorCode.UNKNOWN_MEMBER_ID,
    ]);
    expect(asked).toBe(1);
    const member = { generationIdOrMemberEpoch: 3, memberId: 'm1' };
    expect(codes(await handleOffsetCommit(request('g', big, member), 8, alone.d))).toEqual([
      ErrorCode.OFFSET_METADATA_TOO_LARGE,
    ]);
    expect(await store.fetch('g', null)).toEqual([]);
  });

  test('a store failure is a retriable code on every remaining partition', async () => {
    const failing = (err: Error): OffsetStore => {
      const s = new MemoryStore();
      s.commit = async () => {
        throw err;
      };
      return s;
    };
    const cases: [Error, number][] = [
      [new StoreUnavailableError('down'), ErrorCode.COORDINATOR_NOT_AVAILABLE],
      [new StoreUnavailableError('slow', { timedOut: true }), ErrorCode.REQUEST_TIMED_OUT],
      [new StoreCorruptError('g', 'bad'), ErrorCode.UNKNOWN_SERVER_ERROR],
      [new Error('anything else'), ErrorCode.COORDINATOR_NOT_AVAILABLE],
    ];
    for (const [err, code] of cases) {
      const { d, seen } = deps(failing(err), 'fence', {
        authorize: async () => ({ groupError: ErrorCode.NONE, deniedTopics: new Set(['secret']) }),
      });
      const res = await handleOffsetCommit(
        request('g', { secret: [{ partition: 0 }], t: [{ partition: 0 }, { partition: 1 }] }),
        8,
        d,
      );
      expect(codes(res), err.message).toEqual([ErrorCode.TOPIC_AUTHORIZATION_FAILED, code, code]);
      expect(seen.refused.at(-1)).toEqual(['g', 'store_down', 2]);
    }
  });

  test('the response mirrors the request: topics and partitions in request order', async () => {
    const { d } = deps(new MemoryStore());
    const res = await handleOffsetCommit(
      request('g', { b: [{ partition: 5 }, { partition: 2 }], a: [{ partition: 0 }] }),
      8,
      d,
    );
    expect(res.topics.map((t) => [t.name, t.partitions.map((p) => p.partitionIndex)])).toEqual([
      ['b', [5, 2]],
      ['a', [0]],
    ]);
  });
});

describe('OffsetCommit: commit guards', () => {
  test('fence: a group the store never saw, with a generation: GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before', async () => {
    const store = new MemoryStore();
    const { d } = deps(store);
    const req = request('g', { t: [{ partition: 0 }] }, { generationIdOrMemberEpoch: 1, memberId: 'm' });
    expect(codes(await handleOffsetCommit(req, 9, d))).toEqual([ErrorCode.GROUP_ID_NOT_FOUND]);
    expect(codes(await handleOffsetCommit(req, 8, d))).toEqual([ErrorCode.ILLEGAL_GENERATION]);
    // Generation -1 without a member (assign() consumers, admin tools): a simple group, accepted.
    expect(codes(await handleOffsetCommit(request('g', { t: [{ partition: 0 }] }), 9, d))).toEqual([
      ErrorCode.NONE,
    ]);
  });

  test('fence: stale generation, unknown member and anonymous commits are refused; the member commits', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    const { d } = deps(store);
    const t = { t: [{ partition: 0 }] };
    const at = async (identity: Parameters<typeof request>[2]) =>
      codes(await handleOffsetCommit(request('g', t, identity), 8, d));
    expect(await at({ generationIdOrMemberEpoch: 4, memberId: 'm1' })).toEqual([
      ErrorCode.ILLEGAL_GENERATION,
    ]);
    expect(await at({ generationIdOrMemberEpoch: 3, memberId: 'zombie' })).toEqual([
      ErrorCode.UNKNOWN_MEMBER_ID,
    ]);
    expect(await at({})).toEqual([ErrorCode.UNKNOWN_MEMBER_ID]);
    expect(await at({ generationIdOrMemberEpoch: 3, memberId: 'm1' })).toEqual([ErrorCode.NONE]);
  });

  test('the group instance id is part of the identity from v7 only', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    const seen: CommitRequest[] = [];
    const commit = store.commit.bind(store);
    store.commit = (r) => {
      seen.push(r);
      return commit(r);
    };
    const { d } = deps(store);
    const req = request(
      'g',
      { t: [{ partition: 0 }] },
      { generationIdOrMemberEpoch: 3, memberId: 'm1', groupInstanceId: 'i' },
    );
    // v7: an instance id the group does not have.
    expect(codes(await handleOffsetCommit(req, 7, d))).toEqual([ErrorCode.UNKNOWN_MEMBER_ID]);
    // v6 carries no instance id: the field is not read.
    expect(codes(await handleOffsetCommit(req, 6, d))).toEqual([ErrorCode.NONE]);
    expect(seen.map((r) => r.identity)).toEqual<CommitIdentity[]>([
      { generationIdOrMemberEpoch: 3, memberId: 'm1', groupInstanceId: 'i', requestVersion: 7 },
      { generationIdOrMemberEpoch: 3, memberId: 'm1', groupInstanceId: null, requestVersion: 6 },
    ]);
  });

  test('off: last write wins, whatever the identity says', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    const { d } = deps(store, 'off');
    const res = await handleOffsetCommit(
      request(
        'g',
        { t: [{ partition: 0, offset: 9n }] },
        { generationIdOrMemberEpoch: 99, memberId: 'zombie' },
      ),
      8,
      d,
    );
    expect(codes(res)).toEqual([ErrorCode.NONE]);
    expect((await store.fetch('g', null))[0]!.offset).toBe(9n);
  });

  test('cas: "set x iff it is y", all or nothing; other metadata is unconditional', async () => {
    const store = new MemoryStore();
    const { d, seen } = deps(store, 'cas');
    const commit = async (parts: Part[]) => codes(await handleOffsetCommit(request('g', { t: parts }), 8, d));
    expect(await commit([{ partition: 0, offset: 10n, metadata: 'cas:-1;first' }])).toEqual([ErrorCode.NONE]);
    expect((await store.fetch('g', null))[0]).toMatchObject({ offset: 10n, metadata: 'first' });
    expect(await commit([{ partition: 0, offset: 20n, metadata: 'cas:-1' }])).toEqual([CAS_MISMATCH]);
    expect(
      await commit([
        { partition: 0, offset: 30n, metadata: 'cas:10' },
        { partition: 1, offset: 30n, metadata: 'cas:5' },
      ]),
    ).toEqual([CAS_MISMATCH, CAS_MISMATCH]);
    expect((await store.fetch('g', null)).map((o) => [o.partition, o.offset])).toEqual([[0, 10n]]);
    expect(await commit([{ partition: 0, offset: 30n, metadata: 'cas:10;second' }])).toEqual([
      ErrorCode.NONE,
    ]);
    expect(await commit([{ partition: 0, offset: 5n, metadata: 'plain' }])).toEqual([ErrorCode.NONE]);
    expect((await store.fetch('g', null))[0]).toMatchObject({ offset: 5n, metadata: 'plain' });
    expect(seen.refused.filter((r) => r[1] === 'cas')).toEqual([
      ['g', 'cas', 1],
      ['g', 'cas', 2],
    ]);
  });

  test('the cas: form is plain metadata under fence and off', async () => {
    for (const mode of ['fence', 'off'] as const) {
      const store = new MemoryStore();
      const { d } = deps(store, mode);
      await handleOffsetCommit(
        request('g', { t: [{ partition: 0, offset: 3n, metadata: 'cas:7;x' }] }),
        8,
        d,
      );
      expect((await store.fetch('g', null))[0], mode).toMatchObject({ offset: 3n, metadata: 'cas:7;x' });
    }
  });

  test('a group override picks the guard per group', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'loose');
    const { d } = deps(store, 'fence', {
      guards: new GuardPolicy('fence', [{ pattern: 'loo*', mode: 'off' }]),
    });
    const zombie = { generationIdOrMemberEpoch: 1, memberId: 'zombie' };
    expect(
      codes(await handleOffsetCommit(request('loose', { t: [{ partition: 0 }] }, zombie), 8, d)),
    ).toEqual([ErrorCode.NONE]);
  });
});

describe('OffsetCommit: version rules of the stored fields', () => {
  test('leader epoch from v6, v2-4 retention time', async () => {
    const store = new MemoryStore();
    const { d } = deps(store);
    const part = { partition: 0, offset: 7n, leaderEpoch: 4, metadata: null };
    for (const version of [2, 4, 5, 6, 9]) {
      const group = `g${version}`;
      await handleOffsetCommit(request(group, { t: [part] }, {}, 60_000n), version, d);
      const [stored] = await store.fetch(group, null);
      expect(stored, `v${version}`).toEqual({
        topic: 't',
        partition: 0,
        offset: 7n,
        leaderEpoch: version >= 6 ? 4 : -1,
        // A null metadata is stored as "".
        metadata: '',
        commitTimestamp: 1_000n,
        expireTimestamp: version >= 2 && version <= 4 ? 61_000n : -1n,
      });
    }
  });

  test('v2-4 without a retention time take the defaults', async () => {
    const store = new MemoryStore();
    const { d } = deps(store);
    await handleOffsetCommit(request('b', { t: [{ partition: 0 }] }, {}, -1n), 3, d);
    expect((await store.fetch('b', null))[0]).toMatchObject({
      commitTimestamp: 1_000n,
      expireTimestamp: -1n,
    });
  });
});

describe('OffsetCommit: the broker decides what the store cannot', () => {
  const member = { generationIdOrMemberEpoch: 3, memberId: 'm1' };

  test('a committer without fresh evidence is decided by the broker first; its updates reach the store', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    const asked: CommitIdentity[] = [];
    const { d } = deps(store, 'fence', {
      committerFresh: () => false,
      brokerVerdict: async (_g, id): Promise<Verdict> => {
        asked.push(id);
        return { code: ErrorCode.UNKNOWN_MEMBER_ID, updates: [{ kind: 'gone', memberId: 'm1' }] };
      },
    });
    const res = await handleOffsetCommit(request('g', { t: [{ partition: 0 }] }, member), 8, d);
    expect(codes(res)).toEqual([ErrorCode.UNKNOWN_MEMBER_ID]);
    expect(asked).toHaveLength(1);
    expect((await store.getGroup('g'))!.members).toEqual([]);
    expect(await store.fetch('g', null)).toEqual([]);
  });

  test("a member vouched for outside the store's record (a streams member) is written unfenced, the broker not asked", async () => {
    const store = new MemoryStore(); // no record of the group at all
    let asked = 0;
    const { d, seen } = deps(store, 'fence', {
      committerFresh: () => false,
      vouchedOutsideRecord: (_g, id) => id.memberId === 'm1',
      brokerVerdict: async (): Promise<Verdict> => {
        asked++;
        return { code: ErrorCode.STALE_MEMBER_EPOCH, updates: [] };
      },
    });
    const res = await handleOffsetCommit(request('g', { t: [{ partition: 0, offset: 5n }] }, member), 9, d);
    expect(codes(res)).toEqual([ErrorCode.NONE]);
    expect(asked).toBe(0);
    expect(seen.accepted).toEqual([1]);
    expect((await store.fetch('g', null)).map((o) => o.offset)).toEqual([5n]);
    const other = { generationIdOrMemberEpoch: 3, memberId: 'm2' };
    const refused = await handleOffsetCommit(request('g', { t: [{ partition: 0 }] }, other), 9, d);
    expect(codes(refused)).toEqual([ErrorCode.STALE_MEMBER_EPOCH]);
    expect(asked).toBe(1);
  });

  test("the broker's acceptance writes without the store's fence", async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    const { d, seen } = deps(store, 'fence', {
      committerFresh: () => false,
      brokerVerdict: async () => ({ code: null, updates: [] }),
    });
    // Generation 7 is not what the store recorded; the broker says it is current.
    const res = await handleOffsetCommit(
      request('g', { t: [{ partition: 0, offset: 42n }] }, { generationIdOrMemberEpoch: 7, memberId: 'm1' }),
      8,
      d,
    );
    expect(codes(res)).toEqual([ErrorCode.NONE]);
    expect((await store.fetch('g', null))[0]!.offset).toBe(42n);
    expect(seen.accepted).toEqual([1]);
  });

  test('a fresh committer is decided by the store alone while it accepts', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    let asked = 0;
    const { d } = deps(store, 'fence', {
      committerFresh: () => true,
      brokerVerdict: async () => {
        asked++;
        return { code: null, updates: [] };
      },
    });
    expect(codes(await handleOffsetCommit(request('g', { t: [{ partition: 0 }] }, member), 8, d))).toEqual([
      ErrorCode.NONE,
    ]);
    expect(asked).toBe(0);
  });

  test("a store refusal is re-checked with the broker, and the broker's code stands", async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    const asked: number[] = [];
    const { d } = deps(store, 'fence', {
      committerFresh: () => true,
      brokerVerdict: async (_g, id) => {
        asked.push(id.generationIdOrMemberEpoch);
        return { code: ErrorCode.REBALANCE_IN_PROGRESS, updates: [{ kind: 'rebalancing', generationId: 3 }] };
      },
    });
    const res = await handleOffsetCommit(
      request('g', { t: [{ partition: 0 }] }, { generationIdOrMemberEpoch: 2, memberId: 'm1' }),
      8,
      d,
    );
    expect(asked).toEqual([2]);
    expect(codes(res)).toEqual([ErrorCode.REBALANCE_IN_PROGRESS]);
    expect((await store.getGroup('g'))!.state).toBe('PreparingRebalance');
  });

  test('a refusal the broker cannot confirm is retriable; an acceptance stands', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    let asked = 0;
    const { d, seen } = deps(store, 'fence', {
      committerFresh: () => false,
      brokerVerdict: () => {
        asked++;
        return Promise.reject(new Error('no broker'));
      },
    });
    const stale = { generationIdOrMemberEpoch: 2, memberId: 'm1' };
    expect(codes(await handleOffsetCommit(request('g', { t: [{ partition: 0 }] }, stale), 8, d))).toEqual([
      ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ]);
    expect(seen.refused).toEqual([['g', 'broker_unanswered', 1]]);
    // Asked once (before the store, the committer not being fresh), not once more after its refusal.
    expect(asked).toBe(1);
    expect(await store.fetch('g', null)).toEqual([]);
    expect(codes(await handleOffsetCommit(request('g', { t: [{ partition: 0 }] }, member), 8, d))).toEqual([
      ErrorCode.NONE,
    ]);
  });

  test('without a fence (off, cas) the broker is never asked', async () => {
    for (const mode of ['off', 'cas'] as const) {
      const store = new MemoryStore();
      await classicGroup(store, 'g');
      let asked = 0;
      const { d } = deps(store, mode, {
        committerFresh: () => false,
        brokerVerdict: async () => {
          asked++;
          return { code: ErrorCode.UNKNOWN_MEMBER_ID, updates: [] };
        },
      });
      expect(
        codes(await handleOffsetCommit(request('g', { t: [{ partition: 0 }] }, member), 8, d)),
        mode,
      ).toEqual([ErrorCode.NONE]);
      expect(asked, mode).toBe(0);
    }
  });
});

describe('OffsetCommit: a group that commits transactionally', () => {
  /** What the broker answers a forwarded commit: its own codes. */
  const brokerAnswer = (req: OffsetCommitRequest, code: number) => ({
    throttleTimeMs: 0,
    topics: req.topics.map((t) => ({
      name: t.name,
      topicId: t.topicId,
      partitions: t.partitions.map((p) => ({ partitionIndex: p.partitionIndex, errorCode: code })),
    })),
  });

  test("its commits are the broker's: sent as the client sent them, answered as the broker answers", async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    await store.commit({ group: 'g', writes: [], requestId: 'r0' });
    await store.updateGroup('g', { kind: 'transactional' });
    const sent: OffsetCommitRequest[] = [];
    const answers = [ErrorCode.NONE, ErrorCode.ILLEGAL_GENERATION];
    const { d, seen } = deps(store, 'fence', {
      // The store's record would accept m1's commit alone, and refuse the zombie's.
      committerFresh: () => true,
      brokerVerdict: () => Promise.reject(new Error('not to be asked')),
    });
    for (const [i, generation] of [3, 2].entries()) {
      const req = request(
        'g',
        { t: [{ partition: 0, offset: 40n + BigInt(i) }] },
        {
          generationIdOrMemberEpoch: generation,
          memberId: 'm1',
        },
      );
      const res = await handleOffsetCommit(req, 8, {
        ...d,
        commitAtBroker: async () => {
          sent.push(req);
          return brokerAnswer(req, answers[i]!);
        },
      });
      expect(codes(res)).toEqual([answers[i]]);
    }
    expect(sent.map((r) => r.generationIdOrMemberEpoch)).toEqual([3, 2]);
    // Nothing went to the store (the broker's offsets would hide it), nor is counted as its.
    expect(await store.fetch('g', null)).toEqual([]);
    expect(seen.accepted).toEqual([]);
  });

  test('a commit the store would refuse, or whose committer is not fresh, goes to the broker too', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    await store.updateGroup('g', { kind: 'transactional' });
    let sent = 0;
    const verdict = async (): Promise<Verdict> => ({ code: null, updates: [], transactional: true });
    const atBroker = {
      brokerVerdict: verdict,
      commitAtBroker: async () => {
        sent++;
        return brokerAnswer(request('g', { t: [{ partition: 0 }] }), ErrorCode.NONE);
      },
    };
    const { d } = deps(store, 'fence', { ...atBroker, committerFresh: () => false });
    // An unknown member (the store refuses), and one with oversized metadata only (nothing to write).
    const unknown = request('g', { t: [{ partition: 0 }] }, { generationIdOrMemberEpoch: 3, memberId: 'zz' });
    expect(codes(await handleOffsetCommit(unknown, 8, d))).toEqual([ErrorCode.NONE]);
    const big = request(
      'g',
      { t: [{ partition: 0, metadata: 'x'.repeat(5000) }] },
      { generationIdOrMemberEpoch: 3, memberId: 'm1' },
    );
    const fresh = deps(store, 'fence', { ...atBroker, committerFresh: () => true }).d;
    expect(codes(await handleOffsetCommit(big, 8, fresh))).toEqual([ErrorCode.NONE]);
    expect(sent).toBe(2);
    expect(await store.fetch('g', null)).toEqual([]);
  });

  test('a broker that does not answer: retriable, nothing stored', async () => {
    const store = new MemoryStore();
    await store.updateGroup('g', { kind: 'transactional' });
    const { d, seen } = deps(store, 'fence', { commitAtBroker: () => Promise.reject(new Error('timeout')) });
    const res = await handleOffsetCommit(request('g', { t: [{ partition: 0 }] }), 8, d);
    expect(codes(res)).toEqual([ErrorCode.COORDINATOR_NOT_AVAILABLE]);
    expect(seen.refused).toEqual([['g', 'broker_unanswered', 1]]);
    // Without a broker at all (no commitAtBroker) the same.
    const alone = await handleOffsetCommit(request('g', { t: [{ partition: 0 }] }), 8, deps(store).d);
    expect(codes(alone)).toEqual([ErrorCode.COORDINATOR_NOT_AVAILABLE]);
    expect(await store.fetch('g', null)).toEqual([]);
  });

  test("without a fence (off, cas) its commits are the broker's too", async () => {
    for (const mode of ['off', 'cas'] as const) {
      const store = new MemoryStore();
      await store.commit({ group: 'g', writes: [], requestId: 'r0' });
      await store.updateGroup('g', { kind: 'transactional' });
      const sent: OffsetCommitRequest[] = [];
      const { d, seen } = deps(store, mode, {
        commitAtBroker: async () => {
          sent.push(req);
          return brokerAnswer(req, ErrorCode.NONE);
        },
      });
      const req = request('g', { t: [{ partition: 0, offset: 5n }] });
      expect(codes(await handleOffsetCommit(req, 8, d)), mode).toEqual([ErrorCode.NONE]);
      expect(sent, mode).toEqual([req]);
      // Stored, the commit would be hidden by the broker's offset, which OffsetFetch shows.
      expect(await store.fetch('g', null), mode).toEqual([]);
      expect(seen.accepted, mode).toEqual([]);
    }
  });

  test('a compare-and-set is refused whole, sent nowhere: the broker cannot compare', async () => {
    const store = new MemoryStore();
    await store.commit({ group: 'g', writes: [], requestId: 'r0' });
    await store.updateGroup('g', { kind: 'transactional' });
    let sent = 0;
    const { d, seen } = deps(store, 'cas', {
      commitAtBroker: async () => {
        sent++;
        return brokerAnswer(request('g', { t: [{ partition: 0 }] }), ErrorCode.NONE);
      },
    });
    // One partition compare-and-set, one plain: all or nothing, as for a mismatch.
    const req = request('g', {
      t: [
        { partition: 0, offset: 5n, metadata: 'cas:-1' },
        { partition: 1, offset: 6n },
      ],
    });
    expect(codes(await handleOffsetCommit(req, 8, d))).toEqual([CAS_TRANSACTIONAL, CAS_TRANSACTIONAL]);
    expect(sent).toBe(0);
    expect(seen.refused).toEqual([['g', 'cas_transactional', 2]]);
    expect(await store.fetch('g', null)).toEqual([]);
  });
});
