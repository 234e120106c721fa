/**
 * Each offset API reads a group's record from the store at most once per request (commit-fence.ts):
 * the broker's verdict is given the record the fence read rather than reading it again. Counted on
 * a MemoryStore that counts its getGroup calls, through the whole service with fake broker
 * lookups (what the broker answers is beside the point here; what it decides is proven against
 * real brokers in test/integration/guard-*.test.ts).
 */
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import type { GroupState } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
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
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import { defaultTxnOffsetCommitRequest } from '../../protocol/messages/txn-offset-commit-request.js';
import type { AnyExchange, AskBroker, RequestDecision, RequestInfo } from '../core/extension.js';
import { silentLogger } from '../common/log.js';
import type { BrokerLookups } from './broker-lookups.js';
import { GuardPolicy } from './guard-policy.js';
import { OffsetService } from './service.js';
import { classicGroup } from '../../test/harness/stored-offsets.js';

/** A MemoryStore that counts the reads of each group's record. */
class CountingStore extends MemoryStore {
  readonly reads = new Map<string, number>();
  override getGroup(group: string): Promise<GroupState | null> {
    this.reads.set(group, (this.reads.get(group) ?? 0) + 1);
    return super.getGroup(group);
  }
}

const NOT_FOUND = { errorCode: ErrorCode.GROUP_ID_NOT_FOUND, members: [] };

/**
 * A broker whose classic coordinator answers a Heartbeat with `heartbeat` (or does not answer, when
 * it throws) and has the group Stable with members; it has no KIP-848 or streams group of the id.
 */
function fakeLookups(heartbeat: () => Promise<number>): BrokerLookups {
  const lookups = {
    classicMemberStatus: heartbeat,
    describeClassicGroup: async () => ({ errorCode: ErrorCode.NONE, groupState: 'Stable', members: [{}] }),
    describeConsumerGroup: async () => NOT_FOUND,
    describeStreamsGroup: async () => NOT_FOUND,
    assignmentEpochsApply: async () => false,
    newGroupCoordinator: async () => true,
    unknownGroupType: async () => null,
    topicExists: async () => true,
    cachedTopic: () => undefined,
    brokerMinVersion: async () => undefined,
    groupIsEmpty: async () => false,
    fetchOffsets: async () => ({ errorCode: ErrorCode.NONE, topics: [] }),
  };
  return lookups as unknown as BrokerLookups;
}

function service(store: MemoryStore, heartbeat: () => Promise<number> = async () => ErrorCode.NONE) {
  return new OffsetService({
    store,
    guards: new GuardPolicy('fence'),
    unknownTopics: 'reject',
    fallbackUpstream: false,
    mirrorCommits: false,
    lookups: fakeLookups(heartbeat),
    log: silentLogger,
    authorizer: null,
  });
}

const info = (apiKey: number, apiVersion: number, askBroker?: AskBroker): RequestInfo => ({
  connectionId: 'c1',
  apiKey,
  apiVersion,
  correlationId: 1,
  nodeId: 1,
  ...(askBroker ? { askBroker } : {}),
});

const ask = (s: OffsetService, i: RequestInfo, body: unknown): Promise<RequestDecision> =>
  s.handleRequest(i, { apiKey: i.apiKey, body } as AnyRequest);

function body<T>(d: RequestDecision): T {
  expect(d.action).toBe('respond');
  return (d as { body: unknown }).body as T;
}

const commitCodes = (d: RequestDecision): number[] =>
  body<OffsetCommitResponse>(d).topics.flatMap((t) => t.partitions.map((p) => p.errorCode));

function commitReq(
  group: string,
  generation: number,
  memberId: string,
  partitions: { partition: number; metadata?: string }[] = [{ partition: 0 }],
): OffsetCommitRequest {
  return {
    ...defaultOffsetCommitRequest(),
    groupId: group,
    generationIdOrMemberEpoch: generation,
    memberId,
    topics: [
      {
        name: 't',
        topicId: ZERO_UUID,
        partitions: partitions.map((p) => ({
          ...defaultOffsetCommitRequestPartition(),
          partitionIndex: p.partition,
          committedOffset: 5n,
          committedMetadata: p.metadata ?? '',
        })),
      },
    ],
  };
}

/** A service over a counting store holding classic group `g`, its broker answering Heartbeats so. */
async function classicSetup(heartbeat?: () => Promise<number>) {
  const store = new CountingStore();
  await classicGroup(store, 'g');
  return { store, s: service(store, heartbeat) };
}

/** The service's answer to one request, and the reads of each group's record it made. */
async function counted(
  store: CountingStore,
  s: OffsetService,
  i: RequestInfo,
  req: unknown,
): Promise<{ res: RequestDecision; reads: Record<string, number> }> {
  store.reads.clear();
  const res = await ask(s, i, req);
  return { res, reads: Object.fromEntries(store.reads) };
}

const commitInfo = (askBroker?: AskBroker) => info(ApiKey.OffsetCommit, 8, askBroker);

describe('OffsetCommit reads the group record once', () => {
  test('a member without fresh evidence: the broker decides, on the record read once', async () => {
    const { store, s } = await classicSetup();
    const { res, reads } = await counted(store, s, commitInfo(), commitReq('g', 3, 'm1'));
    expect(reads).toEqual({ g: 1 });
    expect(commitCodes(res)).toEqual([ErrorCode.NONE]);
    expect((await store.fetch('g', null)).map((o) => o.offset)).toEqual([5n]);
  });

  test('a zombie refused by the broker, and by a store whose refusal the broker cannot confirm', async () => {
    const { store, s } = await classicSetup(async () => ErrorCode.ILLEGAL_GENERATION);
    const zombie = commitReq('g', 2, 'm1');
    const refused = await counted(store, s, commitInfo(), zombie);
    expect(refused.reads).toEqual({ g: 1 });
    expect(commitCodes(refused.res)).toEqual([ErrorCode.ILLEGAL_GENERATION]);
    const unanswering = service(store, () => Promise.reject(new Error('broker down')));
    const unconfirmed = await counted(store, unanswering, commitInfo(), zombie);
    expect(unconfirmed.reads).toEqual({ g: 1 });
    expect(commitCodes(unconfirmed.res)).toEqual([ErrorCode.COORDINATOR_NOT_AVAILABLE]);
  });

  test('nothing to write (every metadata too large): the group checked on one read', async () => {
    const { store, s } = await classicSetup();
    const big = commitReq('g', 3, 'm1', [{ partition: 0, metadata: 'x'.repeat(5000) }]);
    const { res, reads } = await counted(store, s, commitInfo(), big);
    expect(reads).toEqual({ g: 1 });
    expect(commitCodes(res)).toEqual([ErrorCode.OFFSET_METADATA_TOO_LARGE]);
  });

  test('an anonymous commit to a group with members, refused by the store, then by the broker', async () => {
    const { store, s } = await classicSetup();
    const { res, reads } = await counted(store, s, commitInfo(), commitReq('g', -1, ''));
    expect(reads).toEqual({ g: 1 });
    expect(commitCodes(res)).toEqual([ErrorCode.UNKNOWN_MEMBER_ID]);
  });

  test("a transactional group's commit goes to the broker after one read; TxnOffsetCommit reads none", async () => {
    const { store, s } = await classicSetup();
    const txn = {
      apiKey: ApiKey.TxnOffsetCommit,
      request: { ...defaultTxnOffsetCommitRequest(), groupId: 'g' },
      response: {
        throttleTimeMs: 0,
        topics: [{ name: 't', partitions: [{ partitionIndex: 0, errorCode: ErrorCode.NONE }] }],
      },
    } as AnyExchange;
    store.reads.clear();
    await s.onResponse(info(ApiKey.TxnOffsetCommit, 3), txn);
    expect(Object.fromEntries(store.reads)).toEqual({});
    expect((await store.getGroup('g'))?.transactional).toBe(true);
    let sent = 0;
    const broker = (async () => {
      sent++;
      return txn.response;
    }) as unknown as AskBroker;
    const { res, reads } = await counted(store, s, commitInfo(broker), commitReq('g', 3, 'm1'));
    expect(reads).toEqual({ g: 1 });
    expect(commitCodes(res)).toEqual([ErrorCode.NONE]);
    expect(sent).toBe(1);
    expect(await store.fetch('g', null)).toEqual([]);
  });
});

describe('OffsetFetch and OffsetDelete read the group record once', () => {
  test('a fetch of two groups, naming a member (v9): one read per group', async () => {
    const { store, s } = await classicSetup();
    await classicGroup(store, 'b');
    const group = (groupId: string) => ({
      groupId,
      memberId: 'm1',
      memberEpoch: 3,
      topics: [{ name: 't', partitionIndexes: [0] }],
    });
    const req = { ...defaultOffsetFetchRequest(), groups: [group('g'), group('b')] };
    const { res, reads } = await counted(store, s, info(ApiKey.OffsetFetch, 9), req);
    expect(reads).toEqual({ g: 1, b: 1 });
    expect(body<OffsetFetchResponse>(res).groups.map((g) => g.errorCode)).toEqual([
      ErrorCode.NONE,
      ErrorCode.NONE,
    ]);
  });

  test('a delete decided by the store, and one the broker does not have the group for', async () => {
    const { store, s } = await classicSetup();
    const req = { groupId: 'g', topics: [{ name: 't', partitions: [{ partitionIndex: 0 }] }] };
    const byStore = await counted(store, s, info(ApiKey.OffsetDelete, 0), req);
    expect(byStore.reads).toEqual({ g: 1 });
    const live = body<OffsetDeleteResponse>(byStore.res);
    expect(live.topics[0]!.partitions[0]!.errorCode).toBe(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC);
    const notFound = (async () => ({
      errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
      throttleTimeMs: 0,
      topics: [],
    })) as unknown as AskBroker;
    const byBroker = await counted(store, s, info(ApiKey.OffsetDelete, 0, notFound), req);
    expect(byBroker.reads).toEqual({ g: 1 });
    expect(body<OffsetDeleteResponse>(byBroker.res).errorCode).toBe(ErrorCode.NONE);
  });
});
