import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startZooKeeper } from '../bed/zookeeper.js';
import type { ZooKeeperServer } from '../bed/zookeeper.js';

// node-zookeeper-client ships no type declarations: type the few calls used here.
interface ZkClient {
  connect(): void;
  close(): void;
  once(event: 'connected', listener: () => void): void;
  create(path: string, data: Buffer, callback: (error: Error | null, path: string) => void): void;
  getData(path: string, callback: (error: Error | null, data: Buffer) => void): void;
}
const zookeeper = createRequire(import.meta.url)('node-zookeeper-client') as {
  createClient(connectString: string, options?: { sessionTimeout?: number; retries?: number }): ZkClient;
};

async function connected(connectString: string): Promise<ZkClient> {
  const client = zookeeper.createClient(connectString, { sessionTimeout: 5000, retries: 3 });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`could not connect to ZooKeeper at ${connectString}`)),
      15_000,
    );
    client.once('connected', () => {
      clearTimeout(timer);
      resolve();
    });
    client.connect();
  });
  return client;
}

const create = (client: ZkClient, path: string, data: string) =>
  new Promise<string>((resolve, reject) =>
    client.create(path, Buffer.from(data), (e, p) => (e ? reject(e) : resolve(p))),
  );
const getData = (client: ZkClient, path: string) =>
  new Promise<string>((resolve, reject) =>
    client.getData(path, (e, d) => (e ? reject(e) : resolve(d.toString('utf8')))),
  );

describe('bed: ZooKeeper from the global setup', () => {
  it('creates and reads a znode', async () => {
    const client = await connected(inject('zkConnect'));
    try {
      const path = `/bed-global-${process.pid}-${Date.now()}`;
      await create(client, path, 'from-global');
      expect(await getData(client, path)).toBe('from-global');
    } finally {
      client.close();
    }
  });
});

describe('bed: ZooKeeper restart', () => {
  let server: ZooKeeperServer;
  beforeAll(async () => {
    server = await startZooKeeper();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('keeps a znode across stop() and start() on the same port', async () => {
    expect(server.url).toBe(`zk://${server.connectString}`);
    const first = await connected(server.connectString);
    await create(first, '/kept', 'still-here');
    first.close();

    await server.stop();
    expect(server.pid).toBeUndefined();
    await server.start();

    const second = await connected(server.connectString);
    try {
      expect(await getData(second, '/kept')).toBe('still-here');
    } finally {
      second.close();
    }
  });
});
