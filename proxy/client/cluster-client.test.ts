import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { defaultApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultMetadataResponse } from '../../protocol/messages/metadata-response.js';
import { BrokerMap } from '../core/broker-map.js';
import { ClusterClient } from './cluster-client.js';

/**
 * A fake broker on loopback answering ApiVersions and Metadata; `onMetadata` may instead cut the
 * connection (connections are numbered from 1).
 */
function fakeBroker(onMetadata: (connection: number, socket: net.Socket) => boolean): Promise<{
  server: net.Server;
  port: number;
  connections(): number;
}> {
  let connections = 0;
  const server = net.createServer((socket) => {
    const connection = ++connections;
    const splitter = new FrameSplitter({ maxFrameSize: 1 << 20 });
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      for (const frame of splitter.push(chunk)) {
        const { apiKey, apiVersion, header } = decodeRequestFrame(frame);
        if (apiKey === ApiKey.ApiVersions) {
          const body = defaultApiVersionsResponse();
          body.apiKeys = [
            { apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion: 3 },
            { apiKey: ApiKey.Metadata, minVersion: 0, maxVersion: 12 },
          ];
          socket.write(encodeResponseFrame(apiKey, apiVersion, header.correlationId, body));
        } else if (onMetadata(connection, socket)) {
          const body = defaultMetadataResponse();
          const { port } = server.address() as net.AddressInfo;
          body.brokers = [{ nodeId: 1, host: '127.0.0.1', port, rack: null }];
          socket.write(encodeResponseFrame(apiKey, apiVersion, header.correlationId, body));
        }
      }
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, port: (server.address() as net.AddressInfo).port, connections: () => connections }),
    ),
  );
}

describe('ClusterClient', () => {
  const cleanup: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanup.splice(0)) c();
  });

  test('a request that fails on a reset connection is retried on a new one, which the old one leaves alone', async () => {
    // The reset connection reports its error first and its close later; the retry reconnects in
    // between. (The old close used to fail the channel again, destroying the new connection.)
    const broker = await fakeBroker((connection, socket) => {
      if (connection > 1) return true;
      socket.resetAndDestroy();
      return false;
    });
    const brokers = new BrokerMap(0);
    // The bootstrap server and node 1 are one address, so one channel: the retry reuses it.
    brokers.learn(1, { host: '127.0.0.1', port: broker.port });
    const cluster = new ClusterClient({
      bootstrapServers: [{ host: '127.0.0.1', port: broker.port }],
      brokers,
      timeoutMs: 5_000,
    });
    cleanup.push(
      () => cluster.close(),
      () => broker.server.close(),
    );

    const metadata = await cluster.metadata([]);
    expect(metadata.brokers.map((b) => b.nodeId)).toEqual([1]);
    expect(broker.connections()).toBe(2);
  });

  /** A broker whose process is frozen: the kernel accepts its connections, nothing is ever answered. */
  async function frozenBroker(): Promise<{ port: number; close: () => void }> {
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return {
      port: (server.address() as net.AddressInfo).port,
      close: () => {
        for (const s of sockets) s.destroy();
        server.close();
      },
    };
  }

  test('with frozen brokers a request fails within one timeout, however many brokers it tries', async () => {
    const frozen = await Promise.all([frozenBroker(), frozenBroker(), frozenBroker()]);
    const cluster = new ClusterClient({
      bootstrapServers: frozen.map((b) => ({ host: '127.0.0.1', port: b.port })),
      brokers: new BrokerMap(0),
      timeoutMs: 1_000,
    });
    cleanup.push(() => cluster.close(), ...frozen.map((b) => b.close));
    const t0 = Date.now();
    await expect(cluster.metadata([])).rejects.toMatchObject({ code: 'TIMEOUT' });
    const took = Date.now() - t0;
    // One deadline (1 s), not one per broker tried (3 s).
    expect(took).toBeGreaterThanOrEqual(990);
    expect(took).toBeLessThan(2_500);
  });

  test('within() fails composite work at the deadline; the work left running settles quietly', async () => {
    const cluster = new ClusterClient({ bootstrapServers: [], brokers: new BrokerMap(0), timeoutMs: 100 });
    cleanup.push(() => cluster.close());
    let failLater!: (err: Error) => void;
    const t0 = Date.now();
    await expect(
      cluster.within('the test work', () => new Promise((_resolve, reject) => (failLater = reject))),
    ).rejects.toThrow(/the test work: no answer within the request timeout/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(90);
    // Its own failure afterwards is no unhandled rejection.
    failLater(new Error('too late'));
    await new Promise((r) => setTimeout(r, 10));
    await expect(cluster.within('quick', () => Promise.resolve(7))).resolves.toBe(7);
  });
});
