/**
 * A commit without a member identity, and the broker asked whether a group the store believes
 * has members is empty (empty-at-broker.ts), on a MemoryStore.
 */
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import type { CommitRequest } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { commitAnonymous } from './empty-at-broker.js';
import { classicGroup } from '../../test/harness/stored-offsets.js';

describe('commitAnonymous', () => {
  const anonymous = (group: string): CommitRequest => ({
    group,
    requestId: 'r1',
    identity: { generationIdOrMemberEpoch: -1, memberId: '', groupInstanceId: null, requestVersion: 8 },
    writes: [
      {
        topic: 't',
        partition: 0,
        offset: 5n,
        leaderEpoch: -1,
        metadata: '',
        commitTimestamp: 1n,
        expireTimestamp: -1n,
      },
    ],
  });

  test('refused while the group has members, unless the broker says it is empty (then the store learns it)', async () => {
    const store = new MemoryStore();
    await classicGroup(store, 'g');
    expect(await commitAnonymous(store, anonymous('g'), async () => false)).toEqual({
      status: 'fenced',
      error: ErrorCode.UNKNOWN_MEMBER_ID,
    });
    expect(
      await commitAnonymous(store, anonymous('g'), () => Promise.reject(new Error('down'))),
    ).toMatchObject({
      status: 'fenced',
    });
    expect(await commitAnonymous(store, anonymous('g'), undefined)).toMatchObject({ status: 'fenced' });
    expect(await commitAnonymous(store, anonymous('g'), async () => true)).toEqual({ status: 'ok' });
    expect((await store.getGroup('g'))!.members).toEqual([]);
    expect((await store.fetch('g', null))[0]!.offset).toBe(5n);
  });

  test('other outcomes are not re-checked', async () => {
    const store = new MemoryStore();
    let asked = 0;
    const empty = async () => {
      asked++;
      return true;
    };
    expect(await commitAnonymous(store, anonymous('fresh'), empty)).toEqual({ status: 'ok' });
    expect(asked).toBe(0);
  });
});
