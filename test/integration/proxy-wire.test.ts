// The proxy core at the byte level, against the bed's real broker: pipelined requests keep their
// order (local answers and acks=0 produces included), and malformed input costs only the
// connection that sent it.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { decodeResponseFrame, peekCorrelationId } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { ApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { Kafka, logLevel } from 'kafkajs';
import { startProxy } from '../harness/proxy.js';
import type { RunningProxy } from '../harness/proxy.js';
import {
  RawClient,
  apiVersionsRequest,
  metadataRequest,
  metadataRequestBody,
  produceRequest,
  withSize,
} from '../harness/raw-client.js';

const brokerBootstrap = inject('kafkaBootstrap');
let proxy: RunningProxy;

beforeAll(async () => {
  proxy = await startProxy(brokerBootstrap);
});
afterAll(async () => {
  await proxy?.stop();
});

function expectProxyBrokers(body: MetadataResponse): void {
  expect(body.brokers.length).toBeGreaterThan(0);
  for (const b of body.brokers) {
    expect(b.host).toBe('127.0.0.1');
    expect(b.port).toBe(proxy.port + 1 + b.nodeId);
  }
}

/** A round trip on a connection that is expected to be healthy. */
async function stillServes(client: RawClient, correlationId: number): Promise<void> {
  const body = await client.request<MetadataResponse>(
    ApiKey.Metadata,
    12,
    correlationId,
    metadataRequestBody(),
  );
  expectProxyBrokers(body);
}

async function waitFor(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('pipelining and ordering', () => {
  test('50 requests in one write come back in request order, a locally answered one in its place', async () => {
    const client = await RawClient.connect(proxy.bootstrap);
    try {
      const local = 25;
      const frames: Buffer[] = [];
      const kinds: ('metadata' | 'versions' | 'local')[] = [];
      for (let i = 0; i < 50; i++) {
        const correlationId = 1000 + i;
        if (i === local) {
          frames.push(apiVersionsRequest(99, correlationId));
          kinds.push('local');
        } else if (i % 2 === 0) {
          frames.push(metadataRequest(12, correlationId));
          kinds.push('metadata');
        } else {
          frames.push(apiVersionsRequest(3, correlationId));
          kinds.push('versions');
        }
      }
      client.write(Buffer.concat(frames));
      const responses = await client.read(50);
      expect(responses.map((r) => peekCorrelationId(r))).toEqual(kinds.map((_, i) => 1000 + i));
      for (const [i, frame] of responses.entries()) {
        if (kinds[i] === 'metadata') {
          expectProxyBrokers(decodeResponseFrame(frame, ApiKey.Metadata, 12).body as MetadataResponse);
        } else if (kinds[i] === 'versions') {
          const body = decodeResponseFrame(frame, ApiKey.ApiVersions, 3).body as ApiVersionsResponse;
          expect(body.errorCode).toBe(0);
          expect(body.apiKeys.length).toBeGreaterThan(10);
        } else {
          const body = decodeResponseFrame(frame, ApiKey.ApiVersions, 0).body as ApiVersionsResponse;
          expect(body.errorCode).toBe(35);
        }
      }
      // Nothing else arrives: no duplicate or stray responses.
      await expect(client.read(1, 300)).rejects.toThrow(/only 0 of 1/);
    } finally {
      client.close();
    }
  });

  test('acks=0 produces in the middle of a pipeline do not stall later responses', async () => {
    const topic = uniqueName('wire-acks0');
    await createTopics({ bootstrap: proxy.bootstrap }, [{ topic, partitions: 1 }]);
    const client = await RawClient.connect(proxy.bootstrap);
    try {
      client.write(
        Buffer.concat([
          metadataRequest(12, 1),
          produceRequest(9, 2, topic, 0, 'fire-and-forget-1'),
          metadataRequest(12, 3),
          produceRequest(9, 4, topic, 0, 'fire-and-forget-2'),
          produceRequest(9, 5, topic, 1, 'acked'),
          apiVersionsRequest(3, 6),
        ]),
      );
      const responses = await client.read(4);
      expect(responses.map((r) => peekCorrelationId(r))).toEqual([1, 3, 5, 6]);
      const produced = decodeResponseFrame(responses[2]!, ApiKey.Produce, 9).body as {
        responses: { partitionResponses: { errorCode: number; baseOffset: bigint }[] }[];
      };
      const partition = produced.responses[0]!.partitionResponses[0]!;
      expect(partition.errorCode).toBe(0);
      // The two acks=0 records really reached the broker, before the acked one.
      expect(Number(partition.baseOffset)).toBe(2);
      await expect(client.read(1, 300)).rejects.toThrow(/only 0 of 1/);
    } finally {
      client.close();
    }
  });

  test('1,000 pipelined requests over a connection with a small in-flight limit all arrive in order', async () => {
    const small = await startProxy(brokerBootstrap, { maxInFlight: 8 });
    const client = await RawClient.connect(small.bootstrap);
    try {
      const n = 1000;
      client.write(Buffer.concat(Array.from({ length: n }, (_, i) => apiVersionsRequest(3, i))));
      const responses = await client.read(n, 30_000);
      expect(responses.map((r) => peekCorrelationId(r))).toEqual(Array.from({ length: n }, (_, i) => i));
    } finally {
      client.close();
      await small.stop();
    }
  });
});

describe('robustness', () => {
  test('an ApiVersions request above the proxy maximum gets a v0 UNSUPPORTED_VERSION answer', async () => {
    const client = await RawClient.connect(proxy.bootstrap);
    try {
      client.write(apiVersionsRequest(99, 42));
      const [frame] = await client.read(1);
      const { header, body } = decodeResponseFrame(frame!, ApiKey.ApiVersions, 0);
      expect(header.correlationId).toBe(42);
      const versions = body as ApiVersionsResponse;
      expect(versions.errorCode).toBe(35);
      const own = versions.apiKeys.find((k) => k.apiKey === ApiKey.ApiVersions);
      expect(own?.maxVersion).toBeGreaterThanOrEqual(3);
      expect(own!.maxVersion).toBeLessThan(99);
      // The client retries lower on the same connection, as real clients do.
      await stillServes(client, 43);
    } finally {
      client.close();
    }
  });

  const badInputs: [string, Buffer][] = [
    ['HTTP garbage (a huge size prefix)', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')],
    ['a negative frame size', Buffer.from([0xff, 0xff, 0xff, 0xf0, 1, 2, 3, 4])],
    ['an oversized frame size', Buffer.from([0x7f, 0x00, 0x00, 0x00, 0, 0, 0, 0])],
    ['a frame shorter than a request header', withSize(Buffer.from([0, 3, 0]))],
  ];
  for (const [what, bytes] of badInputs) {
    test(`${what}: that connection is closed, others keep working`, async () => {
      const bystander = await RawClient.connect(proxy.bootstrap);
      const bad = await RawClient.connect(proxy.bootstrap);
      try {
        await stillServes(bystander, 1);
        bad.write(bytes);
        expect(await bad.closesWithin(5_000)).toBe(true);
        await stillServes(bystander, 2);
        const fresh = await RawClient.connect(proxy.bootstrap);
        await stillServes(fresh, 1);
        fresh.close();
      } finally {
        bad.close();
        bystander.close();
      }
    });
  }

  test('a truncated frame then close: the proxy drops both sides of that connection', async () => {
    await waitFor(() => proxy.proxy.connectionCount === 0);
    const bystander = await RawClient.connect(proxy.bootstrap);
    await stillServes(bystander, 1);
    const bad = await RawClient.connect(proxy.bootstrap);
    const frame = metadataRequest(12, 7);
    bad.write(frame.subarray(0, frame.length - 5));
    await waitFor(() => proxy.proxy.connectionCount === 2);
    bad.socket.end();
    await waitFor(() => proxy.proxy.connectionCount === 1);
    await stillServes(bystander, 2);
    bystander.close();
    await waitFor(() => proxy.proxy.connectionCount === 0);
  });

  test('an unknown API key passes through: the broker closes the connection, as it does directly', async () => {
    const unknown = (): Buffer => {
      const head = Buffer.alloc(10);
      head.writeInt16BE(10000, 0);
      head.writeInt16BE(0, 2);
      head.writeInt32BE(77, 4);
      head.writeInt16BE(-1, 8); // null client id
      return withSize(head);
    };
    const direct = await RawClient.connect(brokerBootstrap.split(',')[0]!);
    direct.write(unknown());
    const directClosed = await direct.closesWithin(5_000);
    direct.close();

    const viaProxy = await RawClient.connect(proxy.bootstrap);
    // A request before it shows the connection worked; the unknown key is not rejected by the proxy's own parsing.
    await stillServes(viaProxy, 1);
    viaProxy.write(unknown());
    expect(await viaProxy.closesWithin(5_000)).toBe(directClosed);
    expect(directClosed).toBe(true);
    await expect(viaProxy.read(1, 100)).rejects.toThrow(/closed/);
    viaProxy.close();

    const after = await RawClient.connect(proxy.bootstrap);
    await stillServes(after, 1);
    after.close();
  });

  test('kafkajs still works through the proxy after all of that', async () => {
    const kafka = new Kafka({ brokers: [proxy.bootstrap], logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      const cluster = await admin.describeCluster();
      for (const b of cluster.brokers) expect(b.port).toBe(proxy.port + 1 + b.nodeId);
    } finally {
      await admin.disconnect();
    }
  });
});
