/**
 * OffsetCommit where the broker decides what the store cannot: committers without fresh evidence,
 * store refusals re-checked, and groups that commit transactionally, on a MemoryStore and fake
 * broker lookups (the order of checks and the guards are in offset-commit.test.ts).
 */
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import type { CommitIdentity } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { Verdict } from './broker-verdict.js';
import { CAS_TRANSACTIONAL } from './kafka-errors.js';
import { handleOffsetCommit } from './offset-commit.js';
import { classicGroup } from '../../test/harness/stored-offsets.js';
import { codes, deps, request } from '../../test/harness/offset-commit-bed.js';

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
