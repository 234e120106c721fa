// Frame generators for the fuzz tests: valid requests built with the codec (the seeds), mutations
// of them, and fast-check garbage frames. Everything is deterministic given fast-check's seed.
import fc from 'fast-check';
import { encodeRequestFrame } from '../../protocol/frames.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import { defaultApiVersionsRequest } from '../../protocol/messages/api-versions-request.js';
import { defaultDeleteGroupsRequest } from '../../protocol/messages/delete-groups-request.js';
import { defaultDescribeGroupsRequest } from '../../protocol/messages/describe-groups-request.js';
import { defaultFetchRequest } from '../../protocol/messages/fetch-request.js';
import { defaultFindCoordinatorRequest } from '../../protocol/messages/find-coordinator-request.js';
import { defaultHeartbeatRequest } from '../../protocol/messages/heartbeat-request.js';
import { defaultJoinGroupRequest } from '../../protocol/messages/join-group-request.js';
import { defaultLeaveGroupRequest } from '../../protocol/messages/leave-group-request.js';
import { defaultListGroupsRequest } from '../../protocol/messages/list-groups-request.js';
import { defaultListOffsetsRequest } from '../../protocol/messages/list-offsets-request.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import { defaultOffsetDeleteRequest } from '../../protocol/messages/offset-delete-request.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { defaultProduceRequest } from '../../protocol/messages/produce-request.js';
import { defaultSyncGroupRequest } from '../../protocol/messages/sync-group-request.js';
import { recordBatch } from '../harness/raw-client.js';
import { commitBody } from './commit-checker.js';

export type VersionRanges = Map<number, { min: number; max: number }>;

/** A request body per API, valid for every version of it (fields of other versions are ignored). */
function bodyFor(apiKey: number, v: number, topic: string, group: string): unknown {
  switch (apiKey) {
    case ApiKey.Metadata:
      return {
        ...defaultMetadataRequest(),
        topics: [{ topicId: ZERO_UUID, name: topic }],
      };
    case ApiKey.ApiVersions:
      return { ...defaultApiVersionsRequest(), clientSoftwareName: 'fuzz', clientSoftwareVersion: '1.0' };
    case ApiKey.FindCoordinator:
      return v >= 4
        ? { ...defaultFindCoordinatorRequest(), coordinatorKeys: [group] }
        : { ...defaultFindCoordinatorRequest(), key: group };
    case ApiKey.JoinGroup:
      // An unknown member id is answered UNKNOWN_MEMBER_ID at once: nothing waits for a rebalance
      // (memberId "" would make the broker hold later joins for the rebalance timeout).
      return {
        ...defaultJoinGroupRequest(),
        groupId: group,
        memberId: 'nobody',
        sessionTimeoutMs: 10_000,
        rebalanceTimeoutMs: v >= 1 ? 10_000 : -1,
        protocolType: 'consumer',
        protocols: [{ name: 'range', metadata: Buffer.from([0, 1, 0, 0, 0, 0]) }],
      };
    case ApiKey.Heartbeat:
      return { ...defaultHeartbeatRequest(), groupId: group, generationId: 1, memberId: 'nobody' };
    case ApiKey.SyncGroup:
      return { ...defaultSyncGroupRequest(), groupId: group, generationId: 1, memberId: 'nobody' };
    case ApiKey.LeaveGroup:
      return v >= 3
        ? {
            ...defaultLeaveGroupRequest(),
            groupId: group,
            members: [{ memberId: 'nobody', groupInstanceId: null, reason: null }],
          }
        : { ...defaultLeaveGroupRequest(), groupId: group, memberId: 'nobody' };
    case ApiKey.DescribeGroups:
      return { ...defaultDescribeGroupsRequest(), groups: [group] };
    case ApiKey.ListGroups:
      return defaultListGroupsRequest();
    case ApiKey.DeleteGroups:
      return { ...defaultDeleteGroupsRequest(), groupsNames: [group] };
    case ApiKey.OffsetCommit:
      return commitBody(group, topic, 2, 42n);
    case ApiKey.OffsetFetch:
      return v >= 8
        ? {
            ...defaultOffsetFetchRequest(),
            groups: [
              {
                groupId: group,
                memberId: null,
                memberEpoch: -1,
                topics: [{ name: topic, topicId: ZERO_UUID, partitionIndexes: [0] }],
              },
            ],
          }
        : {
            ...defaultOffsetFetchRequest(),
            groupId: group,
            topics: [{ name: topic, partitionIndexes: [0, 1] }],
          };
    case ApiKey.OffsetDelete:
      return {
        ...defaultOffsetDeleteRequest(),
        groupId: group,
        topics: [{ name: topic, partitions: [{ partitionIndex: 0 }] }],
      };
    case ApiKey.ListOffsets:
      return {
        ...defaultListOffsetsRequest(),
        replicaId: -1,
        topics: [
          {
            name: topic,
            partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1n, maxNumOffsets: 1 }],
          },
        ],
      };
    case ApiKey.Fetch:
      return { ...defaultFetchRequest(), maxWaitMs: 10, minBytes: 1 };
    case ApiKey.Produce:
      return {
        ...defaultProduceRequest(),
        acks: 1,
        timeoutMs: 5_000,
        // Produce v13 names the topic by id only: the zero id is answered UNKNOWN_TOPIC_ID.
        topicData: [
          { name: topic, topicId: ZERO_UUID, partitionData: [{ index: 0, records: recordBatch('fuzz') }] },
        ],
      };
    default:
      throw new Error(`no seed body for api ${apiKey}`);
  }
}

export const SEED_APIS = [
  ApiKey.Metadata,
  ApiKey.ApiVersions,
  ApiKey.FindCoordinator,
  ApiKey.JoinGroup,
  ApiKey.Heartbeat,
  ApiKey.SyncGroup,
  ApiKey.LeaveGroup,
  ApiKey.DescribeGroups,
  ApiKey.ListGroups,
  ApiKey.DeleteGroups,
  ApiKey.OffsetCommit,
  ApiKey.OffsetFetch,
  ApiKey.OffsetDelete,
  ApiKey.ListOffsets,
  ApiKey.Fetch,
  ApiKey.Produce,
];

export interface Seed {
  apiKey: number;
  apiVersion: number;
  frame: Buffer;
}

/**
 * Valid frames (size prefix included) of every seed API, at the lowest, middle and highest version
 * the proxy advertised that the codec can also encode.
 */
export function seedFrames(advertised: VersionRanges, topic: string, groups: string[]): Seed[] {
  const seeds: Seed[] = [];
  let correlationId = 1;
  for (const apiKey of SEED_APIS) {
    const range = advertised.get(apiKey);
    const codec = getApiCodec(apiKey);
    if (!range || !codec) continue;
    // A Kafka 4 broker advertises Produce v0-2 but closes the connection on them (KIP-896 removed
    // them; the range stays for old librdkafka's version probing): not valid seeds.
    const brokerMin = apiKey === ApiKey.Produce ? 3 : 0;
    const min = Math.max(range.min, codec.validVersions.min, brokerMin);
    const max = Math.min(range.max, codec.validVersions.max);
    if (min > max) continue;
    const versions = [...new Set([min, Math.floor((min + max) / 2), max])];
    for (const apiVersion of versions) {
      for (const group of groups) {
        const frame = encodeRequestFrame(
          { apiKey, apiVersion, correlationId: correlationId++, clientId: 'fuzz' },
          bodyFor(apiKey, apiVersion, topic, group) as never,
        );
        seeds.push({ apiKey, apiVersion, frame });
      }
    }
  }
  return seeds;
}

const INT32_EDGES = [0, 1, -1, 0x7fffffff, -0x80000000, 0x7ffffffe, 0x10000, 0xff, 0x100000];
const INT16_EDGES = [0, 1, -1, 0x7fff, -0x8000, 0xff, 100];

/** One mutation of a valid frame (size prefix included); `rnd` gives uniform integers. */
export function mutate(frame: Buffer, rnd: (maxExclusive: number) => number): { bytes: Buffer; how: string } {
  const b = Buffer.from(frame);
  const payloadLen = b.length - 4;
  const pos = () => 4 + rnd(Math.max(1, payloadLen));
  const fixSize = (buf: Buffer) => {
    buf.writeInt32BE(buf.length - 4, 0);
    return buf;
  };
  switch (rnd(11)) {
    case 0: {
      const n = 1 + rnd(4);
      for (let i = 0; i < n; i++) {
        const p = pos();
        if (p < b.length) b[p]! ^= 1 << rnd(8);
      }
      return { bytes: b, how: `flip ${n} bits` };
    }
    case 1: {
      const p = pos();
      if (p < b.length) b[p] = [0, 0xff, 0x7f, 0x80, rnd(256)][rnd(5)]!;
      return { bytes: b, how: `byte at ${p}` };
    }
    case 2: {
      const p = pos();
      if (p + 4 <= b.length) b.writeInt32BE(INT32_EDGES[rnd(INT32_EDGES.length)]!, p);
      return { bytes: b, how: `int32 at ${p}` };
    }
    case 3: {
      const p = pos();
      if (p + 2 <= b.length) b.writeInt16BE(INT16_EDGES[rnd(INT16_EDGES.length)]!, p);
      return { bytes: b, how: `int16 at ${p}` };
    }
    case 4: {
      const keep = rnd(payloadLen);
      return { bytes: fixSize(b.subarray(0, 4 + keep)), how: `truncated to ${keep} (size fixed)` };
    }
    case 5: {
      const keep = rnd(payloadLen);
      return { bytes: b.subarray(0, 4 + keep), how: `truncated to ${keep} (size kept)` };
    }
    case 6: {
      const extra = Buffer.alloc(1 + rnd(64));
      for (let i = 0; i < extra.length; i++) extra[i] = rnd(256);
      return { bytes: fixSize(Buffer.concat([b, extra])), how: `${extra.length} trailing bytes` };
    }
    case 7: {
      const size = [-1, -0x80000000, 0x7fffffff, 0, 1, 7, payloadLen + 1 + rnd(100), payloadLen - 1 - rnd(4)][
        rnd(8)
      ]!;
      b.writeInt32BE(size, 0);
      return { bytes: b, how: `size ${size}` };
    }
    case 8: {
      if (b.length >= 8) b.writeInt16BE(INT16_EDGES[rnd(INT16_EDGES.length)]! ^ rnd(32), 6);
      return { bytes: b, how: `api version ${b.length >= 8 ? b.readInt16BE(6) : '?'}` };
    }
    case 9: {
      if (b.length >= 6) b.writeInt16BE(rnd(2) === 0 ? rnd(100) : INT16_EDGES[rnd(INT16_EDGES.length)]!, 4);
      return { bytes: b, how: `api key ${b.length >= 6 ? b.readInt16BE(4) : '?'}` };
    }
    default: {
      // A random run of bytes in the middle, length kept.
      const p = pos();
      const n = 1 + rnd(16);
      for (let i = p; i < Math.min(b.length, p + n); i++) b[i] = rnd(256);
      return { bytes: b, how: `${n} random bytes at ${p}` };
    }
  }
}

/** fast-check garbage frames: random size prefixes, api keys and versions, random bodies. */
export const garbageFrame: fc.Arbitrary<{ bytes: Buffer; how: string }> = fc
  .record({
    size: fc.oneof(
      fc.constant<'exact'>('exact'),
      fc.constant<'exact'>('exact'),
      fc.integer({ min: -0x80000000, max: 0x7fffffff }),
      fc.integer({ min: -16, max: 64 }),
      fc.constantFrom(0x7fffffff, 100 * 1024 * 1024, 100 * 1024 * 1024 + 1, 64 * 1024 * 1024),
    ),
    apiKey: fc.oneof(fc.integer({ min: 0, max: 90 }), fc.integer({ min: -0x8000, max: 0x7fff })),
    apiVersion: fc.oneof(fc.integer({ min: -1, max: 20 }), fc.integer({ min: -0x8000, max: 0x7fff })),
    correlationId: fc.integer({ min: -0x80000000, max: 0x7fffffff }),
    clientIdLength: fc.oneof(fc.integer({ min: -2, max: 10 }), fc.integer({ min: -0x8000, max: 0x7fff })),
    body: fc.uint8Array({ maxLength: 256 }),
    cut: fc.nat({ max: 300 }),
  })
  .map(({ size, apiKey, apiVersion, correlationId, clientIdLength, body, cut }) => {
    const head = Buffer.alloc(10);
    head.writeInt16BE(apiKey, 0);
    head.writeInt16BE(apiVersion, 2);
    head.writeInt32BE(correlationId, 4);
    head.writeInt16BE(clientIdLength, 8);
    let payload = Buffer.concat([head, Buffer.from(body)]);
    if (cut < payload.length && cut % 3 === 0) payload = payload.subarray(0, cut);
    const prefix = Buffer.alloc(4);
    prefix.writeInt32BE(size === 'exact' ? payload.length : size, 0);
    return {
      bytes: Buffer.concat([prefix, payload]),
      how: `garbage api ${apiKey} v${apiVersion} size ${size === 'exact' ? payload.length : size} of ${payload.length}`,
    };
  });
