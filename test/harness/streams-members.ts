// A streams-group member (KIP-1071) made of raw protocol requests: StreamsGroupHeartbeat with a
// one-subtopology topology reading one topic, as a Kafka Streams client with
// `group.protocol=streams` sends it, for tests that drive a streams group step by step against the
// broker and through the proxy alike.
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultStreamsGroupHeartbeatRequest } from '../../protocol/messages/streams-group-heartbeat-request.js';
import type { StreamsGroupHeartbeatRequest } from '../../protocol/messages/streams-group-heartbeat-request.js';
import type { StreamsGroupHeartbeatResponse } from '../../protocol/messages/streams-group-heartbeat-response.js';
import type { Conn } from './group-members.js';

type Tasks = { subtopologyId: string; partitions: number[] }[];

export class StreamsMember {
  memberEpoch = 0;
  memberId: string;
  /** The active tasks the coordinator last gave, which the next heartbeat reports as owned. */
  active: Tasks = [];
  private joined = false;

  constructor(
    readonly conn: Conn,
    readonly group: string,
    readonly topic: string,
    memberId: string,
    /** A static member's instance id (Kafka 4.4), kept by the process that replaces it. */
    readonly instanceId: string | null = null,
  ) {
    this.memberId = memberId;
  }

  /** The partitions of the member's active tasks (sorted). */
  get partitions(): number[] {
    return this.active.flatMap((t) => t.partitions).sort((a, b) => a - b);
  }

  /** Joins (epoch 0, with the topology) or heartbeats with the current epoch, owning its tasks. */
  async heartbeat(): Promise<StreamsGroupHeartbeatResponse> {
    const res = await this.send(
      this.joined
        ? { memberEpoch: this.memberEpoch, activeTasks: this.active, standbyTasks: [], warmupTasks: [] }
        : {
            memberEpoch: 0,
            instanceId: this.instanceId,
            rebalanceTimeoutMs: 30_000,
            processId: `process-${this.memberId}`,
            clientTags: [],
            activeTasks: [],
            standbyTasks: [],
            warmupTasks: [],
            topology: {
              epoch: 0,
              subtopologies: [
                {
                  subtopologyId: '0',
                  sourceTopics: [this.topic],
                  sourceTopicRegex: [],
                  stateChangelogTopics: [],
                  repartitionSinkTopics: [],
                  repartitionSourceTopics: [],
                  copartitionGroups: [],
                },
              ],
            },
          },
    );
    if (res.errorCode === ErrorCode.NONE) {
      this.joined = true;
      if (res.memberId !== '') this.memberId = res.memberId;
      this.memberEpoch = res.memberEpoch;
      if (res.activeTasks) this.active = res.activeTasks.map((t) => ({ ...t }));
    }
    return res;
  }

  /** Heartbeats until the member holds `count` active tasks (the group may start NotReady). */
  async heartbeatUntil(count: number, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await this.heartbeat();
      if (res.errorCode !== ErrorCode.NONE)
        throw new Error(`StreamsGroupHeartbeat of ${this.memberId}: error ${res.errorCode}`);
      if (this.partitions.length === count) return;
      if (Date.now() > deadline)
        throw new Error(`${this.memberId} holds ${this.partitions.join(',')} after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  /** Leaves the group (epoch -1; a static member -2: its tasks wait for its next process). */
  async leave(): Promise<number> {
    const res = await this.send({
      memberEpoch: this.instanceId === null ? -1 : -2,
      instanceId: this.instanceId,
    });
    if (res.errorCode === ErrorCode.NONE) this.joined = false;
    return res.errorCode;
  }

  private send(fields: Partial<StreamsGroupHeartbeatRequest>): Promise<StreamsGroupHeartbeatResponse> {
    return this.conn.request<StreamsGroupHeartbeatResponse>(ApiKey.StreamsGroupHeartbeat, 0, {
      ...defaultStreamsGroupHeartbeatRequest(),
      groupId: this.group,
      memberId: this.memberId,
      ...fields,
    });
  }
}
