/**
 * ListGroups, DescribeGroups and ConsumerGroupDescribe completed with the store's groups
 * (group-views.ts; docs/errors.md): a group whose offsets are here and that the broker does not
 * know is shown as a broker shows an empty group with committed offsets. The answers were read
 * off a real broker and are compared with one in test/integration/groups-tools.test.ts; these run
 * on a MemoryStore with a fake coordinator lookup.
 */
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ConsumerGroupDescribeResponse } from '../../protocol/messages/consumer-group-describe-response.js';
import {
  defaultConsumerGroupDescribeResponse,
  defaultDescribedGroup as defaultConsumerGroup,
} from '../../protocol/messages/consumer-group-describe-response.js';
import { defaultConsumerGroupDescribeRequest } from '../../protocol/messages/consumer-group-describe-request.js';
import { defaultDescribeGroupsRequest } from '../../protocol/messages/describe-groups-request.js';
import type { DescribeGroupsResponse } from '../../protocol/messages/describe-groups-response.js';
import {
  defaultDescribedGroup,
  defaultDescribeGroupsResponse,
} from '../../protocol/messages/describe-groups-response.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { ListGroupsRequest } from '../../protocol/messages/list-groups-request.js';
import { defaultListGroupsRequest } from '../../protocol/messages/list-groups-request.js';
import type { ListGroupsResponse } from '../../protocol/messages/list-groups-response.js';
import {
  defaultListedGroup,
  defaultListGroupsResponse,
} from '../../protocol/messages/list-groups-response.js';
import { storeOffset } from '../../test/harness/stored-offsets.js';
import type { AskBroker, RequestInfo } from '../core/extension.js';
import { silentLogger } from '../common/log.js';
import type { DescribeCheck } from './group-views.js';
import { GroupViews } from './group-views.js';
import { StoreGroupIndex } from './store-groups.js';

/** A store with one group of each kind: simple (never joined), classic, KIP-848. All on node 1. */
async function views(opts: { mayDescribe?: DescribeCheck; coordinator?: Record<string, number> } = {}) {
  const store = new MemoryStore();
  for (const g of ['simple', 'classic', 'kip848']) await storeOffset(store, g, 't', 0);
  await store.updateGroup('classic', {
    kind: 'joined',
    generationId: 1,
    memberId: 'm',
    groupInstanceId: null,
    members: [{ memberId: 'm', groupInstanceId: null }],
  });
  await store.updateGroup('classic', { kind: 'left', memberIds: ['m'] });
  await store.updateGroup('kip848', { kind: 'member-epoch', memberId: 'm', memberEpoch: 1, exact: true });
  await store.updateGroup('kip848', { kind: 'member-epoch', memberId: 'm', memberEpoch: -1 });
  const nodeOf = opts.coordinator ?? { simple: 1, classic: 1, kip848: 1 };
  const index = new StoreGroupIndex(store, {
    coordinatorsOf: async (groups) => new Map(groups.filter((g) => g in nodeOf).map((g) => [g, nodeOf[g]!])),
  });
  return { store, index, views: new GroupViews(index, opts.mayDescribe ?? null, silentLogger) };
}

/** `askBroker`: a fake broker that answers the one API these views ask (DescribeGroups). */
const info = (
  apiVersion: number,
  nodeId: number | null = 1,
  askBroker?: (apiKey: number, apiVersion: number, body: unknown) => Promise<unknown>,
): RequestInfo => ({
  connectionId: 'c1',
  apiKey: ApiKey.ListGroups,
  apiVersion,
  correlationId: 1,
  nodeId,
  ...(askBroker ? { askBroker: askBroker as AskBroker } : {}),
});

const listReq = (statesFilter: string[] = [], typesFilter: string[] = []): ListGroupsRequest => ({
  ...defaultListGroupsRequest(),
  statesFilter,
  typesFilter,
});

const brokerList = (...groupIds: string[]): ListGroupsResponse => ({
  ...defaultListGroupsResponse(),
  groups: groupIds.map((groupId) => ({
    ...defaultListedGroup(),
    groupId,
    protocolType: 'consumer',
    groupState: 'Stable',
    groupType: 'classic',
  })),
});

const byId = <T extends { groupId: string }>(groups: T[]): T[] =>
  [...groups].sort((a, b) => a.groupId.localeCompare(b.groupId));

describe('ListGroups', () => {
  test('v5: the store groups the broker does not list, as a broker lists empty groups with offsets', async () => {
    const { views: v } = await views();
    const res = await v.listGroups(info(5), listReq(), brokerList('classic', 'running'));
    expect(byId(res!.groups)).toEqual([
      { groupId: 'classic', protocolType: 'consumer', groupState: 'Stable', groupType: 'classic' },
      { groupId: 'kip848', protocolType: 'consumer', groupState: 'Empty', groupType: 'consumer' },
      { groupId: 'running', protocolType: 'consumer', groupState: 'Stable', groupType: 'classic' },
      { groupId: 'simple', protocolType: '', groupState: 'Empty', groupType: 'classic' },
    ]);
  });

  test('state from v4, type from v5; below, those fields keep their defaults', async () => {
    const { views: v } = await views();
    const v3 = await v.listGroups(info(3), listReq(), brokerList());
    expect(byId(v3!.groups)).toEqual([
      { groupId: 'classic', protocolType: 'consumer', groupState: '', groupType: '' },
      { groupId: 'kip848', protocolType: 'consumer', groupState: '', groupType: '' },
      { groupId: 'simple', protocolType: '', groupState: '', groupType: '' },
    ]);
    const v4 = await v.listGroups(info(4), listReq(), brokerList());
    expect(v4!.groups.map((g) => [g.groupState, g.groupType])).toEqual([
      ['Empty', ''],
      ['Empty', ''],
      ['Empty', ''],
    ]);
  });

  test('filters: states from v4 and types from v5, case-insensitive; older versions ignore them', async () => {
    const { views: v } = await views();
    expect(await v.listGroups(info(4), listReq(['Stable']), brokerList())).toBeUndefined();
    expect((await v.listGroups(info(4), listReq(['empty']), brokerList()))!.groups).toHaveLength(3);
    expect((await v.listGroups(info(3), listReq(['Stable']), brokerList()))!.groups).toHaveLength(3);
    const consumers = await v.listGroups(info(5), listReq([], ['Consumer']), brokerList());
    expect(consumers!.groups.map((g) => g.groupId)).toEqual(['kip848']);
    const classic = await v.listGroups(info(5), listReq(['Empty'], ['classic']), brokerList());
    expect(classic!.groups.map((g) => g.groupId).sort()).toEqual(['classic', 'simple']);
    expect((await v.listGroups(info(4), listReq([], ['consumer']), brokerList()))!.groups).toHaveLength(3);
  });

  test('only on the broker that coordinates the group, never on the bootstrap listener', async () => {
    const { views: v } = await views({ coordinator: { simple: 1, classic: 2 } });
    expect((await v.listGroups(info(5, 1), listReq(), brokerList()))!.groups.map((g) => g.groupId)).toEqual([
      'simple',
    ]);
    expect((await v.listGroups(info(5, 2), listReq(), brokerList()))!.groups.map((g) => g.groupId)).toEqual([
      'classic',
    ]);
    expect(await v.listGroups(info(5, 3), listReq(), brokerList())).toBeUndefined();
    expect(await v.listGroups(info(5, null), listReq(), brokerList())).toBeUndefined();
  });

  test('only groups the client may describe; a broker error stands', async () => {
    const asked: string[][] = [];
    const { views: v } = await views({
      mayDescribe: async (_info, groups) => {
        asked.push([...groups].sort());
        return new Set(['kip848']);
      },
    });
    expect((await v.listGroups(info(5), listReq(), brokerList()))!.groups.map((g) => g.groupId)).toEqual([
      'kip848',
    ]);
    expect(asked).toEqual([['classic', 'kip848', 'simple']]);
    const refused = { ...brokerList(), errorCode: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS };
    expect(await v.listGroups(info(5), listReq(), refused)).toBeUndefined();
  });
});

const described = (
  groupId: string,
  groupState: string,
  errorCode = 0,
): DescribeGroupsResponse['groups'][number] => ({
  ...defaultDescribedGroup(),
  groupId,
  groupState,
  errorCode,
});

describe('DescribeGroups', () => {
  test('Dead with offsets here: Empty, no members; a KIP-848 group stays Dead, as on a broker', async () => {
    const { views: v } = await views();
    const res = await v.describeGroups(info(5), defaultDescribeGroupsRequest(), {
      ...defaultDescribeGroupsResponse(),
      groups: [
        described('simple', 'Dead'),
        described('classic', 'Dead'),
        described('kip848', 'Dead'),
        described('unknown', 'Dead'),
        described('running', 'Stable'),
      ],
    });
    expect(res!.groups.map((g) => [g.groupId, g.groupState, g.protocolType, g.members.length])).toEqual([
      ['simple', 'Empty', '', 0],
      ['classic', 'Empty', 'consumer', 0],
      ['kip848', 'Dead', '', 0],
      ['unknown', 'Dead', '', 0],
      ['running', 'Stable', '', 0],
    ]);
  });

  test('v6: GROUP_ID_NOT_FOUND with offsets here is Empty with no error; a KIP-848 group keeps it', async () => {
    const { views: v } = await views();
    const notFound = (id: string) => ({
      ...described(id, 'Dead', 69),
      errorMessage: `Group ${id} not found.`,
    });
    const res = await v.describeGroups(info(6), defaultDescribeGroupsRequest(), {
      ...defaultDescribeGroupsResponse(),
      groups: [notFound('classic'), notFound('kip848'), notFound('unknown')],
    });
    expect(
      res!.groups.map((g) => [g.groupId, g.errorCode, g.errorMessage, g.groupState, g.protocolType]),
    ).toEqual([
      ['classic', 0, null, 'Empty', 'consumer'],
      ['kip848', 69, 'Group kip848 not found.', 'Dead', ''],
      ['unknown', 69, 'Group unknown not found.', 'Dead', ''],
    ]);
  });

  test("nothing to change: the broker's answer stands as it is", async () => {
    const { views: v } = await views();
    const res: DescribeGroupsResponse = {
      ...defaultDescribeGroupsResponse(),
      groups: [described('kip848', 'Dead'), described('simple', 'Stable'), described('classic', 'Dead', 30)],
    };
    expect(await v.describeGroups(info(5), defaultDescribeGroupsRequest(), res)).toBeUndefined();
  });
});

describe('ConsumerGroupDescribe', () => {
  const notFound = (groupId: string) => ({
    ...defaultConsumerGroup(),
    groupId,
    errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
    errorMessage: `Group ${groupId} not found.`,
  });
  const response = (...groupIds: string[]): ConsumerGroupDescribeResponse => ({
    ...defaultConsumerGroupDescribeResponse(),
    groups: groupIds.map(notFound),
  });

  test('a KIP-848 group the broker calls Dead is Empty; a classic or simple one is "not a consumer group"', async () => {
    const { views: v } = await views();
    const asked: unknown[] = [];
    const askBroker = async (apiKey: number, apiVersion: number, body: unknown) => {
      asked.push([apiKey, apiVersion, body]);
      return {
        ...defaultDescribeGroupsResponse(),
        groups: [described('kip848', 'Dead'), described('simple', 'Dead'), described('classic', 'Dead')],
      };
    };
    const res = await v.consumerGroupDescribe(
      info(0, 1, askBroker),
      defaultConsumerGroupDescribeRequest(),
      response('kip848', 'simple', 'classic', 'unknown'),
    );
    expect(asked).toEqual([
      [
        ApiKey.DescribeGroups,
        5,
        { ...defaultDescribeGroupsRequest(), groups: ['kip848', 'simple', 'classic'] },
      ],
    ]);
    expect(res!.groups).toEqual([
      { ...defaultConsumerGroup(), groupId: 'kip848', groupState: 'Empty', errorCode: 0, errorMessage: null },
      { ...notFound('simple'), errorMessage: 'Group simple is not a consumer group.' },
      { ...notFound('classic'), errorMessage: 'Group classic is not a consumer group.' },
      notFound('unknown'),
    ]);
  });

  test('a group the broker runs as a classic group (not Dead) keeps the broker answer', async () => {
    const { views: v } = await views();
    const askBroker = async () => ({
      ...defaultDescribeGroupsResponse(),
      groups: [described('kip848', 'Stable'), described('simple', 'Dead')],
    });
    const res = await v.consumerGroupDescribe(
      info(0, 1, askBroker),
      defaultConsumerGroupDescribeRequest(),
      response('kip848', 'simple'),
    );
    expect(res!.groups[0]).toEqual(notFound('kip848'));
  });

  test("without a way to ask, or when the broker does not answer, the broker's answer stands", async () => {
    const { views: v } = await views();
    const req = defaultConsumerGroupDescribeRequest();
    expect(await v.consumerGroupDescribe(info(0, 1), req, response('kip848'))).toBeUndefined();
    const down = () => Promise.reject(new Error('closed'));
    expect(await v.consumerGroupDescribe(info(0, 1, down), req, response('kip848'))).toBeUndefined();
    // Groups the store does not have are not asked about.
    let asked = 0;
    const counting = async () => {
      asked++;
      return defaultDescribeGroupsResponse();
    };
    expect(await v.consumerGroupDescribe(info(0, 1, counting), req, response('unknown'))).toBeUndefined();
    expect(asked).toBe(0);
  });
});
