// Issue #7, faults: the proxy SIGKILLed and restarted (embedded store, Redis), ZooKeeper restarted
// under the ZooKeeper store, and a client that never reads (a broker of a 3-broker cluster killed
// and restarted: reliability-broker-restart.test.ts). In each, raw clients commit increasing offsets for several groups and record every
// commit the proxy acknowledged (CommitChecker); at the end, every acknowledged offset is in the
// store or superseded by a later commit. Where kafkajs groups run too, they must finish: every
// record seen, the committed offsets at the end of every partition.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultFetchRequest } from '../../protocol/messages/fetch-request.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { startZooKeeper } from '../bed/zookeeper.js';
import type { ZooKeeperServer } from '../bed/zookeeper.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import { ensureBuilt, freePortRange, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { RawClient, metadataRequestBody } from '../harness/raw-client.js';
import { CommitChecker, commitOnce, rssOf, sleep } from '../reliability/commit-checker.js';
import { expectGroupCommitted, fill, storeReader, until } from '../reliability/fault-helpers.js';
import { runGroup } from '../reliability/group-consumers.js';

const brokerBootstrap = inject('kafkaBootstrap');

describe('the checker itself', () => {
  test('reports an acknowledged commit that is missing from the store, and one above what was sent', async () => {
    const store = await openStore('memory://');
    const proxy = await startOffsetProxy(brokerBootstrap, store);
    const topic = uniqueName('checker');
    // Commits to a topic the cluster lacks are refused, as a broker refuses them.
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
    const groups = [`${topic}-a`, `${topic}-b`];
    const checker = new CommitChecker({ target: () => proxy.bootstrap, groups, topic, partitions: 2 });
    try {
      checker.start();
      await checker.waitForAcks(50);
      await checker.stop();
      expect(await checker.verify(storeReader(store))).toEqual([]);
      // Losing group a's offsets, and a stored offset nobody sent for group b, are both caught.
      await store.deleteGroup(groups[0]!);
      const read = storeReader(store);
      const violations = await checker.verify(async (g) =>
        g === groups[1] ? new Map([...(await read(g))].map(([p, o]) => [p, o + 1000n])) : read(g),
      );
      expect(violations.map((v) => [v.group, v.partition, v.stored])).toEqual([
        [groups[0], 0, null],
        [groups[0], 1, null],
        [groups[1], 0, checker.tallies.get(groups[1]!)!.sent + 1000n],
        [groups[1], 1, checker.tallies.get(groups[1]!)!.sent + 1000n],
      ]);
    } finally {
      await checker.stop();
      await proxy.stop();
      await store.close();
    }
  });
});

describe('the proxy killed with SIGKILL and restarted', () => {
  beforeAll(async () => {
    await ensureBuilt();
  });

  const cases: { name: string; store: () => string[]; open: (dir: string) => Promise<OffsetStore> }[] = [
    {
      name: 'embedded store (same --data-dir)',
      store: () => [],
      open: async (dir) => new EmbeddedStore({ dataDir: dir }),
    },
    {
      name: 'Redis store',
      store: () => ['--store', inject('redisUrl')],
      open: () => openStore(inject('redisUrl')),
    },
  ];
  for (const c of cases) {
    test(`${c.name}: acknowledged commits survive, kafkajs consumers reconnect and finish`, async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'kop-kill-'));
      const port = await freePortRange();
      const bootstrap = `127.0.0.1:${port}`;
      const args = [
        '--bootstrap-server',
        brokerBootstrap,
        '--listen',
        bootstrap,
        '--data-dir',
        dir,
        ...c.store(),
      ];
      const topic = uniqueName('kill');
      await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 3 }]);
      const ends = await fill(brokerBootstrap, topic, 3, 100);
      let proxy: ProxyProcess = await spawnProxy(args);
      const groups = Array.from({ length: 4 }, (_, i) => `${topic}-raw-${i}`);
      const checker = new CommitChecker({ target: () => bootstrap, groups, topic, partitions: 3 });
      const group = `${topic}-kafkajs`;
      const consumers = runGroup({ bootstrap, topic, group, endOffsets: ends, perMessageMs: 15 });
      let store: OffsetStore | undefined;
      try {
        checker.start();
        await checker.waitForAcks(200);
        await until(() => consumers.seen().distinct >= 20, 'the kafkajs group consuming');
        const before = consumers.seen().distinct;
        const killedAt = checker.acknowledged;
        expect(await proxy.stop('SIGKILL')).toBe(null);
        await sleep(1_000);
        proxy = await spawnProxy(args);
        await checker.waitForAcks(200);
        await consumers.done;
        await checker.stop();
        await consumers.stop();
        await proxy.stop();
        store = await c.open(dir);
        const violations = await checker.verify(storeReader(store));
        console.log(
          `[faults] kill -9 (${c.name}): ${checker.summary()}; killed after ${killedAt} acks; ` +
            `kafkajs: ${before} of 300 records seen before the kill, ${JSON.stringify(consumers.seen())} at the end, ` +
            `${consumers.crashes} crashes, ${consumers.restarts} restarts, ${consumers.commitFailures} failed commits`,
        );
        expect(violations).toEqual([]);
        expect(before).toBeLessThan(300); // the kill happened while the group was consuming
        await expectGroupCommitted(store, group, ends);
      } finally {
        await checker.stop();
        await consumers.stop();
        await proxy.stop('SIGKILL');
        await store?.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

describe('ZooKeeper restarted mid-run (store zk://)', () => {
  let zk: ZooKeeperServer;
  beforeAll(async () => {
    zk = await startZooKeeper();
  });
  afterAll(async () => {
    await zk?.stop();
  });

  test('commits get retriable errors while it is down; nothing acknowledged is lost; the CLI survives', async () => {
    // The CLI, not an in-process proxy: node-zookeeper-client may throw from its socket handler on
    // a reconnect (its issues #23/#70, test/reliability/zk-restart-repro.ts), and the CLI's
    // process-level handler (store.recoverFromFault) is part of what is tested here.
    await ensureBuilt();
    const proxy = await spawnProxy([
      '--bootstrap-server',
      brokerBootstrap,
      '--store',
      zk.url,
      '--store-timeout-ms',
      '1000',
    ]);
    const topic = uniqueName('zk-restart');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
    const groups = Array.from({ length: 4 }, (_, i) => `${topic}-raw-${i}`);
    const checker = new CommitChecker({ target: () => proxy.bootstrap, groups, topic, partitions: 2 });
    let store: OffsetStore | undefined;
    try {
      checker.start();
      await checker.waitForAcks(100);
      await zk.stop();
      const down = checker.stats.attempts;
      await sleep(4_000);
      const duringDown = { ...checker.stats.errors };
      const attemptsDown = checker.stats.attempts - down;
      await zk.start();
      await checker.waitForAcks(100, 60_000);
      await checker.stop();
      expect(proxy.child.exitCode, proxy.output()).toBe(null);
      const faults = proxy.output().split('store client fault').length - 1;
      await proxy.stop();
      store = await openStore(zk.url);
      const violations = await checker.verify(storeReader(store));
      console.log(
        `[faults] ZooKeeper restart: ${checker.summary()}; while down: ${attemptsDown} commits, ` +
          `errors ${JSON.stringify(duringDown)}; ZooKeeper client faults recovered by the CLI: ${faults}`,
      );
      expect(violations).toEqual([]);
      // While ZooKeeper was down, commits were answered with retriable codes only
      // (REQUEST_TIMED_OUT 7, COORDINATOR_LOAD_IN_PROGRESS 14 while the store circuit is open,
      // COORDINATOR_NOT_AVAILABLE 15), not dropped connections.
      const retriable = [7, 14, 15];
      expect(Object.keys(checker.stats.errors).map(Number)).toSatisfy((codes: number[]) =>
        codes.every((code) => retriable.includes(code)),
      );
      expect(retriable.reduce((n, code) => n + (duringDown[code] ?? 0), 0)).toBeGreaterThan(0);
      expect(checker.stats.unanswered).toBe(0);
    } finally {
      await checker.stop();
      await proxy.stop('SIGKILL');
      await store?.close();
    }
  });
});

describe('a client that sends Fetch requests and never reads', () => {
  test("the proxy's RSS stays bounded and another client's round trips go on", async () => {
    await ensureBuilt();
    const topic = uniqueName('stalled');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    // 16 MB in the partition: every Fetch below can be answered with 1 MB.
    const kafka = new Kafka({
      clientId: 'reliability-big',
      brokers: [brokerBootstrap],
      logLevel: logLevel.NOTHING,
    });
    const producer = kafka.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    const value = Buffer.alloc(100 * 1024, 7);
    for (let i = 0; i < 20; i++) {
      // 800 KB per request: under the broker's 1 MB message.max.bytes.
      await producer.send({ topic, acks: -1, messages: Array.from({ length: 8 }, () => ({ value })) });
    }
    await producer.disconnect();

    const proxy = await spawnProxy(['--bootstrap-server', brokerBootstrap, '--store', 'memory://']);
    const pid = proxy.child.pid!;
    const stalled: RawClient[] = [];
    const other = await RawClient.connect(proxy.bootstrap);
    let correlation = 1;
    const roundTrip = async () => {
      const t0 = performance.now();
      const md = await other.request<MetadataResponse>(
        ApiKey.Metadata,
        12,
        correlation++,
        metadataRequestBody([topic]),
      );
      expect(md.topics[0]?.errorCode).toBe(0);
      expect(await commitOnce(other, `${topic}-g`, topic, 1, BigInt(correlation))).toEqual([0]);
      return performance.now() - t0;
    };
    const measure = async (n: number) => {
      const times: number[] = [];
      for (let i = 0; i < n; i++) times.push(await roundTrip());
      times.sort((a, b) => a - b);
      return { p50: times[Math.floor(n / 2)]!, p99: times[Math.floor(n * 0.99)]!, max: times[n - 1]! };
    };
    try {
      await measure(20); // warm-up
      const baseline = await measure(200);
      const rssBefore = rssOf(pid);
      // 4 connections x 300 pipelined Fetch requests of up to 1 MB each: 1.2 GB of answers the
      // clients never read.
      const fetch = (correlationId: number) =>
        encodeRequestFrame(
          { apiKey: ApiKey.Fetch, apiVersion: 11, correlationId, clientId: 'stalled' },
          {
            ...defaultFetchRequest(),
            maxWaitMs: 100,
            minBytes: 1,
            maxBytes: 1024 * 1024,
            topics: [
              {
                topic,
                topicId: 'AAAAAAAAAAAAAAAAAAAAAA',
                partitions: [
                  {
                    partition: 0,
                    currentLeaderEpoch: -1,
                    fetchOffset: 0n,
                    lastFetchedEpoch: -1,
                    logStartOffset: -1n,
                    partitionMaxBytes: 1024 * 1024,
                    highWatermark: -1n,
                    replicaDirectoryId: 'AAAAAAAAAAAAAAAAAAAAAA',
                  },
                ],
              },
            ],
          },
        );
      // A reading client gets about 1 MB per such Fetch: the stalled ones are owed that much each.
      const reader = await RawClient.connect(proxy.bootstrap);
      reader.write(fetch(1));
      const [answer] = await reader.read(1);
      reader.close();
      expect(answer!.length).toBeGreaterThan(900 * 1024);
      for (let c = 0; c < 4; c++) {
        const client = await RawClient.connect(proxy.bootstrap);
        client.socket.pause(); // never read: the kernel buffers fill, then the proxy must hold back
        client.write(Buffer.concat(Array.from({ length: 300 }, (_, i) => fetch(i + 1))));
        stalled.push(client);
      }
      await sleep(2_000);
      const rss: number[] = [];
      const during = await measure(200);
      for (let i = 0; i < 6; i++) {
        rss.push(rssOf(pid));
        await sleep(300);
      }
      const mb = (n: number) => (n / 1024 / 1024).toFixed(0);
      console.log(
        `[faults] stalled readers: proxy VmRSS ${mb(rssBefore)} MB before, ${rss.map(mb).join(' ')} MB while 4 clients ` +
          `left 1,200 x 1 MB Fetch answers unread; other client round trip (Metadata + OffsetCommit) ` +
          `p50/p99/max ${baseline.p50.toFixed(1)}/${baseline.p99.toFixed(1)}/${baseline.max.toFixed(1)} ms before, ` +
          `${during.p50.toFixed(1)}/${during.p99.toFixed(1)}/${during.max.toFixed(1)} ms during`,
      );
      expect(Math.max(...rss) - rssBefore).toBeLessThan(150 * 1024 * 1024);
      // The other client's 200 round trips were all answered while the 4 readers stalled (a read
      // of more than 10 s fails the test): they do not wait behind what the stalled readers are
      // owed. Their times are logged above, not asserted: speed belongs to the benchmarks.
      // The proxy process is still alive.
      expect(proxy.child.exitCode).toBe(null);
    } finally {
      for (const c of stalled) c.close();
      other.close();
      await proxy.stop('SIGKILL');
    }
  });
});
