// Issue #20: a store that lost its data is noticed. The CLI proxy writes a marker when it first
// opens the store; after Redis FLUSHALL, the ZooKeeper chroot deleted, or the embedded store's
// data file removed under the running proxy, it logs an error, /readyz answers 503 with the
// reason and kop_store_data_lost is 1, and all of it stays so (the store itself keeps working).
import { rmSync } from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'node-zookeeper-client';
import type { Client } from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { startRedis } from '../bed/redis.js';
import type { RedisServer } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { RawClient } from '../harness/raw-client.js';
import { commitOnce, sleep } from '../reliability/commit-checker.js';
import { scrape } from '../reliability/limits-helpers.js';

const brokerBootstrap = inject('kafkaBootstrap');
/** Commits to a topic the cluster lacks are refused, as a broker refuses them: created once. */
const TOPIC = uniqueName('data-loss-topic');
let topicCreated: Promise<void> | undefined;

async function startCli(store: string[]): Promise<{ proxy: ProxyProcess; http: string }> {
  await ensureBuilt();
  const proxy = await spawnProxy(['--bootstrap-server', brokerBootstrap, ...store, '--http', '127.0.0.1:0']);
  for (let i = 0; !proxy.output().includes('"http listening"'); i++) {
    if (i > 200) throw new Error(`no HTTP endpoint:\n${proxy.output()}`);
    await sleep(50);
  }
  const line = proxy
    .output()
    .split('\n')
    .find((l) => l.includes('"http listening"'))!;
  return { proxy, http: `127.0.0.1:${(JSON.parse(line) as { port: number }).port}` };
}

interface Readiness {
  status: number;
  storeData?: { ok: boolean; error?: string };
}

async function readiness(http: string): Promise<Readiness> {
  const res = await fetch(`http://${http}/readyz`);
  const body = (await res.json()) as { checks: { storeData?: Readiness['storeData'] } };
  return { status: res.status, storeData: body.checks.storeData };
}

async function commit(proxy: ProxyProcess, group: string, offset: bigint): Promise<number[]> {
  const client = await RawClient.connect(proxy.bootstrap);
  try {
    return await commitOnce(client, group, TOPIC, 1, offset);
  } finally {
    client.close();
  }
}

/** Runs the scenario on one store kind: `wipe` takes its data away under the running proxy. */
async function lossIsNoticed(kind: string, store: string[], wipe: () => Promise<void>): Promise<void> {
  await (topicCreated ??= createTopics({ bootstrap: brokerBootstrap }, [{ topic: TOPIC, partitions: 1 }]));
  const { proxy, http } = await startCli(store);
  try {
    const group = uniqueName(`loss-${kind}`);
    expect(await commit(proxy, group, 5n)).toEqual([0]);
    for (let i = 0; !proxy.output().includes('"event":"offset store marker"'); i++) {
      if (i > 200) throw new Error(`no marker written:\n${proxy.output()}`);
      await sleep(50);
    }
    expect(await readiness(http)).toEqual({ status: 200, storeData: { ok: true, ms: expect.any(Number) } });
    expect(await scrape(http, 'kop_store_data_lost', `store="${kind}"`)).toBe(0);

    await wipe();
    let r = await readiness(http);
    for (let i = 0; r.status === 200; i++) {
      if (i > 150) throw new Error('/readyz stayed ready after the store lost its data');
      await sleep(100);
      r = await readiness(http);
    }
    expect(r.status).toBe(503);
    expect(r.storeData?.ok).toBe(false);
    expect(r.storeData?.error).toMatch(/^the offset store lost its data: marker .* is gone/);
    const logged = proxy
      .output()
      .split('\n')
      .filter((l) => l.includes('"offset store lost its data"'));
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0]!)).toMatchObject({ level: 'error', store: kind });
    expect(await scrape(http, 'kop_store_data_lost', `store="${kind}"`)).toBe(1);

    // The store works again (new commits are kept), but what was lost stays reported.
    expect(await commit(proxy, group, 6n)).toEqual([0]);
    await sleep(1_100);
    expect((await readiness(http)).status).toBe(503);
    expect(proxy.child.exitCode).toBe(null);
  } finally {
    await proxy.stop('SIGKILL');
  }
}

describe('the store losing its data is noticed', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.kill();
  });

  test('Redis: FLUSHALL', async () => {
    await lossIsNoticed('redis', ['--store', redis.url], async () => {
      await redisCommand(redis.host, redis.port, 'FLUSHALL');
    });
  });

  test('ZooKeeper: the chroot deleted', async () => {
    const connect = inject('zkConnect');
    const chroot = `/${uniqueName('loss')}`;
    await lossIsNoticed('zookeeper', ['--store', `zk://${connect}${chroot}`], async () => {
      const client: Client = createClient(connect);
      await new Promise<void>((resolve) => {
        client.once('connected', () => resolve());
        client.connect();
      });
      try {
        await removeTree(client, chroot);
      } finally {
        client.close();
      }
    });
  });

  test('embedded: the data file removed under the running proxy', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kop-loss-'));
    try {
      await lossIsNoticed('embedded', ['--data-dir', dir], async () => {
        rmSync(join(dir, 'data.mdb'));
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

async function removeTree(client: Client, path: string): Promise<void> {
  const children = await new Promise<string[]>((resolve, reject) =>
    client.getChildren(path, (err, kids) => (err ? reject(err) : resolve(kids))),
  );
  for (const child of children) await removeTree(client, `${path}/${child}`);
  await new Promise<void>((resolve, reject) =>
    client.remove(path, -1, (err) => (err ? reject(err) : resolve())),
  );
}
