/**
 * OffsetCommit's order of checks, commit guards and version rules (docs/errors.md, OffsetCommit),
 * on a MemoryStore and fake broker lookups. What the broker decides for the store (committers
 * without fresh evidence, transactional groups) is in offset-commit-broker.test.ts. The same
 * behaviour is proven against a real broker in test/integration/offsets-semantics.test.ts; these
 * run in milliseconds.
 */
import { describe, expect, test } from 'vitest';
import { StoreCorruptError, StoreUnavailableError } from '../../backends/errors.js';
import { MemoryStore } from '../../backends/memory-store.js';
import type { CommitIdentity, CommitRequest, OffsetStore } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { GuardPolicy } from './guard-policy.js';
import { CAS_MISMATCH } from './kafka-errors.js';
import { handleOffsetCommit } from './offset-commit.js';
import { classicGroup } from '../../test/harness/stored-offsets.js';
import { codes, deps, request } from '../../test/harness/offset-commit-bed.js';
import type { Part } from '../../test/harness/offset-commit-bed.js';

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
