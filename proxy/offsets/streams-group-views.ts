/**
 * StreamsGroupDescribe of a streams group (KIP-1071) the broker forgot and the store has: its
 * offsets are here, so the broker deleted the idle group (group-views.ts says why), and
 * kafka-streams-groups failed with GroupIdNotFoundException on --describe and --reset-offsets.
 * It is answered as a broker answers for a stopped streams group that still has offsets there.
 *
 * What a Kafka 4.4.0 broker answers for an Empty streams group with committed offsets (read off
 * one, and compared with one in test/integration/groups-tools.test.ts):
 *   - ListGroups: protocolType "streams", state Empty (v4+), type "streams" (v5; filters match
 *     case-insensitively): group-views.ts lists it so.
 *   - DescribeGroups (v0-v5): Dead, protocolType "", no members, as for a KIP-848 group;
 *     ConsumerGroupDescribe: GROUP_ID_NOT_FOUND "Group <g> is not a consumer group.".
 *   - StreamsGroupDescribe: groupState Empty, groupEpoch and assignmentEpoch equal (4 after one
 *     member joined, was assigned and left), topology epoch 0 with the subtopologies as the
 *     members declared them, except that partitions are resolved (a changelog topic and a
 *     repartition source topic declared with 0 show the source topics' count); members [];
 *     assignorName (v1) "sticky", the broker's configured assignor.
 *   - kafka-streams-groups --list names it; --describe, --describe --members and --describe
 *     --offsets print nothing on stdout; --describe --state prints the group, its coordinator,
 *     assignor "sticky", state Empty, 0 members and "Error: Streams group '<g>' has no active
 *     members."; the reset dry-run (--to-current --all-input-topics) prints the committed offset
 *     of each partition of the subtopologies' source topics; --reset-offsets --to-earliest
 *     --execute sets them to 0; --delete-offsets --input-topic prints each partition "Successful";
 *     --delete prints "Deletion of requested streams groups ('<g>') was successful.", after which
 *     --list no longer names the group.
 *
 * Answered here from the store's record (GroupState.streams, streams-topologies.ts): the same,
 * except what only the broker's group held: groupEpoch and assignmentEpoch are 0; the assignor is
 * the one the broker last named in a StreamsGroupDescribe answer seen here (a broker setting), or
 * Kafka's default "sticky" before any (kafka-streams-groups --describe --state prints it).
 * Partitions declared as 0 are resolved from the cluster's metadata (the topic's own count, else
 * the subtopology's largest source topic); with a source topic missing the subtopologies are null,
 * as the protocol has a broker give them for a group whose source topics are missing.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { StreamsGroupDescribeRequest } from '../../protocol/messages/streams-group-describe-request.js';
import type {
  StreamsGroupDescribeResponse,
  Subtopology,
  TopicInfo,
} from '../../protocol/messages/streams-group-describe-response.js';
import type { RequestInfo } from '../core/extension.js';
import type { Logger } from '../common/log.js';
import { EMPTY_GROUP } from './group-views.js';
import type { StoreGroup } from './store-groups.js';
import { storedSubtopologies } from './streams-topologies.js';

/** GroupViews.forgotten: of the groups answered GROUP_ID_NOT_FOUND, the store's the broker does not know. */
export type Forgotten = (
  info: RequestInfo,
  answers: readonly { groupId: string; errorCode: number }[],
  wanted: (g: StoreGroup) => boolean,
) => Promise<Map<string, StoreGroup>>;

/** TopologyDescriptionStatus NOT_STORED: asked for, and no description recorded for the group. */
const NOT_STORED = 1;

/** Kafka's default streams task assignor (`group.streams.assignor`-less brokers use it). */
const DEFAULT_ASSIGNOR = 'sticky';

export class StreamsGroupViews {
  /**
   * The assignor the broker last named in a StreamsGroupDescribe answer seen here: a broker's
   * configuration, not a group's, so it stands for the forgotten groups too.
   */
  private assignor = DEFAULT_ASSIGNOR;

  constructor(
    private readonly forgotten: Forgotten,
    private readonly log: Logger,
  ) {}

  async streamsGroupDescribe(
    info: RequestInfo,
    req: StreamsGroupDescribeRequest,
    res: StreamsGroupDescribeResponse,
  ): Promise<StreamsGroupDescribeResponse | undefined> {
    for (const g of res.groups)
      if (g.errorCode === ErrorCode.NONE && g.assignorName) this.assignor = g.assignorName;
    const stored = await this.forgotten(info, res.groups, (g) => g.streams !== undefined);
    if (stored.size === 0) return undefined;
    const partitions = await this.partitionCounts(info, [...stored.values()]);
    return {
      ...res,
      groups: res.groups.map((g) => {
        const topology = stored.get(g.groupId)?.streams;
        if (topology === undefined) return g;
        const subtopologies = storedSubtopologies(topology);
        return {
          ...g,
          ...EMPTY_GROUP,
          topology: {
            epoch: topology.epoch,
            subtopologies: subtopologies === null ? null : resolved(subtopologies, partitions),
          },
          members: [],
          topologyDescription: null,
          topologyDescriptionStatus: info.apiVersion >= 1 && req.includeTopologyDescription ? NOT_STORED : 0,
          // v0 has no assignor: null, as the decoder gives it for a broker's v0 answer.
          assignorName: info.apiVersion >= 1 ? this.assignor : null,
        };
      }),
    };
  }

  /** Partitions of every topic the groups' topologies name, by topic (missing topics left out). */
  private async partitionCounts(info: RequestInfo, groups: StoreGroup[]): Promise<Map<string, number>> {
    const names = new Set<string>();
    for (const g of groups)
      for (const s of (g.streams && storedSubtopologies(g.streams)) ?? [])
        for (const t of [
          ...s.sourceTopics,
          ...s.stateChangelogTopics.map((x) => x.name),
          ...s.repartitionSourceTopics.map((x) => x.name),
        ])
          names.add(t);
    const out = new Map<string, number>();
    if (names.size === 0 || !info.askBroker) return out;
    try {
      const res = await info.askBroker(ApiKey.Metadata, 12, {
        topics: [...names].map((name) => ({ topicId: ZERO_UUID, name })),
        allowAutoTopicCreation: false,
        includeClusterAuthorizedOperations: false,
        includeTopicAuthorizedOperations: false,
      });
      for (const t of res.topics)
        if (t.errorCode === ErrorCode.NONE && t.name !== null) out.set(t.name, t.partitions.length);
    } catch (err) {
      this.log.debug("could not read a streams group's topics from the metadata", { error: err });
    }
    return out;
  }
}

/**
 * The subtopologies with partitions as a broker shows them, or null when a source topic is
 * missing (a broker's topology is then not configured).
 */
function resolved(subtopologies: Subtopology[], partitions: Map<string, number>): Subtopology[] | null {
  if (subtopologies.some((s) => s.sourceTopics.some((t) => !partitions.has(t)))) return null;
  return subtopologies.map((s) => {
    const largest = Math.max(
      0,
      ...s.sourceTopics.map((t) => partitions.get(t)!),
      ...s.repartitionSourceTopics.map((t) => partitions.get(t.name) ?? t.partitions),
    );
    const fill = (t: TopicInfo): TopicInfo =>
      t.partitions !== 0 ? t : { ...t, partitions: partitions.get(t.name) ?? largest };
    return {
      ...s,
      stateChangelogTopics: s.stateChangelogTopics.map(fill),
      repartitionSourceTopics: s.repartitionSourceTopics.map(fill),
    };
  });
}
