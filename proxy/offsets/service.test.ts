/**
 * What the offset service decides before the handlers run (service.ts): the group-level
 * authorization refusal of a commit, the operation each API is authorized for, and a
 * connection's offset requests answered in order. On a MemoryStore, with no broker (lookups
 * null); against a real broker with ACLs: security-acl.test.ts.
 */
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import type { CommitRequest } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import {
  defaultOffsetCommitRequest,
  defaultOffsetCommitRequestPartition,
} from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import type { RequestDecision, RequestInfo } from '../core/extension.js';
import { silentLogger } from '../common/log.js';
import { BrokerAuthorizer } from './authorizer.js';
import type { Decision, Operation } from './authorizer.js';
import { GuardPolicy } from './guard-policy.js';
import type { CommitRefusal } from './offset-commit.js';
import { OffsetService } from './service.js';
import type { AnyRequest } from '../../protocol/messages/index.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';

/** Answers every question with `decide`, and records what was asked. */
class FakeAuthorizer extends BrokerAuthorizer {
  readonly asked: [Operation, string, readonly string[]][] = [];
  constructor(private readonly decide: (op: Operation, group: string) => Decision) {
    super();
  }
  override authorize(
    _info: RequestInfo,
    op: Operation,
    group: string,
    topics: readonly string[],
  ): Promise<Decision> {
    this.asked.push([op, group, topics]);
    return Promise.resolve(this.decide(op, group));
  }
}

function service(store: MemoryStore, authorizer: BrokerAuthorizer | null) {
  const refused: [string, CommitRefusal, number][] = [];
  const accepted: [string, number][] = [];
  const s = new OffsetService({
    store,
    guards: new GuardPolicy('fence'),
    unknownTopics: 'reject',
    fallbackUpstream: false,
    mirrorCommits: false,
    lookups: null,
    log: silentLogger,
    authorizer,
    metrics: {
      commitAccepted: (g, n) => accepted.push([g, n]),
      commitRefused: (g, reason, n) => refused.push([g, reason, n]),
      mirrored: () => undefined,
    },
  });
  return { s, refused, accepted };
}

/** The request as the core hands it over: its body tagged with the info's API key. */
const ask = (s: OffsetService, i: RequestInfo, body: unknown) =>
  s.handleRequest(i, { apiKey: i.apiKey, body } as AnyRequest);

const info = (apiKey: number, apiVersion: number, connectionId = 'c1'): RequestInfo => ({
  connectionId,
  apiKey,
  apiVersion,
  correlationId: 1,
  nodeId: 1,
});

const commitReq = (group: string, topics: Record<string, number[]>, offset = 5n): OffsetCommitRequest => ({
  ...defaultOffsetCommitRequest(),
  groupId: group,
  topics: Object.entries(topics).map(([name, parts]) => ({
    name,
    topicId: ZERO_UUID,
    partitions: parts.map((partitionIndex) => ({
      ...defaultOffsetCommitRequestPartition(),
      partitionIndex,
      committedOffset: offset,
    })),
  })),
});

function body<T>(d: RequestDecision): T {
  expect(d.action).toBe('respond');
  return (d as { body: unknown }).body as T;
}

const codes = (res: OffsetCommitResponse): number[] =>
  res.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));

describe('OffsetService: authorization', () => {
  test('a commit refused for the group: GROUP_AUTHORIZATION_FAILED on every partition, nothing stored', async () => {
    const store = new MemoryStore();
    const auth = new FakeAuthorizer(() => ({
      groupError: ErrorCode.GROUP_AUTHORIZATION_FAILED,
      deniedTopics: new Set(),
    }));
    const { s, refused } = service(store, auth);
    const res = body<OffsetCommitResponse>(
      await ask(s, info(ApiKey.OffsetCommit, 8), commitReq('g', { a: [0, 1], b: [0] })),
    );
    expect(codes(res)).toEqual(Array(3).fill(ErrorCode.GROUP_AUTHORIZATION_FAILED));
    expect(res.topics.map((t) => t.name)).toEqual(['a', 'b']);
    expect(refused).toEqual([['g', 'unauthorized', 3]]);
    expect(auth.asked).toEqual([['read', 'g', ['a', 'b']]]);
    expect(await store.listGroups()).toEqual([]);
  });

  test('an authorization the broker did not decide: retriable, counted as broker_unanswered, not unauthorized', async () => {
    const store = new MemoryStore();
    const auth = new FakeAuthorizer(() => ({
      groupError: ErrorCode.COORDINATOR_NOT_AVAILABLE,
      deniedTopics: new Set(),
    }));
    const { s, refused } = service(store, auth);
    const res = body<OffsetCommitResponse>(
      await ask(s, info(ApiKey.OffsetCommit, 8), commitReq('g', { a: [0, 1] })),
    );
    expect(codes(res)).toEqual([ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE]);
    expect(refused).toEqual([['g', 'broker_unanswered', 2]]);
    expect(await store.listGroups()).toEqual([]);
  });

  test("a denied topic's partitions are refused, the others stored", async () => {
    const store = new MemoryStore();
    const auth = new FakeAuthorizer(() => ({
      groupError: ErrorCode.NONE,
      deniedTopics: new Set(['secret']),
    }));
    const { s, accepted } = service(store, auth);
    const res = body<OffsetCommitResponse>(
      await ask(s, info(ApiKey.OffsetCommit, 8), commitReq('g', { secret: [0], open: [0] })),
    );
    expect(codes(res)).toEqual([ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.NONE]);
    expect(accepted).toEqual([['g', 1]]);
    expect((await store.fetch('g', null)).map((o) => o.topic)).toEqual(['open']);
  });

  test('fetch asks DESCRIBE and delete asks DELETE, and their refusals are group-level', async () => {
    const store = new MemoryStore();
    const auth = new FakeAuthorizer((op) =>
      op === 'read'
        ? { groupError: ErrorCode.NONE, deniedTopics: new Set() }
        : { groupError: ErrorCode.GROUP_AUTHORIZATION_FAILED, deniedTopics: new Set() },
    );
    const { s } = service(store, auth);
    const fetched = body<OffsetFetchResponse>(
      await ask(s, info(ApiKey.OffsetFetch, 7), {
        ...defaultOffsetFetchRequest(),
        groupId: 'g',
        topics: [{ name: 't', partitionIndexes: [0] }],
      }),
    );
    expect(fetched.errorCode).toBe(ErrorCode.GROUP_AUTHORIZATION_FAILED);
    const deleted = body<OffsetDeleteResponse>(
      await ask(s, info(ApiKey.OffsetDelete, 0), {
        groupId: 'g',
        topics: [{ name: 't', partitions: [{ partitionIndex: 0 }] }],
      }),
    );
    expect(deleted.errorCode).toBe(ErrorCode.GROUP_AUTHORIZATION_FAILED);
    expect(auth.asked.map(([op]) => op)).toEqual(['describe', 'delete']);
  });

  test('--authorize off: nothing is asked; without a cluster to ask, no topic is unknown', async () => {
    const store = new MemoryStore();
    const { s } = service(store, null);
    const res = body<OffsetCommitResponse>(
      await ask(s, info(ApiKey.OffsetCommit, 8), commitReq('g', { anything: [0] })),
    );
    expect(codes(res)).toEqual([ErrorCode.NONE]);
  });
});

describe("OffsetService: a connection's offset requests are answered in order", () => {
  test('a fetch pipelined after a slow commit reads the commit', async () => {
    const store = new MemoryStore();
    const commit = store.commit.bind(store);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    store.commit = async (r: CommitRequest) => {
      await gate;
      return commit(r);
    };
    const { s } = service(store, null);
    const committing = ask(s, info(ApiKey.OffsetCommit, 8), commitReq('g', { t: [0] }, 77n));
    const fetching = ask(s, info(ApiKey.OffsetFetch, 8), {
      ...defaultOffsetFetchRequest(),
      groups: [
        { groupId: 'g', memberId: null, memberEpoch: -1, topics: [{ name: 't', partitionIndexes: [0] }] },
      ],
    });
    // Another connection is not held up behind it.
    const other = await ask(s, info(ApiKey.OffsetFetch, 8, 'c2'), {
      ...defaultOffsetFetchRequest(),
      groups: [
        { groupId: 'g', memberId: null, memberEpoch: -1, topics: [{ name: 't', partitionIndexes: [0] }] },
      ],
    });
    expect(body<OffsetFetchResponse>(other).groups[0]!.topics[0]!.partitions[0]!.committedOffset).toBe(-1n);
    release();
    expect(codes(body<OffsetCommitResponse>(await committing))).toEqual([ErrorCode.NONE]);
    const fetched = body<OffsetFetchResponse>(await fetching);
    expect(fetched.groups[0]!.topics[0]!.partitions[0]!.committedOffset).toBe(77n);
  });

  test('other APIs are forwarded', async () => {
    const { s } = service(new MemoryStore(), null);
    expect(await ask(s, info(ApiKey.Heartbeat, 4), {})).toEqual({ action: 'forward' });
    expect(s.interceptsRequest(ApiKey.OffsetCommit)).toBe(true);
    expect(s.interceptsRequest(ApiKey.JoinGroup)).toBe(false);
    expect(s.observesResponse(ApiKey.JoinGroup)).toBe(true);
    // Without a store group index the group tools' answers are not read.
    expect(s.observesResponse(ApiKey.ListGroups)).toBe(false);
  });
});
