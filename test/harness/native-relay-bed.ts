// The native relay tests' bed (native-relay.test.ts, native-relay-boundary.test.ts): the test
// build of the addon, frames to send, and a client, the proxy's two sockets handed to the addon
// and a fake broker on loopback.
import net from 'node:net';
import { expect } from 'vitest';
import { encodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import { defaultProduceRequest } from '../../protocol/messages/produce-request.js';
import { defaultProduceResponse } from '../../protocol/messages/produce-response.js';
import { ApiPlans } from '../../proxy/core/api-plan.js';
import { NativeRelay, nativeFd, pausedForNative } from '../../proxy/core/native-relay.js';
import type { NativeEnd, NativeHost, NativePair, NativePending } from '../../proxy/core/native-relay.js';
import { noopObserver } from '../../proxy/core/observer.js';
import type { ExposeBrokerNow } from '../../proxy/core/fetch-stream.js';
import type { RequestBufferPool } from '../../proxy/core/request-pool.js';
import type { ProxyObserver } from '../../proxy/core/observer.js';
import { connectWithReusedReads, readSocket, reuseAcceptedReads } from '../../proxy/core/reused-reads.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { loadTestingRelay } from './native-testing-addon.js';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

// The test build (with the Produce walks' entry points), or the sanitizer build (KOP_RELAY_ADDON).
export const binding = loadTestingRelay();

export const plans = new ApiPlans({ extension: null, streamFetch: true });

/** A DescribeConfigs v1 request (passed on unread, answered as-is) with `body` bytes after its header. */
export function opaque(correlationId: number, bodyBytes: number): Buffer {
  const f = Buffer.alloc(4 + 11 + bodyBytes);
  f.writeInt32BE(f.length - 4, 0);
  f.writeInt16BE(ApiKey.DescribeConfigs, 4);
  f.writeInt16BE(1, 6);
  f.writeInt32BE(correlationId, 8);
  f.writeInt16BE(1, 12);
  f.write('t', 14);
  for (let i = 15; i < f.length; i++) f[i] = (i * 7 + correlationId) & 0xff;
  return f;
}

/** A Metadata v1 request: its answer names brokers, so the proxy reads it (JavaScript's). */
export const metadata = (correlationId: number): Buffer =>
  encodeRequestFrame(
    { apiKey: ApiKey.Metadata, apiVersion: 1, correlationId, clientId: 't' },
    { ...defaultMetadataRequest(), topics: [] },
  );

/** A Produce request of `version` with `acks`, `bytes` of records and a transactional id of `txn` characters. */
export function produce(
  correlationId: number,
  version: number,
  acks: number,
  bytes: number,
  txn = 0,
): Buffer {
  return encodeRequestFrame(
    { apiKey: ApiKey.Produce, apiVersion: version, correlationId, clientId: 'native-test' },
    {
      ...defaultProduceRequest(),
      transactionalId: txn > 0 ? 'x'.repeat(txn) : null,
      acks,
      timeoutMs: 1000,
      topicData: [
        {
          name: 't',
          topicId: ZERO_UUID,
          partitionData: [{ index: 0, records: Buffer.alloc(bytes, correlationId) }],
        },
      ],
    },
  );
}

/** An answer of `bytes` bytes after the correlation id (passed on, never decoded). */
export function answer(correlationId: number, bytes: number): Buffer {
  const f = Buffer.alloc(8 + bytes, 0x5a);
  f.writeInt32BE(4 + bytes, 0);
  f.writeInt32BE(correlationId, 4);
  return f;
}

/** A Produce v10 answer, with NodeEndpoints or without. */
export function produceAnswer(correlationId: number, endpoints: boolean): Buffer {
  return encodeResponseFrame(ApiKey.Produce, 10, correlationId, {
    ...defaultProduceResponse(),
    responses: [
      {
        name: 't',
        partitionResponses: [
          {
            index: 0,
            errorCode: endpoints ? 6 : 0,
            baseOffset: 5n,
            logAppendTimeMs: -1n,
            logStartOffset: 0n,
            recordErrors: [],
            errorMessage: null,
            currentLeader: { leaderId: endpoints ? 2 : -1, leaderEpoch: endpoints ? 3 : -1 },
          },
        ],
      },
    ],
    nodeEndpoints: endpoints ? [{ nodeId: 2, host: 'broker-2', port: 9092, rack: null }] : [],
  });
}

export interface Handback {
  client: Buffer;
  broker: Buffer;
  pending: NativePending[];
}

/** Collects what a socket gives, into reused-buffer reads or Node's own. */
export function collect(into: Buffer[]): { readBytes(b: Buffer, end: number): boolean } {
  return {
    readBytes: (b, end) => {
      into.push(Buffer.from(b.subarray(0, end)));
      return false;
    },
  };
}

export interface Bed {
  client: net.Socket;
  /** What the client received. */
  clientGot: () => Buffer;
  /** What the broker received. */
  brokerGot: () => Buffer;
  /**
   * How many bytes the client and the broker received: for polling (Buffer.concat of tens of MB
   * every few ms made a 64 MB test quadratic, 25 s under AddressSanitizer).
   */
  clientBytes: () => number;
  brokerBytes: () => number;
  /** The broker's socket to the proxy. */
  broker: () => net.Socket;
  pair: () => NativePair;
  relay: NativeRelay;
  handbacks: Handback[];
  ends: { end: NativeEnd; error: Error | undefined }[];
  /** Bytes Node read on the proxy's own sockets after a handback (the client's, the broker's). */
  afterClient: () => Buffer;
  afterBroker: () => Buffer;
  stop: () => Promise<void>;
}

/**
 * Client -> proxy sockets (handed to the addon with `pending`) -> fake broker. The broker answers
 * nothing by itself (the test writes its bytes); after a handback the proxy's sockets are read by
 * Node into `afterClient` and `afterBroker`, as the connection would go on reading them.
 */
export async function start(
  opts: {
    maxInFlight?: number;
    observer?: ProxyObserver;
    pending?: NativePending[];
    maxFrameSize?: number;
    requestPool?: RequestBufferPool;
    exposeBroker?: ExposeBrokerNow;
  } = {},
): Promise<Bed> {
  const relay = new NativeRelay(binding, {
    plans,
    maxFrameSize: opts.maxFrameSize ?? 1 << 24,
    maxInFlight: opts.maxInFlight ?? 100,
    observer: opts.observer ?? noopObserver,
    ...(opts.requestPool ? { requestPool: opts.requestPool } : {}),
    ...(opts.exposeBroker ? { exposeBroker: opts.exposeBroker } : {}),
  });
  const sockets: net.Socket[] = [];
  const brokerGot: Buffer[] = [];
  let brokerBytes = 0;
  let brokerSocket: net.Socket | null = null;
  const brokerServer = net.createServer((s) => {
    sockets.push(s);
    brokerSocket = s;
    s.on('data', (d: Buffer) => {
      brokerGot.push(d);
      brokerBytes += d.length;
    });
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => brokerServer.listen(0, '127.0.0.1', r));
  const servers: net.Server[] = [brokerServer];
  const clientGot: Buffer[] = [];
  let clientBytes = 0;
  let clientSocket: net.Socket | null = null;
  const handbacks: Handback[] = [];
  const ends: Bed['ends'] = [];
  const afterClient: Buffer[] = [];
  const afterBroker: Buffer[] = [];
  let pair: NativePair | null = null;
  let proxySockets: [net.Socket, net.Socket] | null = null;
  const host: NativeHost = {
    nativeHandedBack(client, broker, pending) {
      handbacks.push({ client: client ?? Buffer.alloc(0), broker: broker ?? Buffer.alloc(0), pending });
      proxySockets![0].resume();
      proxySockets![1].resume();
    },
    nativeEnded(end, error) {
      ends.push({ end, error });
    },
  };
  const attached = new Promise<void>((resolve, reject) => {
    const front = net.createServer({ pauseOnConnect: true }, (c) => {
      sockets.push(c);
      expect(reuseAcceptedReads(c)).toBe(true);
      c.on('error', () => undefined);
      const up = connectWithReusedReads({
        host: '127.0.0.1',
        port: (brokerServer.address() as net.AddressInfo).port,
      });
      sockets.push(up);
      up.on('error', () => undefined);
      readSocket(c, collect(afterClient));
      readSocket(up, collect(afterBroker));
      up.once('connect', () => {
        up.pause();
        try {
          expect(pausedForNative(c)).toBe(true);
          expect(pausedForNative(up)).toBe(true);
          proxySockets = [c, up];
          pair = relay.attach(host, nativeFd(c), nativeFd(up), opts.pending ?? []);
          resolve();
        } catch (err) {
          reject(err as Error);
        }
      });
    });
    front.listen(0, '127.0.0.1', () => {
      const client = net.connect((front.address() as net.AddressInfo).port, '127.0.0.1');
      sockets.push(client);
      client.on('error', () => undefined);
      client.on('data', (d: Buffer) => {
        clientGot.push(d);
        clientBytes += d.length;
      });
      clientSocket = client;
    });
    servers.push(front);
  });
  await attached;
  await until(() => brokerSocket !== null, 'the broker connection');
  return {
    client: clientSocket!,
    clientGot: () => Buffer.concat(clientGot),
    brokerGot: () => Buffer.concat(brokerGot),
    clientBytes: () => clientBytes,
    brokerBytes: () => brokerBytes,
    broker: () => brokerSocket!,
    pair: () => pair!,
    relay,
    handbacks,
    ends,
    afterClient: () => Buffer.concat(afterClient),
    afterBroker: () => Buffer.concat(afterBroker),
    stop: async () => {
      pair?.close();
      relay.stop();
      for (const s of sockets) s.destroy();
      await Promise.all(servers.map((srv) => new Promise((r) => srv.close(r))));
    },
  };
}

/** Writes `bytes` in pieces cut at `cuts` (offsets), a turn of the event loop apart. */
export async function writeCut(socket: net.Socket, bytes: Buffer, cuts: number[]): Promise<void> {
  let from = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b), bytes.length]) {
    if (cut <= from) continue;
    socket.write(bytes.subarray(from, cut));
    from = cut;
    await new Promise((r) => setImmediate(r));
  }
}
