/**
 * Log-end offsets (ListOffsets, timestamp -1 = latest, READ_UNCOMMITTED = the high watermark, as
 * kafka-consumer-groups uses) through the proxy's cluster client: one Metadata request for the
 * topics, then one ListOffsets request per partition leader.
 */
import type { ListOffsetsRequest } from '../../../protocol/messages/list-offsets-request.js';
import { defaultListOffsetsRequest } from '../../../protocol/messages/list-offsets-request.js';
import type { ListOffsetsResponse } from '../../../protocol/messages/list-offsets-response.js';
import { ApiKey } from '../../../protocol/messages/api-info.js';
import type { MetadataResponse } from '../../../protocol/messages/metadata-response.js';
import type { TopicPartition } from '../../../backends/store.js';
import { partitionKey } from './compute-lag.js';

/** What the lag collector needs of `ClusterClient` (a fake in unit tests). */
export interface LogEndSource {
  metadata(topics: string[] | null): Promise<MetadataResponse>;
  request(
    leader: number,
    apiKey: typeof ApiKey.ListOffsets,
    body: ListOffsetsRequest,
  ): Promise<{ version: number; body: ListOffsetsResponse }>;
}

export const LATEST_TIMESTAMP = -1n;

export interface LogEndResult {
  /** By partitionKey(topic, partition). */
  offsets: Map<string, bigint>;
  /** Every partition of each topic asked about that the cluster has, from its metadata. */
  partitionsOf: Map<string, number[]>;
  /** Partitions without a log end, with why (for a debug log; not an error of the refresh). */
  missing: { topic: string; partition: number; reason: string }[];
}

export async function fetchLogEndOffsets(
  cluster: LogEndSource,
  partitions: readonly TopicPartition[],
): Promise<LogEndResult> {
  const result: LogEndResult = { offsets: new Map(), partitionsOf: new Map(), missing: [] };
  if (partitions.length === 0) return result;
  const topics = [...new Set(partitions.map((p) => p.topic))].sort();
  const metadata = await cluster.metadata(topics);

  const leaderOf = new Map<string, number>();
  for (const t of metadata.topics) {
    if (t.name === null || t.errorCode !== 0) continue;
    result.partitionsOf.set(
      t.name,
      t.partitions.map((p) => p.partitionIndex).sort((a, b) => a - b),
    );
    for (const p of t.partitions) {
      if (p.errorCode === 0 && p.leaderId >= 0)
        leaderOf.set(partitionKey(t.name, p.partitionIndex), p.leaderId);
    }
  }

  const byLeader = new Map<number, Map<string, number[]>>();
  for (const tp of partitions) {
    const leader = leaderOf.get(partitionKey(tp.topic, tp.partition));
    if (leader === undefined) {
      result.missing.push({ ...tp, reason: 'no leader or unknown topic' });
      continue;
    }
    let topicsOfLeader = byLeader.get(leader);
    if (!topicsOfLeader) byLeader.set(leader, (topicsOfLeader = new Map()));
    let list = topicsOfLeader.get(tp.topic);
    if (!list) topicsOfLeader.set(tp.topic, (list = []));
    list.push(tp.partition);
  }

  await Promise.all(
    [...byLeader].map(async ([leader, topicsOfLeader]) => {
      const body: ListOffsetsRequest = {
        ...defaultListOffsetsRequest(),
        // -1: a consumer, not a follower replica (the generated default is 0).
        replicaId: -1,
        topics: [...topicsOfLeader].map(([name, ps]) => ({
          name,
          partitions: ps.map((partitionIndex) => ({
            partitionIndex,
            currentLeaderEpoch: -1,
            timestamp: LATEST_TIMESTAMP,
          })),
        })),
      };
      try {
        const { body: response } = await cluster.request(leader, ApiKey.ListOffsets, body);
        for (const t of response.topics) {
          for (const p of t.partitions) {
            const key = partitionKey(t.name, p.partitionIndex);
            const offset = p.offset;
            if (p.errorCode !== 0 || offset === undefined || offset < 0n) {
              result.missing.push({
                topic: t.name,
                partition: p.partitionIndex,
                reason: `ListOffsets error ${p.errorCode}`,
              });
            } else result.offsets.set(key, offset);
          }
        }
      } catch (err) {
        for (const [topic, ps] of topicsOfLeader) {
          for (const partition of ps)
            result.missing.push({ topic, partition, reason: `broker ${leader}: ${(err as Error).message}` });
        }
      }
    }),
  );
  return result;
}
