// Frame helpers against bytes from independent sources: kafkajs's own request encoders (non-flexible
// versions) and hand-built flexible frames annotated field by field.
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import {
  decodeRequestFrame,
  decodeResponseFrame,
  encodeRequestFrame,
  encodeResponseFrame,
  peekCorrelationId,
  peekProduceAcks,
  peekRequestHeader,
} from './frames.js';
import type { ApiVersionsResponse } from './messages/api-versions-response.js';
import { ApiKey } from './messages/index.js';
import type { MetadataRequest } from './messages/metadata-request.js';
import type { OffsetCommitRequest } from './messages/offset-commit-request.js';
import type { ProduceRequest } from './messages/produce-request.js';

const require = createRequire(import.meta.url);
type KjsRequest = { apiKey: number; apiVersion: number; encode: () => Promise<unknown> };
const kjsFrame = require('kafkajs/src/protocol/request.js') as (a: {
  correlationId: number;
  clientId: string;
  request: KjsRequest;
}) => Promise<{ buffer: Buffer }>;
const kjs = (path: string): ((args: Record<string, unknown>) => KjsRequest) =>
  require(`kafkajs/src/protocol/requests/${path}/request.js`) as (
    args: Record<string, unknown>,
  ) => KjsRequest;

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
/** Hex bytes with a `# comment` per line. */
const annotated = (s: string): Buffer => hex(s.replace(/#[^\n]*/g, ''));

/** kafkajs frames include the size prefix; our frame functions take the payload after it. */
async function kafkajsPayload(request: KjsRequest, correlationId = 11): Promise<Buffer> {
  const { buffer } = await kjsFrame({ correlationId, clientId: 'kjs-client', request });
  expect(buffer.readInt32BE(0)).toBe(buffer.length - 4);
  return buffer.subarray(4);
}

describe('requests encoded by kafkajs', () => {
  it('Metadata v0-v6 decode and re-encode byte for byte', async () => {
    for (let v = 0; v <= 6; v++) {
      const args =
        v === 0
          ? { topics: ['orders', 'payments'] }
          : { topics: ['orders', 'payments'], allowAutoTopicCreation: false };
      const payload = await kafkajsPayload(kjs(`metadata/v${v}`)(args), 100 + v);
      const d = decodeRequestFrame(payload);
      expect(d.header).toEqual({ apiKey: 3, apiVersion: v, correlationId: 100 + v, clientId: 'kjs-client' });
      const body = d.body as MetadataRequest;
      expect(body.topics?.map((t) => t.name)).toEqual(['orders', 'payments']);
      if (v >= 4) expect(body.allowAutoTopicCreation).toBe(false);
      expect(encodeRequestFrame(d.header, d.body).subarray(4).equals(payload)).toBe(true);
    }
  });

  it('OffsetCommit v2-v5 decode and re-encode byte for byte', async () => {
    for (let v = 2; v <= 5; v++) {
      const args = {
        groupId: 'group-1',
        groupGenerationId: 7,
        memberId: 'member-1',
        retentionTime: -1,
        topics: [
          { topic: 'orders', partitions: [{ partition: 3, offset: '12345678901', metadata: 'meta' }] },
        ],
      };
      const payload = await kafkajsPayload(kjs(`offsetCommit/v${v}`)(args));
      const d = decodeRequestFrame(payload);
      const body = d.body as OffsetCommitRequest;
      expect(body.groupId).toBe('group-1');
      expect(body.generationIdOrMemberEpoch).toBe(7);
      expect(body.memberId).toBe('member-1');
      const p = body.topics[0]!.partitions[0]!;
      expect(p).toMatchObject({
        partitionIndex: 3,
        committedOffset: 12345678901n,
        committedMetadata: 'meta',
      });
      expect(encodeRequestFrame(d.header, d.body).subarray(4).equals(payload)).toBe(true);
    }
  });

  it('Produce v0-v7: peekProduceAcks and a full decode with records kept as a view', async () => {
    for (let v = 0; v <= 7; v++) {
      for (const acks of [0, 1, -1]) {
        const args = {
          acks,
          timeout: 30000,
          transactionalId: v >= 3 ? 'txn-1' : undefined,
          topicData: [
            { topic: 'orders', partitions: [{ partition: 0, messages: [{ key: 'k', value: 'v' }] }] },
          ],
        };
        const payload = await kafkajsPayload(kjs(`produce/v${v}`)(args));
        expect(peekProduceAcks(payload)).toBe(acks);
        // Produce v0-2 left the codec with Kafka 4 (KIP-896): only their acks are read.
        if (v < 3) continue;
        const d = decodeRequestFrame(payload);
        const body = d.body as ProduceRequest;
        expect(body.acks).toBe(acks);
        expect(body.timeoutMs).toBe(30000);
        if (v >= 3) expect(body.transactionalId).toBe('txn-1');
        const records = body.topicData[0]!.partitionData[0]!.records!;
        expect(records.buffer).toBe(payload.buffer); // a view, not a copy
        expect(encodeRequestFrame(d.header, d.body).subarray(4).equals(payload)).toBe(true);
      }
    }
  });

  it('peekRequestHeader and peekCorrelationId', async () => {
    const payload = await kafkajsPayload(kjs('apiVersions/v2')({}), 77);
    expect(peekRequestHeader(payload)).toEqual({ apiKey: 18, apiVersion: 2, correlationId: 77 });
    expect(() => peekRequestHeader(payload.subarray(0, 7))).toThrow(ProtocolError);
    expect(peekCorrelationId(hex('0000004d 0000'))).toBe(77);
    expect(() => peekCorrelationId(hex('000000'))).toThrow(ProtocolError);
  });
});

describe('hand-built flexible frames', () => {
  // ApiVersions v3 request: header v2, client id keeps its int16 length.
  const apiVersionsV3Request = annotated(`
    0012 0003 00000001   # api key 18, version 3, correlation id 1
    0003 636c69          # client id "cli" (int16 length even in header v2)
    00                   # header tagged fields: none
    04 6b6a73            # ClientSoftwareName "kjs" (compact)
    04 312e30            # ClientSoftwareVersion "1.0"
    00                   # tagged fields: none`);

  // ApiVersions v3 response: header v0 (no tagged fields) although the body is flexible.
  const apiVersionsV3Response = annotated(`
    00000001             # correlation id
    0000                 # error code
    02                   # ApiKeys: 1 entry
    0000 0000 000b 00    # Produce 0..11, no tags
    00000000             # throttle time
    01                   # one tagged field
    01 08 0000000000000005  # tag 1 (FinalizedFeaturesEpoch), 8 bytes, value 5`);

  it('ApiVersions v3 request', () => {
    const d = decodeRequestFrame(apiVersionsV3Request);
    expect(d.headerVersion).toBe(2);
    expect(d.header.clientId).toBe('cli');
    expect(d.body).toEqual({
      clientSoftwareName: 'kjs',
      clientSoftwareVersion: '1.0',
      clusterId: null, // v5: a client that already knows its cluster
      nodeId: -1,
    });
    expect(encodeRequestFrame(d.header, d.body).subarray(4).equals(apiVersionsV3Request)).toBe(true);
  });

  it('ApiVersions v3 response uses response header v0 and decodes its tagged field', () => {
    // An API key literal types the body (checked by tsc): no cast needed.
    const d = decodeResponseFrame(apiVersionsV3Response, ApiKey.ApiVersions, 3);
    expect(d.header).toEqual({ correlationId: 1 });
    const body: ApiVersionsResponse = d.body;
    expect(body.apiKeys).toEqual([{ apiKey: 0, minVersion: 0, maxVersion: 11 }]);
    expect(body.finalizedFeaturesEpoch).toBe(5n);
    const frame = encodeResponseFrame(18, 3, 1, body);
    expect(frame.readInt32BE(0)).toBe(frame.length - 4);
    expect(frame.subarray(4).equals(apiVersionsV3Response)).toBe(true);
  });

  it("an ApiVersions request above the broker's is answered in v0 with UNSUPPORTED_VERSION, and read so", () => {
    // What a Kafka 3.9 broker sends back to a v5 request: a v0 body listing its own range.
    const v0Refusal = annotated(`
      00000007             # correlation id
      0023                 # error code 35, UNSUPPORTED_VERSION
      00000001             # ApiKeys: 1 entry (int32 count, v0)
      0012 0000 0004       # ApiVersions 0..4`);
    const d = decodeResponseFrame(v0Refusal, ApiKey.ApiVersions, 5);
    expect(d.header).toEqual({ correlationId: 7 });
    expect(d.body.errorCode).toBe(35);
    expect(d.body.apiKeys).toEqual([{ apiKey: 18, minVersion: 0, maxVersion: 4 }]);
  });

  it('known and unknown tagged fields interleave in tag order and re-encode byte-exact', () => {
    const frame = annotated(`
      00000001                # correlation id (header v0)
      0000 01 00000000        # error code, no ApiKeys, throttle 0
      04                      # four tagged fields
      01 08 0000000000000007  # tag 1 FinalizedFeaturesEpoch = 7 (known)
      03 01 01                # tag 3 ZkMigrationReady = true (known)
      05 02 abcd              # tag 5 (unknown to this codec)
      09 00                   # tag 9 (unknown), empty`);
    const { body } = decodeResponseFrame(frame, ApiKey.ApiVersions, 3);
    expect(body.finalizedFeaturesEpoch).toBe(7n);
    expect(body.zkMigrationReady).toBe(true);
    expect(body._unknownTaggedFields?.map((f) => f.tag)).toEqual([5, 9]);
    expect(encodeResponseFrame(ApiKey.ApiVersions, 3, 1, body).subarray(4).equals(frame)).toBe(true);
  });

  it('a known tagged field whose payload is longer than its value is malformed', () => {
    const frame = annotated(`
      00000001 0000 01 00000000
      01                         # one tagged field
      01 09 0000000000000007 ff  # tag 1 (int64) claims 9 bytes`);
    let err: unknown;
    try {
      decodeResponseFrame(frame, ApiKey.ApiVersions, 3);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ProtocolError);
    expect((err as ProtocolError).code).toBe('TRAILING_BYTES');
  });

  it('OffsetCommit v8 request with an unknown tagged field kept byte-exact', () => {
    const frame = annotated(`
      0008 0008 00000002 ffff 00      # header v2: OffsetCommit v8, corr 2, null client id, no tags
      02 67                           # GroupId "g"
      00000001                        # GenerationIdOrMemberEpoch 1
      02 6d                           # MemberId "m"
      00                              # GroupInstanceId null
      02                              # Topics: 1
      02 74                           # Name "t"
      02                              # Partitions: 1
      00000000                        # PartitionIndex 0
      000000000000002a                # CommittedOffset 42
      ffffffff                        # CommittedLeaderEpoch -1
      01                              # CommittedMetadata ""
      01 07 01 ff                     # tagged: one unknown field, tag 7, 1 byte
      00                              # topic tags
      00                              # body tags`);
    const d = decodeRequestFrame(frame);
    const body = d.body as OffsetCommitRequest;
    expect(body).toMatchObject({
      groupId: 'g',
      generationIdOrMemberEpoch: 1,
      memberId: 'm',
      groupInstanceId: null,
    });
    const p = body.topics[0]!.partitions[0]!;
    expect(p.committedOffset).toBe(42n);
    expect(p._unknownTaggedFields).toEqual([{ tag: 7, data: Buffer.from([0xff]) }]);
    expect(encodeRequestFrame(d.header, d.body).subarray(4).equals(frame)).toBe(true);
  });

  it('peekProduceAcks on a flexible Produce v9 frame', () => {
    const frame = annotated(`
      0000 0009 00000003   # Produce v9, corr 3
      0002 6964            # client id "id"
      01 00 02 aaaa        # header tags: one, tag 0, 2 bytes
      04 747831            # transactional id "tx1" (compact)
      ffff                 # acks -1
      00007530             # timeout
      01 00                # no topics, no tags`);
    expect(peekProduceAcks(frame)).toBe(-1);
    expect(() => peekProduceAcks(frame.subarray(0, 20))).toThrow(ProtocolError);
  });

  it('rejects trailing bytes, unknown api keys and unsupported versions with ProtocolError', () => {
    expect(() => decodeRequestFrame(Buffer.concat([apiVersionsV3Request, hex('00')]))).toThrow(ProtocolError);
    expect(() => decodeRequestFrame(hex('7fff 0000 00000001 ffff'))).toThrow(ProtocolError);
    let err: unknown;
    try {
      decodeRequestFrame(hex('0012 0063 00000001 ffff'));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ProtocolError);
    expect((err as ProtocolError).apiKey).toBe(18);
    expect((err as ProtocolError).apiVersion).toBe(99);
  });
});
