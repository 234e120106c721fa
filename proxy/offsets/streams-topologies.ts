/**
 * The topology of each streams group (KIP-1071, `group.protocol=streams`), kept in the store's
 * group record (GroupState.streams), so that group tools still find a streams group once the
 * broker forgot it (streams-group-views.ts; docs/design.md "Groups the broker has forgotten").
 *
 * A streams member declares its topology (subtopologies with their source, repartition and
 * changelog topics, under a topology epoch) in the StreamsGroupHeartbeat of its join. The broker
 * keeps one topology per group: the first of the highest epoch it accepted. kafka-streams-groups
 * needs it to describe the group and to reset or show its offsets (`--all-input-topics` means
 * the subtopologies' source topics), and with the offsets in the store the broker forgets an
 * idle streams group (it deletes an empty group without offsets at its periodic cleanup, or at a
 * restart). So the topology of a join the broker answered without error is written to the store
 * once per group and epoch (not per heartbeat: a heartbeat after the join carries none).
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type {
  StreamsGroupHeartbeatRequest,
  TopicInfo as DeclaredTopic,
} from '../../protocol/messages/streams-group-heartbeat-request.js';
import type { StreamsGroupHeartbeatResponse } from '../../protocol/messages/streams-group-heartbeat-response.js';
import type { Subtopology, TopicInfo } from '../../protocol/messages/streams-group-describe-response.js';
import type { GroupUpdate, StreamsTopology } from '../../backends/store.js';

/** The record's update for a heartbeat that carries a topology the broker accepted; null otherwise. */
export function topologyUpdate(
  request: StreamsGroupHeartbeatRequest,
  response: StreamsGroupHeartbeatResponse,
): Extract<GroupUpdate, { kind: 'streams-topology' }> | null {
  const t = request.topology;
  if (t === null || response.errorCode !== ErrorCode.NONE) return null;
  const subtopologies: Subtopology[] = t.subtopologies.map((s) => ({
    subtopologyId: s.subtopologyId,
    sourceTopics: s.sourceTopics,
    repartitionSinkTopics: s.repartitionSinkTopics,
    stateChangelogTopics: s.stateChangelogTopics.map(topicInfo),
    repartitionSourceTopics: s.repartitionSourceTopics.map(topicInfo),
  }));
  return {
    kind: 'streams-topology',
    topology: { epoch: t.epoch, subtopologies: JSON.stringify(subtopologies) },
  };
}

const topicInfo = (t: DeclaredTopic): TopicInfo => ({
  name: t.name,
  partitions: t.partitions,
  replicationFactor: t.replicationFactor,
  topicConfigs: t.topicConfigs.map((c) => ({ key: c.key, value: c.value })),
});

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const isTopicInfo = (v: unknown): v is TopicInfo => {
  const t = v as TopicInfo;
  return (
    typeof t === 'object' &&
    t !== null &&
    typeof t.name === 'string' &&
    Number.isInteger(t.partitions) &&
    Number.isInteger(t.replicationFactor) &&
    Array.isArray(t.topicConfigs) &&
    t.topicConfigs.every((c) => typeof c?.key === 'string' && typeof c.value === 'string')
  );
};
const isSubtopology = (v: unknown): v is Subtopology => {
  const s = v as Subtopology;
  return (
    typeof s === 'object' &&
    s !== null &&
    typeof s.subtopologyId === 'string' &&
    isStrings(s.sourceTopics) &&
    isStrings(s.repartitionSinkTopics) &&
    Array.isArray(s.stateChangelogTopics) &&
    s.stateChangelogTopics.every(isTopicInfo) &&
    Array.isArray(s.repartitionSourceTopics) &&
    s.repartitionSourceTopics.every(isTopicInfo)
  );
};

/**
 * The stored subtopologies, or null when the record's are not readable (written by a newer
 * version, or damaged): the group is then described without them, as a broker describes a group
 * whose topology is not initialized.
 */
export function storedSubtopologies(topology: StreamsTopology): Subtopology[] | null {
  try {
    const parsed: unknown = JSON.parse(topology.subtopologies);
    return Array.isArray(parsed) && parsed.every(isSubtopology) ? parsed : null;
  } catch {
    return null;
  }
}
