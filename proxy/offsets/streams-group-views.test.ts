/**
 * A streams group the broker forgot and the store has (streams-group-views.ts, group-views.ts):
 * listed as streams, left Dead to DescribeGroups and "not a consumer group" to
 * ConsumerGroupDescribe, and described by StreamsGroupDescribe as Empty with its stored topology,
 * partitions resolved from the metadata. The broker's answers these complete were read off Kafka
 * 4.4.0 and are compared with one in test/integration/groups-tools.test.ts; these run on a
 * MemoryStore with a fake broker.
 */
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { defaultConsumerGroupDescribeRequest } from '../../protocol/messages/consumer-group-describe-request.js';
import {
  defaultConsumerGroupDescribeResponse,
  defaultDescribedGroup as defaultConsumerGroup,
} from '../../protocol/messages/consumer-group-describe-response.js';
import { defaultDescribeGroupsRequest } from '../../protocol/messages/describe-groups-request.js';
import {
  defaultDescribedGroup as defaultClassicGroup,
  defaultDescribeGroupsResponse,
} from '../../protocol/messages/describe-groups-response.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultListGroupsRequest } from '../../protocol/messages/list-groups-request.js';
import { defaultListGroupsResponse } from '../../protocol/messages/list-groups-response.js';
import { defaultStreamsGroupDescribeRequest } from '../../protocol/messages/streams-group-describe-request.js';
import type {
  StreamsGroupDescribeResponse,
  Subtopology,
} from '../../protocol/messages/streams-group-describe-response.js';
import {
  defaultDescribedGroup,
  defaultStreamsGroupDescribeResponse,
} from '../../protocol/messages/streams-group-describe-response.js';
import {
  defaultStreamsGroupHeartbeatRequest,
  defaultSubtopology,
  defaultTopicInfo,
} from '../../protocol/messages/streams-group-heartbeat-request.js';
import { defaultStreamsGroupHeartbeatResponse } from '../../protocol/messages/streams-group-heartbeat-response.js';
import { storeOffset } from '../../test/harness/stored-offsets.js';
import type { AskBroker, RequestInfo } from '../core/extension.js';
import { silentLogger } from '../common/log.js';
import { GroupViews } from './group-views.js';
import { StoreGroupIndex } from './store-groups.js';
import { StreamsGroupViews } from './streams-group-views.js';
import { topologyUpdate } from './streams-topologies.js';

/** The word count's topology: `in` into a repartition topic, counted into a changelog. */
const joinOf = (group: string, source = 'in') => ({
  ...defaultStreamsGroupHeartbeatRequest(),
  groupId: group,
  topology: {
    epoch: 0,
    subtopologies: [
      { ...defaultSubtopology(), subtopologyId: '0', sourceTopics: [source], repartitionSinkTopics: ['rep'] },
      {
        ...defaultSubtopology(),
        subtopologyId: '1',
        repartitionSourceTopics: [{ ...defaultTopicInfo(), name: 'rep' }],
        stateChangelogTopics: [{ ...defaultTopicInfo(), name: 'changelog', replicationFactor: -1 }],
      },
    ],
  },
});

/** Streams groups `app` and `gone-input` (its source topic deleted), with offsets; all on node 1. */
async function setup() {
  const store = new MemoryStore();
  for (const [group, source] of [
    ['app', 'in'],
    ['gone-input', 'deleted'],
  ] as const) {
    await storeOffset(store, group, source, 0);
    await store.updateGroup(
      group,
      topologyUpdate(joinOf(group, source), defaultStreamsGroupHeartbeatResponse())!,
    );
  }
  const index = new StoreGroupIndex(store, { coordinatorsOf: async (gs) => new Map(gs.map((g) => [g, 1])) });
  const views = new GroupViews(index, null, silentLogger);
  return {
    views,
    streams: new StreamsGroupViews((i, answers, wanted) => views.forgotten(i, answers, wanted), silentLogger),
  };
}

/** A broker that knows none of the groups (`known`: these it has, as some other kind) and has `in` (4 partitions) and `rep` (3). */
const info = (apiVersion: number, known: string[] = []): RequestInfo => ({
  connectionId: 'c1',
  apiKey: ApiKey.StreamsGroupDescribe,
  apiVersion,
  correlationId: 1,
  nodeId: 1,
  askBroker: (async (
    apiKey: number,
    _v: number,
    body: { groups?: string[]; topics?: { name: string }[] },
  ) => {
    if (apiKey === ApiKey.DescribeGroups)
      return {
        groups: body.groups!.map((g) => ({
          ...defaultClassicGroup(),
          groupId: g,
          groupState: known.includes(g) ? 'Empty' : 'Dead',
        })),
      };
    if (apiKey === ApiKey.Metadata) {
      const partitions: Record<string, number> = { in: 4, rep: 3 };
      return {
        topics: body.topics!.map(({ name }) => ({
          name,
          errorCode: name in partitions ? 0 : ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
          partitions: Array.from({ length: partitions[name] ?? 0 }, () => ({})),
        })),
      };
    }
    throw new Error(`unexpected API ${apiKey}`);
  }) as AskBroker,
});

const notFound = (...groupIds: string[]): StreamsGroupDescribeResponse => ({
  ...defaultStreamsGroupDescribeResponse(),
  groups: groupIds.map((groupId) => ({
    ...defaultDescribedGroup(),
    groupId,
    errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
    errorMessage: `Group ${groupId} not found.`,
  })),
});
const describeReq = { ...defaultStreamsGroupDescribeRequest(), groupIds: ['app'] };

describe('StreamsGroupDescribe', () => {
  test('a group the broker does not know: Empty, no members, the stored topology with partitions resolved', async () => {
    const { streams } = await setup();
    const res = await streams.streamsGroupDescribe(info(1), describeReq, notFound('app'));
    expect(res!.groups[0]).toEqual({
      ...defaultDescribedGroup(),
      groupId: 'app',
      errorCode: 0,
      errorMessage: null,
      groupState: 'Empty',
      groupEpoch: 0,
      assignmentEpoch: 0,
      topology: expect.anything(),
      members: [],
      topologyDescription: null,
      topologyDescriptionStatus: 0,
      assignorName: 'sticky',
    });
    // The changelog's count is its subtopology's input's, the repartition topic's its own.
    const partitionsOf = (s: Subtopology) => [
      ...s.sourceTopics,
      ...[...s.stateChangelogTopics, ...s.repartitionSourceTopics].map((t) => `${t.name}:${t.partitions}`),
    ];
    expect(res!.groups[0]!.topology!.subtopologies!.map(partitionsOf)).toEqual([
      ['in'],
      ['changelog:3', 'rep:3'],
    ]);
    expect(res!.groups[0]!.topology!.subtopologies!.map((s) => s.repartitionSinkTopics)).toEqual([
      ['rep'],
      [],
    ]);
    // v0 has no assignor; a description asked for is one not stored.
    expect(
      (await streams.streamsGroupDescribe(info(0), describeReq, notFound('app')))!.groups[0]!.assignorName,
    ).toBeNull();
    const withDescription = { ...describeReq, includeTopologyDescription: true };
    expect(
      (await streams.streamsGroupDescribe(info(1), withDescription, notFound('app')))!.groups[0]!
        .topologyDescriptionStatus,
    ).toBe(1);
  });

  test('a source topic missing: no subtopologies, as a broker shows an unconfigured topology', async () => {
    const { streams } = await setup();
    const res = await streams.streamsGroupDescribe(info(1), describeReq, notFound('gone-input'));
    expect(res!.groups[0]!.topology).toEqual({ epoch: 0, subtopologies: null });
  });

  test("the broker's answer stands where it knows the group, or the store has no topology for it", async () => {
    const { streams } = await setup();
    expect(
      await streams.streamsGroupDescribe(info(1, ['app']), describeReq, notFound('app')),
    ).toBeUndefined();
    expect(await streams.streamsGroupDescribe(info(1), describeReq, notFound('other'))).toBeUndefined();
    const known = {
      ...defaultStreamsGroupDescribeResponse(),
      groups: [{ ...defaultDescribedGroup(), groupId: 'app' }],
    };
    expect(await streams.streamsGroupDescribe(info(1), describeReq, known)).toBeUndefined();
  });

  test('the assignor is the one the broker last named', async () => {
    const { streams } = await setup();
    const live = {
      ...defaultStreamsGroupDescribeResponse(),
      groups: [{ ...defaultDescribedGroup(), groupId: 'live', groupState: 'Stable', assignorName: 'custom' }],
    };
    expect(await streams.streamsGroupDescribe(info(1), describeReq, live)).toBeUndefined();
    const res = await streams.streamsGroupDescribe(info(1), describeReq, notFound('app'));
    expect(res!.groups[0]!.assignorName).toBe('custom');
  });
});

describe('the other group APIs', () => {
  test('ListGroups: type and protocol type streams, Empty; the streams type filter matches it', async () => {
    const { views } = await setup();
    const res = await views.listGroups(info(5), defaultListGroupsRequest(), defaultListGroupsResponse());
    expect(res!.groups).toContainEqual({
      groupId: 'app',
      protocolType: 'streams',
      groupState: 'Empty',
      groupType: 'streams',
    });
    const streamsOnly = await views.listGroups(
      info(5),
      { ...defaultListGroupsRequest(), typesFilter: ['Streams'] },
      defaultListGroupsResponse(),
    );
    expect(streamsOnly!.groups.map((g) => g.groupId).sort()).toEqual(['app', 'gone-input']);
    expect(
      await views.listGroups(
        info(5),
        { ...defaultListGroupsRequest(), typesFilter: ['classic'] },
        defaultListGroupsResponse(),
      ),
    ).toBeUndefined();
  });

  test('DescribeGroups leaves it Dead; ConsumerGroupDescribe says it is not a consumer group', async () => {
    const { views } = await setup();
    const dead = {
      ...defaultDescribeGroupsResponse(),
      groups: [{ ...defaultClassicGroup(), groupId: 'app', groupState: 'Dead' }],
    };
    expect(await views.describeGroups(info(5), defaultDescribeGroupsRequest(), dead)).toBeUndefined();
    const res = await views.consumerGroupDescribe(info(0), defaultConsumerGroupDescribeRequest(), {
      ...defaultConsumerGroupDescribeResponse(),
      groups: [
        {
          ...defaultConsumerGroup(),
          groupId: 'app',
          errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
          errorMessage: 'Group app not found.',
        },
      ],
    });
    expect(res!.groups[0]).toMatchObject({
      errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
      errorMessage: 'Group app is not a consumer group.',
    });
  });
});
