/**
 * A streams group's topology, from the join's StreamsGroupHeartbeat to the store's record
 * (streams-topologies.ts): only what the broker accepted, once per epoch, readable back, and a
 * damaged record read as no subtopologies rather than a crash.
 */
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import type { GroupUpdate } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { StreamsGroupHeartbeatRequest } from '../../protocol/messages/streams-group-heartbeat-request.js';
import {
  defaultStreamsGroupHeartbeatRequest,
  defaultSubtopology,
  defaultTopicInfo,
} from '../../protocol/messages/streams-group-heartbeat-request.js';
import { defaultStreamsGroupHeartbeatResponse } from '../../protocol/messages/streams-group-heartbeat-response.js';
import { silentLogger } from '../common/log.js';
import { MembershipRecorder } from './membership.js';
import { storedSubtopologies, topologyUpdate } from './streams-topologies.js';

/** A join of the word count's topology (two subtopologies joined by a repartition topic). */
const join = (epoch = 0): StreamsGroupHeartbeatRequest => ({
  ...defaultStreamsGroupHeartbeatRequest(),
  groupId: 'app',
  memberEpoch: 0,
  topology: {
    epoch,
    subtopologies: [
      {
        ...defaultSubtopology(),
        subtopologyId: '0',
        sourceTopics: ['in'],
        repartitionSinkTopics: ['app-rep'],
      },
      {
        ...defaultSubtopology(),
        subtopologyId: '1',
        repartitionSourceTopics: [
          {
            ...defaultTopicInfo(),
            name: 'app-rep',
            topicConfigs: [{ key: 'cleanup.policy', value: 'delete' }],
          },
        ],
        stateChangelogTopics: [
          { ...defaultTopicInfo(), name: 'app-counts-changelog', replicationFactor: -1 },
        ],
      },
    ],
  },
});
const ok = { ...defaultStreamsGroupHeartbeatResponse(), memberId: 'm', memberEpoch: 1 };

describe('topologyUpdate', () => {
  test("a join the broker accepted: its subtopologies in StreamsGroupDescribe's shape", () => {
    const update = topologyUpdate(join(2), ok)!;
    expect(update.topology.epoch).toBe(2);
    expect(storedSubtopologies(update.topology)).toEqual([
      {
        subtopologyId: '0',
        sourceTopics: ['in'],
        repartitionSinkTopics: ['app-rep'],
        stateChangelogTopics: [],
        repartitionSourceTopics: [],
      },
      {
        subtopologyId: '1',
        sourceTopics: [],
        repartitionSinkTopics: [],
        stateChangelogTopics: [
          { name: 'app-counts-changelog', partitions: 0, replicationFactor: -1, topicConfigs: [] },
        ],
        repartitionSourceTopics: [
          {
            name: 'app-rep',
            partitions: 0,
            replicationFactor: 0,
            topicConfigs: [{ key: 'cleanup.policy', value: 'delete' }],
          },
        ],
      },
    ]);
  });

  test('nothing from a refused join, nor from a heartbeat without a topology', () => {
    expect(topologyUpdate(join(), { ...ok, errorCode: ErrorCode.STREAMS_INVALID_TOPOLOGY })).toBeNull();
    expect(topologyUpdate({ ...join(), memberEpoch: 1, topology: null }, ok)).toBeNull();
  });

  test('a record it cannot read gives no subtopologies', () => {
    for (const subtopologies of ['', '{', '{}', '[1]', '[{"subtopologyId":"0"}]', 'null'])
      expect(storedSubtopologies({ epoch: 0, subtopologies })).toBeNull();
    expect(storedSubtopologies({ epoch: 0, subtopologies: '[]' })).toEqual([]);
  });
});

describe('recording', () => {
  test('once per group and epoch, not per member or heartbeat', async () => {
    const store = new MemoryStore();
    const writes: GroupUpdate[] = [];
    const counting = Object.assign(Object.create(store) as MemoryStore, {
      updateGroup: (g: string, u: GroupUpdate) => {
        writes.push(u);
        return store.updateGroup(g, u);
      },
    });
    const recorder = new MembershipRecorder(counting, silentLogger);
    for (const epoch of [0, 0, 0, 1, 1])
      expect(await recorder.record('app', topologyUpdate(join(epoch), ok)!)).toBe(true);
    expect(writes.map((u) => (u.kind === 'streams-topology' ? u.topology.epoch : u.kind))).toEqual([0, 1]);
    expect((await store.getGroup('app'))?.streams?.epoch).toBe(1);
    // A deleted group's next life is written again.
    recorder.forget('app');
    await recorder.record('app', topologyUpdate(join(1), ok)!);
    expect(writes).toHaveLength(3);
  });
});
