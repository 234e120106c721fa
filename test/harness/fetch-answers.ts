// Fetch v16+ answers for the tests of the Fetch walkers (fetch-stream.ts, the native path's).
import {
  defaultFetchResponse,
  defaultFetchableTopicResponse,
  defaultPartitionData,
} from '../../protocol/messages/fetch-response.js';
import type { FetchResponse, NodeEndpoint, PartitionData } from '../../protocol/messages/fetch-response.js';
import type { TaggedField } from '../../protocol/reader.js';

export const topicId = (n: number): string => {
  const b = Buffer.alloc(16);
  b.writeUInt32BE(n, 12);
  return b.toString('base64url');
};

export function partition(
  i: number,
  records: Buffer | null,
  extra: Partial<PartitionData> = {},
): PartitionData {
  return {
    ...defaultPartitionData(),
    partitionIndex: i,
    highWatermark: BigInt(1000 + i),
    lastStableOffset: BigInt(900 + i),
    logStartOffset: 0n,
    records,
    ...extra,
  };
}

export function endpoint(
  nodeId: number,
  host: string,
  port = 9092,
  rack: string | null = null,
): NodeEndpoint {
  return { nodeId, host, port, rack };
}

/** A response exercising every part of the layout. */
export function rich(
  nodeEndpoints: NodeEndpoint[],
  unknown?: TaggedField[],
  records: { first: number; perPartition: number } = { first: 3000, perPartition: 7 },
): FetchResponse {
  const body: FetchResponse = {
    ...defaultFetchResponse(),
    throttleTimeMs: 5,
    sessionId: 77,
    responses: [
      {
        ...defaultFetchableTopicResponse(),
        topicId: topicId(1),
        partitions: [
          partition(0, Buffer.alloc(records.first, 1), {
            abortedTransactions: [
              { producerId: 5n, firstOffset: 10n },
              {
                producerId: 6n,
                firstOffset: 11n,
                _unknownTaggedFields: [{ tag: 3, data: Buffer.from([9]) }],
              },
            ],
          }),
          partition(1, null, { abortedTransactions: null, errorCode: 6 }),
          partition(2, Buffer.alloc(0), {
            divergingEpoch: { epoch: 3, endOffset: 44n },
            currentLeader: { leaderId: 2, leaderEpoch: 8 },
            snapshotId: {
              endOffset: 12n,
              epoch: 1,
              _unknownTaggedFields: [{ tag: 0, data: Buffer.from('x') }],
            },
            _unknownTaggedFields: [{ tag: 7, data: Buffer.from('seven') }],
          }),
        ],
        _unknownTaggedFields: [{ tag: 1, data: Buffer.from('topic') }],
      },
      {
        ...defaultFetchableTopicResponse(),
        topicId: topicId(2),
        partitions: Array.from({ length: 40 }, (_, i) =>
          partition(i, Buffer.alloc(i * records.perPartition, i)),
        ),
      },
    ],
    nodeEndpoints,
  };
  if (unknown) body._unknownTaggedFields = unknown;
  return body;
}
