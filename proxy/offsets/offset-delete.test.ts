/**
 * OffsetDelete (docs/errors.md, OffsetDelete), on a MemoryStore, with the broker's answers given.
 * The same answers are proven against a real broker in test/integration/offsets-semantics.test.ts
 * and the guard's differential scripts (guard-differential.test.ts).
 */
import { describe, expect, test } from 'vitest';
import { StoreUnavailableError } from '../../backends/errors.js';
import { MemoryStore } from '../../backends/memory-store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetDeleteRequest } from '../../protocol/messages/offset-delete-request.js';
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import { handleOffsetDelete } from './offset-delete.js';
import { storeOffset } from '../../test/harness/stored-offsets.js';

const request = (groupId: string, topics: Record<string, number[]>): OffsetDeleteRequest => ({
  groupId,
  topics: Object.entries(topics).map(([name, parts]) => ({
    name,
    partitions: parts.map((partitionIndex) => ({ partitionIndex })),
  })),
});

const codes = (res: OffsetDeleteResponse): [string, number, number][] =>
  res.topics.flatMap((t) =>
    t.partitions.map((p): [string, number, number] => [t.name, p.partitionIndex, p.errorCode]),
  );

describe('OffsetDelete', () => {
  test('group id "": INVALID_GROUP_ID at the top level, no topics', async () => {
    expect(await handleOffsetDelete(request('', { t: [0] }), 0, { store: new MemoryStore() })).toEqual({
      errorCode: ErrorCode.INVALID_GROUP_ID,
      throttleTimeMs: 0,
      topics: [],
    });
  });

  test('a group the store knows nothing of: GROUP_ID_NOT_FOUND', async () => {
    const res = await handleOffsetDelete(request('nobody', { t: [0] }), 0, { store: new MemoryStore() });
    expect(res).toEqual({ errorCode: ErrorCode.GROUP_ID_NOT_FOUND, throttleTimeMs: 0, topics: [] });
  });

  test("an empty group's offsets are deleted, also partitions without an offset answer NONE", async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 0);
    await storeOffset(store, 'g', 't', 1);
    await storeOffset(store, 'g', 'u', 0);
    const res = await handleOffsetDelete(request('g', { t: [0, 7] }), 0, { store: store });
    expect(res.errorCode).toBe(ErrorCode.NONE);
    expect(codes(res)).toEqual([
      ['t', 0, ErrorCode.NONE],
      ['t', 7, ErrorCode.NONE],
    ]);
    expect((await store.fetch('g', null)).map((o) => [o.topic, o.partition])).toEqual([
      ['t', 1],
      ['u', 0],
    ]);
  });

  test('a group with live members: GROUP_SUBSCRIBED_TO_TOPIC on every partition, nothing deleted', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 0);
    await store.updateGroup('g', {
      kind: 'joined',
      generationId: 1,
      memberId: 'm',
      groupInstanceId: null,
      members: [{ memberId: 'm', groupInstanceId: null }],
    });
    const res = await handleOffsetDelete(request('g', { t: [0], other: [3] }), 0, { store: store });
    expect(res.errorCode).toBe(ErrorCode.NONE);
    expect(codes(res)).toEqual([
      ['t', 0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC],
      ['other', 3, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC],
    ]);
    expect(await store.fetch('g', null)).toHaveLength(1);
  });

  test('a membership record alone (no offsets) is a known group', async () => {
    const store = new MemoryStore();
    await store.updateGroup('g', { kind: 'empty' });
    const res = await handleOffsetDelete(request('g', { t: [0] }), 0, { store: store });
    expect([res.errorCode, codes(res)]).toEqual([ErrorCode.NONE, [['t', 0, ErrorCode.NONE]]]);
  });

  test('authorization: a group refusal first (before the group id check); denied topics keep their offsets', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 'secret', 0);
    await storeOffset(store, 'g', 'open', 0);
    expect(
      await handleOffsetDelete(request('', { t: [0] }), 0, {
        store,
        authorize: async () => ({
          groupError: ErrorCode.GROUP_AUTHORIZATION_FAILED,
          deniedTopics: new Set(),
        }),
      }),
    ).toMatchObject({ errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED, topics: [] });
    const res = await handleOffsetDelete(request('g', { secret: [0], open: [0] }), 0, {
      store,
      authorize: async () => ({ groupError: ErrorCode.NONE, deniedTopics: new Set(['secret']) }),
    });
    expect(codes(res)).toEqual([
      ['secret', 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED],
      ['open', 0, ErrorCode.NONE],
    ]);
    expect((await store.fetch('g', null)).map((o) => o.topic)).toEqual(['secret']);
  });

  test('a store failure is a retriable code at the top level', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 0);
    store.deleteOffsets = () => Promise.reject(new StoreUnavailableError('down'));
    expect(await handleOffsetDelete(request('g', { t: [0] }), 0, { store: store })).toEqual({
      errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE,
      throttleTimeMs: 0,
      topics: [],
    });
    store.getGroup = () => Promise.reject(new StoreUnavailableError('slow', { timedOut: true }));
    expect((await handleOffsetDelete(request('g', { t: [0] }), 0, { store: store })).errorCode).toBe(
      ErrorCode.REQUEST_TIMED_OUT,
    );
  });

  /** The broker's answer: `top`, and per partition of topic `t` its code (none with a top-level error). */
  const brokerAnswer = (top: number, partitionCodes: number[] = []): OffsetDeleteResponse => ({
    errorCode: top,
    throttleTimeMs: 0,
    topics:
      top === ErrorCode.NONE
        ? [
            {
              name: 't',
              partitions: partitionCodes.map((errorCode, partitionIndex) => ({ partitionIndex, errorCode })),
            },
          ]
        : [],
  });

  test('the broker decides, for any group, and the store deletes what it deleted', async () => {
    for (const transactional of [false, true]) {
      const store = new MemoryStore();
      await storeOffset(store, 'g', 't', 0, 1n);
      await storeOffset(store, 'g', 't', 1, 2n);
      if (transactional) await store.updateGroup('g', { kind: 'transactional' });
      const sent: OffsetDeleteRequest[] = [];
      const req = request('g', { t: [0, 1] });
      const res = await handleOffsetDelete(req, 0, {
        store,
        deleteAtBroker: async () => {
          sent.push(req);
          return brokerAnswer(ErrorCode.NONE, [ErrorCode.NONE, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC]);
        },
        groupIsEmptyAtBroker: () => Promise.reject(new Error('not asked when the broker decides')),
      });
      expect(codes(res)).toEqual([
        ['t', 0, ErrorCode.NONE],
        ['t', 1, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC],
      ]);
      expect(sent).toHaveLength(1);
      expect((await store.fetch('g', null)).map((o) => o.partition)).toEqual([1]);
      // A group-level refusal deletes nothing; no answer is retriable.
      const refused = await handleOffsetDelete(req, 0, {
        store,
        deleteAtBroker: async () => brokerAnswer(ErrorCode.NON_EMPTY_GROUP),
      });
      expect(refused.errorCode).toBe(ErrorCode.NON_EMPTY_GROUP);
      const silent = await handleOffsetDelete(req, 0, {
        store,
        deleteAtBroker: () => Promise.reject(new Error('x')),
      });
      expect(silent.errorCode).toBe(ErrorCode.COORDINATOR_NOT_AVAILABLE);
      expect((await store.fetch('g', null)).map((o) => o.partition)).toEqual([1]);
    }
  });

  test('a live group the store does not know the members of: the broker refuses the subscribed topics', async () => {
    // The members' joins were not recorded (the store down then): the record says empty.
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 0, 1n);
    await storeOffset(store, 'g', 't', 1, 1n);
    const res = await handleOffsetDelete(request('g', { t: [0, 1] }), 0, {
      store,
      deleteAtBroker: async () =>
        brokerAnswer(ErrorCode.NONE, [
          ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
          ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ]),
    });
    expect(codes(res)).toEqual([
      ['t', 0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC],
      ['t', 1, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC],
    ]);
    expect(await store.fetch('g', null)).toHaveLength(2);
  });

  test('a group the broker does not have is empty: the store deletes, if it has the group', async () => {
    const notFound = async () => brokerAnswer(ErrorCode.GROUP_ID_NOT_FOUND);
    const store = new MemoryStore();
    expect(
      (await handleOffsetDelete(request('g', { t: [0] }), 0, { store, deleteAtBroker: notFound })).errorCode,
    ).toBe(ErrorCode.GROUP_ID_NOT_FOUND);
    await storeOffset(store, 'g', 't', 0, 1n);
    await storeOffset(store, 'g', 't', 1, 1n);
    // The store still lists a member that expired at the broker.
    await store.updateGroup('g', { kind: 'joined', generationId: 1, memberId: 'm', groupInstanceId: null });
    const res = await handleOffsetDelete(request('g', { t: [0], secret: [0] }), 0, {
      store,
      deleteAtBroker: notFound,
      authorize: async () => ({ groupError: ErrorCode.NONE, deniedTopics: new Set(['secret']) }),
    });
    expect([res.errorCode, codes(res)]).toEqual([
      ErrorCode.NONE,
      [
        ['t', 0, ErrorCode.NONE],
        ['secret', 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED],
      ],
    ]);
    expect((await store.fetch('g', null)).map((o) => o.partition)).toEqual([1]);
    // A transactional group's offsets are the broker's: its answer stands.
    await store.updateGroup('g', { kind: 'transactional' });
    expect(
      (await handleOffsetDelete(request('g', { t: [1] }), 0, { store, deleteAtBroker: notFound })).errorCode,
    ).toBe(ErrorCode.GROUP_ID_NOT_FOUND);
    expect(await store.fetch('g', null)).toHaveLength(1);
  });

  test('without a broker to ask, a transactional group cannot be answered', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 0, 1n);
    await store.updateGroup('g', { kind: 'transactional' });
    expect((await handleOffsetDelete(request('g', { t: [0] }), 0, { store })).errorCode).toBe(
      ErrorCode.COORDINATOR_NOT_AVAILABLE,
    );
  });

  test('without the request sent on: live members by the store, the broker is asked whether it is empty', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 0, 1n);
    await store.updateGroup('g', { kind: 'joined', generationId: 1, memberId: 'm', groupInstanceId: null });
    const asked: string[] = [];
    const notEmpty = await handleOffsetDelete(request('g', { t: [0] }), 0, {
      store,
      groupIsEmptyAtBroker: async (g) => (asked.push(g), false),
    });
    expect(codes(notEmpty)).toEqual([['t', 0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC]]);
    // The member expired at the broker without a response the proxy saw.
    const expired = await handleOffsetDelete(request('g', { t: [0] }), 0, {
      store,
      groupIsEmptyAtBroker: async (g) => (asked.push(g), true),
    });
    expect(codes(expired)).toEqual([['t', 0, ErrorCode.NONE]]);
    expect(asked).toEqual(['g', 'g']);
    expect(await store.fetch('g', null)).toEqual([]);
    expect((await store.getGroup('g'))?.members).toEqual([]);
  });
});
