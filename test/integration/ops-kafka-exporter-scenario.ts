// The fixed scenario behind test/golden/kafka-exporter/series.txt: a 3-partition topic with 30
// records in each partition, group A committed at partition 0 (offset 20) and group B at partition
// 1 (offset 4), both through the proxy (the broker never holds their offsets). The golden file is
// what the real kafka_exporter (danielqsj/kafka_exporter) exported for it, pointed at the proxy.
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultOffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { RawClient, recordBatch } from '../harness/raw-client.js';
import type { ProduceResponse } from '../../protocol/messages/produce-response.js';

export interface ExporterScenario {
  topic: string;
  groupA: string;
  groupB: string;
}

const PER_PARTITION = 30;
const unique = (prefix: string): string =>
  `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

export async function exporterScenario(broker: string, proxy: string): Promise<ExporterScenario> {
  const s = { topic: unique('kexp'), groupA: unique('kexp-a'), groupB: unique('kexp-b') };
  await createTopics({ bootstrap: broker }, [{ topic: s.topic, partitions: 3 }]);
  // One record per Produce request, acks=all, never retried: exactly 30 records a partition (a
  // client's retry could write a batch twice, and the log ends are part of the golden file).
  const leader = await RawClient.connect(broker.split(',')[0]!);
  try {
    for (const partition of [0, 1, 2]) {
      for (let i = 0; i < PER_PARTITION; i++) {
        for (let attempt = 0; ; attempt++) {
          const r = await leader.request<ProduceResponse>(ApiKey.Produce, 9, 1, {
            transactionalId: null,
            acks: -1,
            timeoutMs: 10_000,
            topicData: [
              {
                name: s.topic,
                partitionData: [{ index: partition, records: recordBatch(`v-${partition}-${i}`) }],
              },
            ],
          });
          const code = r.responses[0]?.partitionResponses[0]?.errorCode;
          if (code === 0) break;
          // NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION of a topic just created: nothing
          // was written, so sending again cannot duplicate.
          if ((code === 6 || code === 3) && attempt < 50) {
            await new Promise((res) => setTimeout(res, 100));
            continue;
          }
          throw new Error(`produce to ${s.topic}-${partition}: error ${code}`);
        }
      }
    }
  } finally {
    leader.close();
  }
  const client = await RawClient.connect(proxy.split(',')[0]!);
  try {
    for (const [group, partition, offset] of [
      [s.groupA, 0, 20n],
      [s.groupB, 1, 4n],
    ] as const) {
      const r = await client.request<OffsetCommitResponse>(ApiKey.OffsetCommit, 8, 1, {
        ...defaultOffsetCommitRequest(),
        groupId: group,
        generationIdOrMemberEpoch: -1,
        memberId: '',
        topics: [
          {
            name: s.topic,
            partitions: [
              {
                partitionIndex: partition,
                committedOffset: offset,
                committedLeaderEpoch: -1,
                commitTimestamp: -1n,
                committedMetadata: '',
              },
            ],
          },
        ],
      });
      if (r.topics[0]!.partitions[0]!.errorCode !== 0) throw new Error(`commit of ${group} refused`);
    }
  } finally {
    client.close();
  }
  return s;
}

/**
 * The kafka_consumergroup_* series of the scenario's groups in a Prometheus text exposition:
 * names replaced by <A>, <B>, <T>, labels sorted, values as numbers, lines sorted.
 */
export function normalizeSeries(text: string, s: ExporterScenario): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^(kafka_consumergroup_\w+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = m[2]!
      .split(',')
      .map((kv) => kv.replace(s.groupA, '<A>').replace(s.groupB, '<B>').replace(s.topic, '<T>'))
      .sort();
    if (!labels.some((l) => l.includes('<A>') || l.includes('<B>'))) continue;
    out.push(`${m[1]}{${labels.join(',')}} ${Number(m[3])}`);
  }
  return out.sort();
}
