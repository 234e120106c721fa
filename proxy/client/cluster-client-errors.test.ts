/**
 * The cluster client's failures carry a code from a closed set (cluster-error.ts), one per cause,
 * and its requests and answers are typed by API key: against a fake broker on loopback whose
 * answer to each request is chosen by the test.
 */
import net from 'node:net';
import { afterEach, describe, expect, expectTypeOf, test } from 'vitest';
import { ErrorCode } from '../../protocol/error-codes.js';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { defaultApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import { defaultFindCoordinatorResponse } from '../../protocol/messages/find-coordinator-response.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import { defaultMetadataResponse } from '../../protocol/messages/metadata-response.js';
import type { ListOffsetsResponse } from '../../protocol/messages/list-offsets-response.js';
import { BrokerMap } from '../core/broker-map.js';
import { ClusterClient } from './cluster-client.js';
import { ClusterRequestError } from './cluster-error.js';
import type { ClusterErrorCode, CLUSTER_ERROR_CODES } from './cluster-error.js';

/** What the fake broker does with one request (other than ApiVersions). */
type Reply = { body: unknown } | 'close' | 'silent' | { garbage: Buffer };

interface FakeBroker {
  port: number;
  /** The API keys of the requests it received, ApiVersions included. */
  received: number[];
  close(): void;
}

/** The versions a fake broker advertises unless a test says otherwise. */
const ADVERTISED: { apiKey: number; minVersion: number; maxVersion: number }[] = [
  { apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion: 3 },
  { apiKey: ApiKey.Metadata, minVersion: 0, maxVersion: 12 },
  { apiKey: ApiKey.FindCoordinator, minVersion: 0, maxVersion: 6 },
  { apiKey: ApiKey.SaslHandshake, minVersion: 0, maxVersion: 1 },
];

async function fakeBroker(
  reply: (apiKey: number, apiVersion: number) => Reply,
  advertised = ADVERTISED,
): Promise<FakeBroker> {
  const received: number[] = [];
  const sockets: net.Socket[] = [];
  const server = net.createServer((socket) => {
    sockets.push(socket);
    const splitter = new FrameSplitter({ maxFrameSize: 1 << 20 });
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      for (const frame of splitter.push(chunk)) {
        const { apiKey, apiVersion, header } = decodeRequestFrame(frame);
        received.push(apiKey);
        const r: Reply =
          apiKey === ApiKey.ApiVersions
            ? { body: { ...defaultApiVersionsResponse(), apiKeys: advertised } }
            : reply(apiKey, apiVersion);
        if (r === 'close') socket.destroy();
        else if (r === 'silent') continue;
        else if ('garbage' in r) {
          const head = Buffer.alloc(8);
          head.writeInt32BE(4 + r.garbage.length, 0);
          head.writeInt32BE(header.correlationId, 4);
          socket.write(Buffer.concat([head, r.garbage]));
        } else socket.write(encodeResponseFrame(apiKey, apiVersion, header.correlationId, r.body));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    received,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

const metadataAnswer = (): { body: MetadataResponse } => ({ body: defaultMetadataResponse() });

describe('ClusterClient error codes', () => {
  const cleanup: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanup.splice(0)) c();
  });

  /** A client whose bootstrap server and node 1 are `port`. */
  function clientOf(port: number, opts: Partial<ConstructorParameters<typeof ClusterClient>[0]> = {}) {
    const brokers = new BrokerMap(0);
    brokers.learn(1, { host: '127.0.0.1', port });
    const cluster = new ClusterClient({
      bootstrapServers: [{ host: '127.0.0.1', port }],
      brokers,
      timeoutMs: 10_000,
      ...opts,
    });
    cleanup.push(() => cluster.close());
    return cluster;
  }

  async function broker(reply: (apiKey: number) => Reply, advertised = ADVERTISED): Promise<FakeBroker> {
    const b = await fakeBroker(reply, advertised);
    cleanup.push(() => b.close());
    return b;
  }

  /** The code of the ClusterRequestError `p` rejects with (anything else fails the test). */
  async function codeOf(p: Promise<unknown>): Promise<ClusterErrorCode> {
    const err = await p.then(
      () => expect.unreachable('resolved'),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ClusterRequestError);
    return (err as ClusterRequestError).code;
  }

  test('an error answer of the broker is BROKER_ERROR with its Kafka error code', async () => {
    const b = await broker(() => ({
      body: {
        ...defaultFindCoordinatorResponse(),
        coordinators: [
          {
            key: 'g',
            nodeId: -1,
            host: '',
            port: -1,
            errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE,
            errorMessage: null,
          },
        ],
      },
    }));
    const err = await clientOf(b.port)
      .coordinatorOf('g')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClusterRequestError);
    expect(err).toMatchObject({
      code: 'BROKER_ERROR',
      kafkaErrorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    });
  });

  test('a connection closed before the answer, or refused, is DISCONNECTED', async () => {
    const b = await broker(() => 'close');
    const cluster = clientOf(b.port);
    expect(await codeOf(cluster.request(1, ApiKey.Metadata, defaultMetadataRequest()))).toBe('DISCONNECTED');
    // A port nobody listens on (the fake broker's, once it is closed).
    b.close();
    await new Promise((r) => setTimeout(r, 20));
    expect(await codeOf(clientOf(b.port).metadata([]))).toBe('DISCONNECTED');
  });

  test('an API the broker lacks, or has in no version the proxy knows, is UNSUPPORTED_API', async () => {
    const b = await broker(metadataAnswer, [
      ...ADVERTISED,
      // Versions far above any the codec knows: no common version.
      { apiKey: ApiKey.OffsetCommit, minVersion: 90, maxVersion: 99 },
    ]);
    const cluster = clientOf(b.port);
    const describe = cluster.request(1, ApiKey.ConsumerGroupDescribe, {
      includeAuthorizedOperations: false,
      groupIds: ['g'],
    });
    expect(await codeOf(describe)).toBe('UNSUPPORTED_API');
    expect(await codeOf(cluster.versionFor(1, ApiKey.OffsetCommit))).toBe('UNSUPPORTED_API');
    // Decided from ApiVersions: neither request went to the broker.
    expect(b.received).toEqual([ApiKey.ApiVersions]);
    // The connection is fine for what the broker has.
    await expect(cluster.metadata([])).resolves.toBeDefined();
  });

  test('no answer within the request timeout is TIMEOUT, and so is composite work past it', async () => {
    const b = await broker(() => 'silent');
    const cluster = clientOf(b.port, { timeoutMs: 300 });
    expect(await codeOf(cluster.metadata([]))).toBe('TIMEOUT');
    expect(await codeOf(cluster.within('waiting', () => new Promise(() => {})))).toBe('TIMEOUT');
  });

  test('an answer that does not decode is BAD_RESPONSE', async () => {
    const b = await broker(() => ({ garbage: Buffer.from([1, 2, 3]) }));
    expect(await codeOf(clientOf(b.port).metadata([]))).toBe('BAD_RESPONSE');
  });

  test('a SASL mechanism the broker refuses is AUTHENTICATION_FAILED', async () => {
    const b = await broker((apiKey) =>
      apiKey === ApiKey.SaslHandshake
        ? { body: { errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms: ['PLAIN'] } }
        : metadataAnswer(),
    );
    const cluster = clientOf(b.port, {
      sasl: { mechanism: 'SCRAM-SHA-512', username: 'u', password: 'p' },
    });
    expect(await codeOf(cluster.metadata([]))).toBe('AUTHENTICATION_FAILED');
  });

  test('a node id the client does not know is UNKNOWN_BROKER', async () => {
    const b = await broker(metadataAnswer);
    const cluster = clientOf(b.port);
    expect(await codeOf(cluster.request(7, ApiKey.Metadata, defaultMetadataRequest()))).toBe(
      'UNKNOWN_BROKER',
    );
    expect(await codeOf(cluster.brokerRange(7, ApiKey.Metadata))).toBe('UNKNOWN_BROKER');
  });

  test('a request pending when the client is closed is CLOSED', async () => {
    const b = await broker(() => 'silent');
    const cluster = clientOf(b.port);
    const pending = cluster.metadata([]);
    while (!b.received.includes(ApiKey.Metadata)) await new Promise((r) => setTimeout(r, 5));
    cluster.close();
    expect(await codeOf(pending)).toBe('CLOSED');
  });

  test('the codes are a closed set; only BROKER_ERROR carries a Kafka error code', () => {
    expect(new ClusterRequestError('TIMEOUT', 'x').kafkaErrorCode).toBeNull();
    expect(
      new ClusterRequestError('BROKER_ERROR', 'x', { kafkaErrorCode: ErrorCode.NOT_COORDINATOR })
        .kafkaErrorCode,
    ).toBe(ErrorCode.NOT_COORDINATOR);
    expectTypeOf<ClusterErrorCode>().toEqualTypeOf<(typeof CLUSTER_ERROR_CODES)[number]>();
    // @ts-expect-error a code outside the set does not compile
    new ClusterRequestError('SOMETHING_ELSE', 'x');
    // @ts-expect-error BROKER_ERROR without the Kafka error code does not compile
    new ClusterRequestError('BROKER_ERROR', 'x');
  });
});

describe('ClusterClient typing', () => {
  test('a request takes the request type of its API key and resolves with its response type', () => {
    const cluster = new ClusterClient({ bootstrapServers: [], brokers: new BrokerMap(0), timeoutMs: 1 });
    const asked = cluster.request('any', ApiKey.Metadata, defaultMetadataRequest());
    asked.catch(() => undefined); // no broker: only the types are looked at
    expectTypeOf(asked).resolves.toEqualTypeOf<{ version: number; body: MetadataResponse }>();
    expectTypeOf<
      Awaited<ReturnType<typeof cluster.request<typeof ApiKey.ListOffsets>>>['body']
    >().toEqualTypeOf<ListOffsetsResponse>();
    // @ts-expect-error a Metadata body is not a FindCoordinator request
    cluster.request('any', ApiKey.FindCoordinator, defaultMetadataRequest()).catch(() => undefined);
    cluster.close();
  });
});
