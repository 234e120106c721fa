/**
 * What the offset service asks the cluster itself, through the proxy's cluster client: a group's
 * offsets at its coordinator (transactional groups and `--fallback upstream`), whether a group is
 * empty at the broker, which topics exist (topic-cache.ts), and mirrored commits (`--mirror-commits`).
 */
import type { TopicPartition } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { defaultDescribeGroupsRequest } from '../../protocol/messages/describe-groups-request.js';
import type { DescribeGroupsResponse } from '../../protocol/messages/describe-groups-response.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { defaultConsumerGroupDescribeRequest } from '../../protocol/messages/consumer-group-describe-request.js';
import type { ConsumerGroupDescribeResponse } from '../../protocol/messages/consumer-group-describe-response.js';
import { defaultHeartbeatRequest } from '../../protocol/messages/heartbeat-request.js';
import { defaultListGroupsRequest } from '../../protocol/messages/list-groups-request.js';
import { defaultStreamsGroupDescribeRequest } from '../../protocol/messages/streams-group-describe-request.js';
import { defaultDescribedGroup } from '../../protocol/messages/streams-group-describe-response.js';
import type { StreamsGroupDescribeResponse } from '../../protocol/messages/streams-group-describe-response.js';
import { ClusterRequestError, isClusterError } from '../client/cluster-client.js';
import type { ClusterClient } from '../client/cluster-client.js';
import type { FetchedGroup } from './offset-fetch.js';
import { ownMaxVersion } from '../client/own-versions.js';
import { TopicCache } from './topic-cache.js';
import type { CachedTopic } from './topic-cache.js';

export const RETRY_COORDINATOR = new Set<number>([
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
]);

const NO_CONSUMER_GROUP: ConsumerGroupDescribeResponse['groups'][number] = {
  errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
  errorMessage: null,
  groupId: '',
  groupState: '',
  groupEpoch: -1,
  assignmentEpoch: -1,
  assignorName: '',
  members: [],
  authorizedOperations: -2147483648,
};

function groupTopics(partitions: TopicPartition[]): { name: string; partitionIndexes: number[] }[] {
  const byTopic = new Map<string, number[]>();
  for (const tp of partitions) {
    const list = byTopic.get(tp.topic) ?? [];
    list.push(tp.partition);
    byTopic.set(tp.topic, list);
  }
  return [...byTopic.entries()].map(([name, partitionIndexes]) => ({ name, partitionIndexes }));
}

/** Group types the commit guard knows; ListGroups naming another defers the group to the broker. */
const KNOWN_GROUP_TYPES: ReadonlySet<string> = new Set(['classic', 'consumer', 'streams', 'share']);

/** Whether the broker lacks the API altogether (as opposed to not answering). */
const lacksApi = (err: unknown): boolean => isClusterError(err, 'UNSUPPORTED_API');

/**
 * The proxy's own OffsetFetch and OffsetCommit name topics by name, as the store keeps them: v10
 * names them by id (KIP-848), so these go in v9 at most, which every broker with v10 also has. The
 * cap itself is the cluster client's (own-versions.ts), where every such cap is kept.
 */
export const NAMED_OFFSETS_MAX_VERSION = ownMaxVersion(ApiKey.OffsetFetch)!;

/** DescribeLogDirs v5 came with Kafka 4.3, as assignment epochs did (KIP-1251). */
const FIRST_DESCRIBE_LOG_DIRS_OF_ASSIGNMENT_EPOCHS = 5;

export class BrokerLookups {
  private readonly topicCache: TopicCache;

  constructor(
    private readonly cluster: ClusterClient,
    topicCacheMs = 10_000,
  ) {
    this.topicCache = new TopicCache(cluster, topicCacheMs);
  }

  /**
   * Runs `op` against the group's coordinator, looking the coordinator up again once if it moved;
   * all of it within the request timeout (`ClusterClient.within`), as every lookup goes through here.
   */
  private atCoordinator<T>(
    group: string,
    op: (nodeId: number) => Promise<{ result: T; retry: boolean }>,
  ): Promise<T> {
    return this.cluster.within(`asking the coordinator of group ${group}`, async () => {
      let nodeId = await this.cluster.coordinatorOf(group);
      const first = await op(nodeId);
      let result = first.result;
      const retry = first.retry;
      if (retry) {
        await new Promise((r) => setTimeout(r, 200));
        nodeId = await this.cluster.coordinatorOf(group);
        ({ result } = await op(nodeId));
      }
      return result;
    });
  }

  /**
   * Runs `op` with the cluster client against the group's coordinator, as atCoordinator does: for
   * the modules that ask the coordinator beside these lookups (commit-mirror.ts).
   */
  coordinatorRequest<T>(
    group: string,
    op: (cluster: ClusterClient, nodeId: number) => Promise<{ result: T; retry: boolean }>,
  ): Promise<T> {
    return this.atCoordinator(group, (nodeId) => op(this.cluster, nodeId));
  }

  async fetchOffsets(
    group: string,
    partitions: TopicPartition[] | null,
    requireStable: boolean,
  ): Promise<FetchedGroup> {
    const topics = partitions === null ? null : groupTopics(partitions);
    return this.atCoordinator(group, async (nodeId) => {
      const { version, body } = await this.cluster.request(
        nodeId,
        ApiKey.OffsetFetch,
        (v: number) =>
          v >= 8
            ? {
                ...defaultOffsetFetchRequest(),
                // Named topics: the id is for v10+, which the cap keeps these requests below.
                groups: [
                  {
                    groupId: group,
                    memberId: null,
                    memberEpoch: -1,
                    topics: topics?.map((t) => ({ ...t, topicId: ZERO_UUID })) ?? null,
                  },
                ],
                requireStable,
              }
            : {
                ...defaultOffsetFetchRequest(),
                groupId: group,
                topics,
                requireStable: v >= 7 && requireStable,
              },
        NAMED_OFFSETS_MAX_VERSION,
      );
      const fetched: FetchedGroup =
        version >= 8
          ? {
              errorCode: body.groups[0]?.errorCode ?? ErrorCode.UNKNOWN_SERVER_ERROR,
              topics: body.groups[0]?.topics ?? [],
            }
          : { errorCode: body.errorCode, topics: body.topics };
      return { result: fetched, retry: RETRY_COORDINATOR.has(fetched.errorCode) };
    });
  }

  /**
   * Member counts of groups as their coordinators' DescribeGroups report them (a group the
   * broker does not know, or a KIP-848 group, which DescribeGroups calls Dead: 0). One request per
   * coordinator; groups whose coordinator or answer is missing are left out.
   */
  async memberCounts(groups: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const byNode = new Map<number, string[]>();
    for (const [g, nodeId] of await this.cluster.coordinatorsOf(groups)) {
      let list = byNode.get(nodeId);
      if (!list) byNode.set(nodeId, (list = []));
      list.push(g);
    }
    await Promise.all(
      [...byNode].map(async ([nodeId, gs]) => {
        try {
          const { body } = await this.cluster.request(
            nodeId,
            ApiKey.DescribeGroups,
            { ...defaultDescribeGroupsRequest(), groups: gs },
            5,
          );
          for (const g of body.groups)
            if (g.errorCode === ErrorCode.NONE) out.set(g.groupId, g.members.length);
        } catch {
          // that coordinator's groups get no members series this round
        }
      }),
    );
    return out;
  }

  /** True when the broker says the group has no members (Empty, Dead, or unknown). */
  async groupIsEmpty(group: string): Promise<boolean> {
    return this.atCoordinator(group, async (nodeId) => {
      const { body } = await this.cluster.request(
        nodeId,
        ApiKey.DescribeGroups,
        { ...defaultDescribeGroupsRequest(), groups: [group] },
        5,
      );
      const g = body.groups[0];
      if (!g) return { result: false, retry: false };
      if (RETRY_COORDINATOR.has(g.errorCode)) return { result: false, retry: true };
      const gone =
        g.errorCode === ErrorCode.GROUP_ID_NOT_FOUND ||
        (g.errorCode === ErrorCode.NONE && g.groupState === 'Dead');
      if (gone) return this.consumerGroupIsEmpty(nodeId, group);
      return { result: g.errorCode === ErrorCode.NONE && g.groupState === 'Empty', retry: false };
    });
  }

  /**
   * DescribeGroups knows only classic groups: a running KIP-848 group (`group.protocol=consumer`)
   * is GROUP_ID_NOT_FOUND (v6+) or Dead to it. So "not found" is confirmed with
   * ConsumerGroupDescribe, where the broker has it (Kafka 3.7+); a broker without it has no such
   * groups. Anything undecided counts as not empty: the caller then refuses rather than fence out
   * running members.
   */
  private async consumerGroupIsEmpty(
    nodeId: number,
    group: string,
  ): Promise<{ result: boolean; retry: boolean }> {
    try {
      await this.cluster.versionFor(nodeId, ApiKey.ConsumerGroupDescribe);
    } catch (err) {
      // Only "this broker has no ConsumerGroupDescribe" means no KIP-848 groups; a connection
      // failure is not an answer.
      if (lacksApi(err)) return { result: true, retry: false };
      throw err;
    }
    const { body } = await this.cluster.request(nodeId, ApiKey.ConsumerGroupDescribe, {
      ...defaultConsumerGroupDescribeRequest(),
      groupIds: [group],
    });
    const g = body.groups[0];
    if (!g) return { result: false, retry: false };
    if (RETRY_COORDINATOR.has(g.errorCode)) return { result: false, retry: true };
    if (g.errorCode === ErrorCode.GROUP_ID_NOT_FOUND) return { result: true, retry: false };
    return { result: g.errorCode === ErrorCode.NONE && g.members.length === 0, retry: false };
  }

  /**
   * Asks the broker whether a classic-group member of this generation is current: a Heartbeat
   * with its identity is validated exactly as a commit would be (NONE or REBALANCE_IN_PROGRESS:
   * current; ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID: not). It also counts as a
   * heartbeat for the member, which is harmless.
   */
  async classicMemberStatus(
    group: string,
    generationId: number,
    memberId: string,
    groupInstanceId: string | null,
  ): Promise<number> {
    return this.atCoordinator(group, async (nodeId) => {
      const { body } = await this.cluster.request(nodeId, ApiKey.Heartbeat, (v: number) => ({
        ...defaultHeartbeatRequest(),
        groupId: group,
        generationId,
        memberId,
        groupInstanceId: v >= 3 ? groupInstanceId : null,
      }));
      return { result: body.errorCode, retry: RETRY_COORDINATOR.has(body.errorCode) };
    });
  }

  /** The current epoch of a KIP-848 member at the broker, or null when the broker does not know it. */
  async consumerMemberEpoch(group: string, memberId: string): Promise<number | null> {
    return this.atCoordinator(group, async (nodeId) => {
      const { body } = await this.cluster.request(nodeId, ApiKey.ConsumerGroupDescribe, {
        ...defaultConsumerGroupDescribeRequest(),
        groupIds: [group],
      });
      const g = body.groups[0];
      if (!g || RETRY_COORDINATOR.has(g.errorCode)) return { result: null, retry: true };
      return { result: g.members.find((m) => m.memberId === memberId)?.memberEpoch ?? null, retry: false };
    });
  }

  /**
   * Whether the group's coordinator accepts a KIP-848 member's commit with an older epoch for the
   * partitions it has held since (KIP-1251, Kafka 4.3). No feature or API version marks it; the
   * same release first supports DescribeLogDirs v5, which tells that release from the ones before.
   */
  async assignmentEpochsApply(group: string): Promise<boolean> {
    return this.atCoordinator(group, async (nodeId) => {
      const range = await this.cluster.brokerRange(nodeId, ApiKey.DescribeLogDirs);
      return {
        result: range !== undefined && range.max >= FIRST_DESCRIBE_LOG_DIRS_OF_ASSIGNMENT_EPOCHS,
        retry: false,
      };
    });
  }

  /**
   * The lowest version of `apiKey` a broker serves: the one a client's connection is pinned to
   * (`nodeId`), or the group's coordinator (null: the bootstrap listener). Undefined when it does
   * not have the API.
   */
  async brokerMinVersion(nodeId: number | null, group: string, apiKey: number): Promise<number | undefined> {
    const range =
      nodeId === null
        ? await this.atCoordinator(group, async (n) => ({
            result: await this.cluster.brokerRange(n, apiKey),
            retry: false,
          }))
        : await this.cluster.within(`asking broker ${nodeId} its versions`, () =>
            this.cluster.brokerRange(nodeId, apiKey),
          );
    return range?.min;
  }

  /**
   * Whether the group's coordinator is KIP-848's group coordinator. Kafka 4.0, where it is the
   * only one, removed OffsetCommit v0-1. Kafka 3.7-3.9 advertise ConsumerGroupDescribe whichever
   * coordinator runs, and the classic one answers it UNSUPPORTED_VERSION (asked only for commits
   * to a group the broker does not have: no cache).
   */
  async newGroupCoordinator(group: string): Promise<boolean> {
    const advertised = await this.atCoordinator(group, async (nodeId) => {
      const [commit, describe] = await Promise.all([
        this.cluster.brokerRange(nodeId, ApiKey.OffsetCommit),
        this.cluster.brokerRange(nodeId, ApiKey.ConsumerGroupDescribe),
      ]);
      const kafka4 = commit !== undefined && commit.min >= 2;
      return {
        result: kafka4 ? ('yes' as const) : describe ? ('ask' as const) : ('no' as const),
        retry: false,
      };
    });
    if (advertised !== 'ask') return advertised === 'yes';
    const d = await this.describeConsumerGroup(group);
    if (d === null) throw new ClusterRequestError('BAD_RESPONSE', 'no ConsumerGroupDescribe answer');
    return d.errorCode !== ErrorCode.UNSUPPORTED_VERSION;
  }

  /**
   * The group as DescribeGroups sees it (classic groups; a KIP-848 group is "not found" to it), or
   * null when the coordinator did not answer for it.
   */
  async describeClassicGroup(group: string): Promise<DescribeGroupsResponse['groups'][number] | null> {
    return this.atCoordinator(group, async (nodeId) => {
      const { body } = await this.cluster.request(
        nodeId,
        ApiKey.DescribeGroups,
        { ...defaultDescribeGroupsRequest(), groups: [group] },
        5,
      );
      const g = body.groups[0] ?? null;
      return { result: g, retry: g === null || RETRY_COORDINATOR.has(g.errorCode) };
    });
  }

  /**
   * The group as ConsumerGroupDescribe sees it (KIP-848 groups), or null when the coordinator did
   * not answer for it; a broker without the API (before Kafka 3.7) has no such groups, which is
   * answered as GROUP_ID_NOT_FOUND.
   */
  async describeConsumerGroup(
    group: string,
  ): Promise<ConsumerGroupDescribeResponse['groups'][number] | null> {
    return this.describeModernGroup(
      group,
      ApiKey.ConsumerGroupDescribe,
      async (nodeId) =>
        (
          await this.cluster.request(nodeId, ApiKey.ConsumerGroupDescribe, {
            ...defaultConsumerGroupDescribeRequest(),
            groupIds: [group],
          })
        ).body.groups,
      { ...NO_CONSUMER_GROUP, groupId: group },
    );
  }

  /**
   * The group as StreamsGroupDescribe sees it (streams groups, KIP-1071), or null when the
   * coordinator did not answer for it; a broker without the API has no such groups, which is
   * answered as GROUP_ID_NOT_FOUND.
   */
  async describeStreamsGroup(group: string): Promise<StreamsGroupDescribeResponse['groups'][number] | null> {
    return this.describeModernGroup(
      group,
      ApiKey.StreamsGroupDescribe,
      async (nodeId) =>
        (
          await this.cluster.request(nodeId, ApiKey.StreamsGroupDescribe, {
            ...defaultStreamsGroupDescribeRequest(),
            groupIds: [group],
          })
        ).body.groups,
      { ...defaultDescribedGroup(), errorCode: ErrorCode.GROUP_ID_NOT_FOUND, groupId: group },
    );
  }

  /**
   * One group's description by a describe API of its own kind (`describe` asks the coordinator
   * `nodeId` with `apiKey`); `notFound` where the broker lacks the API.
   */
  private describeModernGroup<G extends { errorCode: number }>(
    group: string,
    apiKey: number,
    describe: (nodeId: number) => Promise<G[]>,
    notFound: G,
  ): Promise<G | null> {
    return this.atCoordinator(group, async (nodeId) => {
      try {
        await this.cluster.versionFor(nodeId, apiKey);
      } catch (err) {
        if (lacksApi(err)) return { result: notFound, retry: false };
        throw err;
      }
      const g = (await describe(nodeId))[0] ?? null;
      return { result: g, retry: g === null || RETRY_COORDINATOR.has(g.errorCode) };
    });
  }

  /**
   * The type the group's coordinator lists the group under (ListGroups v5+), when it is none the
   * commit guard knows; null for a known type, an unlisted group, or a broker too old to say
   * (it has none but classic and consumer groups). Asked only for groups no describe found.
   */
  async unknownGroupType(group: string): Promise<string | null> {
    return this.atCoordinator(group, async (nodeId) => {
      const range = await this.cluster.brokerRange(nodeId, ApiKey.ListGroups);
      if (range === undefined || range.max < 5) return { result: null, retry: false };
      const { body } = await this.cluster.request(nodeId, ApiKey.ListGroups, defaultListGroupsRequest(), 5);
      if (RETRY_COORDINATOR.has(body.errorCode)) return { result: null, retry: true };
      const type = body.groups.find((g) => g.groupId === group)?.groupType.toLowerCase();
      return { result: type !== undefined && !KNOWN_GROUP_TYPES.has(type) ? type : null, retry: false };
    });
  }

  /** The topic as the metadata cache knows it, without a request (TopicCache.cachedTopic). */
  cachedTopic(topic: string): CachedTopic | undefined {
    return this.topicCache.cachedTopic(topic);
  }

  /** Whether topic `topic` has partition `partition`, from cached metadata (TopicCache.topicExists). */
  topicExists(topic: string, partition: number): Promise<boolean> {
    return this.topicCache.topicExists(topic, partition);
  }
}
