// Golden frames recorded from real traffic on the test bed (test/golden/record/record.ts): every
// request and response must decode and re-encode byte for byte, carry the values the recording
// made (advertised addresses, committed offsets, no errors), and survive truncation and mutation.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import {
  decodeRequestFrame,
  decodeResponseFrame,
  encodeRequestFrame,
  encodeResponseFrame,
  peekProduceAcks,
} from '../../protocol/frames.js';
import { encodeResponseHeader, responseHeaderVersion, sizeOfResponseHeader } from '../../protocol/headers.js';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import type { DescribeClusterResponse } from '../../protocol/messages/describe-cluster-response.js';
import type { FindCoordinatorResponse } from '../../protocol/messages/find-coordinator-response.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { TxnOffsetCommitRequest } from '../../protocol/messages/txn-offset-commit-request.js';
import { checkRobustness } from '../../protocol/testing/robustness.js';
import type { RobustnessFrame } from '../../protocol/testing/robustness.js';
import { Writer } from '../../protocol/writer.js';
import type { GoldenEntry, GoldenIndex } from '../golden/golden-index.js';
import { capApiVersions } from '../golden/record/relay.js';

const FRAMES_DIR = fileURLToPath(new URL('../golden/frames/', import.meta.url));
const index = JSON.parse(fs.readFileSync(path.join(FRAMES_DIR, 'index.json'), 'utf8')) as GoldenIndex;
const read = (file: string): Buffer => fs.readFileSync(path.join(FRAMES_DIR, file));

/** The APIs issue #3 asks for; ConsumerGroupHeartbeat exists on 4.x brokers only. */
const REQUIRED = [
  'ApiVersions',
  'Metadata',
  'FindCoordinator',
  'DescribeCluster',
  'OffsetCommit',
  'OffsetFetch',
  'OffsetDelete',
  'JoinGroup',
  'SyncGroup',
  'Heartbeat',
  'ConsumerGroupHeartbeat',
  'TxnOffsetCommit',
  'Produce',
  'Fetch',
];
const BROKERS = ['4.4.0', '3.9.2'];
const CLIENTS = ['kafkajs', 'kafkajs-admin', 'java-classic', 'kcat', 'kcat-acks0', 'python', 'kafka-tools'];

/**
 * Responses that carry an error by nature of the recording: ConsumerGroupCommand first asks
 * ConsumerGroupDescribe about the (classic) group it describes; Kafka 4.4 answers
 * GROUP_ID_NOT_FOUND (69), Kafka 3.9 (KIP-848 not enabled) UNSUPPORTED_VERSION (35).
 */
const EXPECTED_ERRORS: Record<string, number[]> = { ConsumerGroupDescribe: [35, 69] };

const name = (e: GoldenEntry) => `${e.broker} ${e.client} ${e.api} v${e.version}`;

function sized(frame: Buffer): Buffer {
  const prefix = Buffer.alloc(4);
  prefix.writeInt32BE(frame.length);
  return Buffer.concat([prefix, frame]);
}

/** Equality with the first differing offset in the message (offsets are of the unprefixed frame). */
function expectSameBytes(actual: Buffer, expected: Buffer, what: string): void {
  if (actual.equals(expected)) return;
  let at = 0;
  while (at < actual.length && at < expected.length && actual[at] === expected[at]) at++;
  const show = (b: Buffer) => b.subarray(Math.max(0, at - 8), at + 16).toString('hex');
  expect.fail(
    `${what}: re-encoded ${actual.length - 4} bytes vs recorded ${expected.length - 4}, first difference at frame offset ${at - 4}: ` +
      `got ...${show(actual)}..., recorded ...${show(expected)}...`,
  );
}

function errorCodes(v: unknown, out: number[] = []): number[] {
  if (v === null || typeof v !== 'object' || Buffer.isBuffer(v)) return out;
  if (Array.isArray(v)) {
    for (const e of v) errorCodes(e, out);
    return out;
  }
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (k === 'errorCode' && typeof x === 'number') out.push(x);
    else errorCodes(x, out);
  }
  return out;
}

function expectAdvertised(e: GoldenEntry, endpoints: { host: string; port: number }[]): void {
  expect(endpoints.length, `${name(e)}: no broker address in the response`).toBeGreaterThan(0);
  for (const b of endpoints) expect(`${b.host}:${b.port}`, name(e)).toBe(e.advertised);
}

/** Admin tools commit the offset the recorder asked for; consumers commit after the last record. */
const ADMIN_CLIENTS = new Set(['kafka-tools', 'kafkajs-admin']);

function expectCommittedOffsets(
  e: GoldenEntry,
  topics: { name: string; partitions: { committedOffset: bigint }[] }[],
): void {
  const offsets = topics.flatMap((t) =>
    t.partitions.map((p) => ({ topic: t.name, offset: p.committedOffset })),
  );
  expect(offsets.length, `${name(e)}: commits nothing`).toBeGreaterThan(0);
  for (const { topic, offset } of offsets) {
    const produced = index.producedPerTopic[topic];
    expect(produced, `${name(e)}: topic ${topic} was not produced by the recording`).toBeDefined();
    const expected = ADMIN_CLIENTS.has(e.client) ? index.adminCommitOffset : produced!;
    expect(offset, `${name(e)}: committed offset of ${topic}`).toBe(BigInt(expected));
  }
}

describe('golden frames from real traffic', () => {
  it('cover the required APIs for every broker and client', () => {
    expect(index.entries.length).toBeGreaterThan(0);
    const apis = new Set(index.entries.map((e) => e.api));
    for (const api of REQUIRED) expect(apis, `no golden frame of ${api}`).toContain(api);
    for (const broker of BROKERS) {
      const forBroker = index.entries.filter((e) => e.broker === broker);
      const have = new Set(forBroker.map((e) => e.api));
      for (const api of REQUIRED) {
        if (api === 'ConsumerGroupHeartbeat' && !broker.startsWith('4.')) continue;
        expect(have, `no golden frame of ${api} from Kafka ${broker}`).toContain(api);
      }
      const clients = new Set(forBroker.map((e) => e.client));
      for (const c of CLIENTS) expect(clients, `no frames of ${c} with Kafka ${broker}`).toContain(c);
      if (broker.startsWith('4.')) expect(clients).toContain('java-consumer');
    }
    // Produce with acks=0 has no response, every other request has one.
    const acks0 = index.entries.filter((e) => e.response === null);
    expect(acks0.length).toBeGreaterThan(0);
    for (const e of acks0) expect(e.api, name(e)).toBe('Produce');
    for (const e of index.entries) {
      expect(e.decodeError, name(e)).toBeUndefined();
      expect(getApiCodec(e.apiKey)?.name, name(e)).toBe(e.api);
    }
  });

  describe.each(index.entries.map((e) => [name(e), e] as const))('%s', (_, e) => {
    it('request decodes and re-encodes byte for byte', () => {
      const frame = read(e.request);
      const decoded = decodeRequestFrame(frame);
      expect(decoded.apiKey).toBe(e.apiKey);
      expect(decoded.apiVersion).toBe(e.version);
      if (e.apiKey === ApiKey.Produce)
        expect(peekProduceAcks(frame) === 0, name(e)).toBe(e.response === null);
      expectSameBytes(encodeRequestFrame(decoded.header, decoded.body), sized(frame), `${name(e)} request`);

      if (e.apiKey === ApiKey.OffsetCommit)
        expectCommittedOffsets(e, (decoded.body as OffsetCommitRequest).topics);
      if (e.apiKey === ApiKey.TxnOffsetCommit)
        expectCommittedOffsets(e, (decoded.body as TxnOffsetCommitRequest).topics);
    });

    // An acks=0 Produce has no response: no test is declared for it (none skipped).
    if (e.response === null) return;
    const response = e.response;
    it('response decodes and re-encodes byte for byte, header included', () => {
      const frame = read(response);
      const request = decodeRequestFrame(read(e.request));
      const { header, body } = decodeResponseFrame(frame, e.apiKey, e.version);
      expect(header.correlationId).toBe(request.header.correlationId);

      const codec = getApiCodec(e.apiKey)!;
      const hv = responseHeaderVersion(e.apiKey, e.version);
      const size = sizeOfResponseHeader(header, hv) + codec.sizeOfResponse(body, e.version);
      const w = Writer.exact(4 + size);
      w.int32(size);
      encodeResponseHeader(w, header, hv);
      codec.encodeResponse(w, body, e.version);
      expectSameBytes(w.toBuffer(), sized(frame), `${name(e)} response`);
      // The proxy's path (no header tags to carry) gives the same bytes when the header has none.
      if (!header._unknownTaggedFields?.length) {
        expectSameBytes(
          encodeResponseFrame(e.apiKey, e.version, header.correlationId, body),
          sized(frame),
          `${name(e)} response via encodeResponseFrame`,
        );
      }

      const errors = errorCodes(body).filter((c) => c !== 0);
      const allowed = EXPECTED_ERRORS[e.api] ?? [];
      expect(
        errors.filter((c) => !allowed.includes(c)),
        `${name(e)}: error codes in the response`,
      ).toEqual([]);
      expect(e.errorFree, name(e)).toBe(errors.length === 0);

      if (e.apiKey === ApiKey.Metadata) expectAdvertised(e, (body as MetadataResponse).brokers);
      if (e.apiKey === ApiKey.DescribeCluster) expectAdvertised(e, (body as DescribeClusterResponse).brokers);
      if (e.apiKey === ApiKey.FindCoordinator) {
        const r = body as FindCoordinatorResponse;
        expectAdvertised(e, e.version >= 4 ? r.coordinators : [r]);
      }
    });
  });

  it('clients used only versions the capped ApiVersions offered; the codec knows all 4.4 offers', () => {
    for (const broker of BROKERS) {
      const recorded = index.entries.filter(
        (e) => e.broker === broker && e.api === 'ApiVersions' && e.response,
      );
      expect(recorded.length, broker).toBeGreaterThan(0);
      let beyondCodec = false;
      for (const av of recorded) {
        const { body } = decodeResponseFrame(read(av.response!), ApiKey.ApiVersions, av.version);
        expect(body.errorCode, name(av)).toBe(0);
        beyondCodec ||= body.apiKeys.some(
          (k) => k.maxVersion > (getApiCodec(k.apiKey)?.validVersions.max ?? -1),
        );
        capApiVersions(body);
        for (const k of body.apiKeys) {
          const codec = getApiCodec(k.apiKey)!.validVersions;
          expect(k.minVersion >= codec.min && k.maxVersion <= codec.max, name(av)).toBe(true);
        }
        for (const e of index.entries.filter((x) => x.broker === broker && x.client === av.client)) {
          const range = body.apiKeys.find((k) => k.apiKey === e.apiKey);
          if (e.api === 'ApiVersions') continue; // sent before the client knows the ranges
          expect(range, `${name(e)}: not offered`).toBeDefined();
          expect(e.version >= range!.minVersion && e.version <= range!.maxVersion, name(e)).toBe(true);
        }
      }
      // The codec is generated from Kafka 4.4.0's specs: nothing a 4.4 broker offers is beyond it.
      if (broker.startsWith('4.4.')) expect(beyondCodec, broker).toBe(false);
    }
  });

  it('every frame survives truncation and random mutations', () => {
    const frames: RobustnessFrame[] = [];
    for (const e of index.entries) {
      frames.push({ name: `${name(e)} request`, kind: 'request', frame: read(e.request) });
      if (e.response !== null) {
        frames.push({
          name: `${name(e)} response`,
          kind: 'response',
          apiKey: e.apiKey,
          apiVersion: e.version,
          frame: read(e.response),
        });
      }
    }
    const failures = checkRobustness(frames, { mutations: 100 });
    expect(failures.map((f) => `${f.name}: ${f.what}: ${String(f.error)}`)).toEqual([]);
  });
});
