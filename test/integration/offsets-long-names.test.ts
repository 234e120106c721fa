// Long group ids through the real CLI proxy, on every store. Go clients' own test suites name their
// groups with 64-character ids; the embedded store of earlier releases then hung the whole proxy
// (the lag collector's group listing never ended), answered whole-group OffsetFetch with nothing
// and kept a group's offsets after DeleteGroups. Here a kafkajs group with a 64-byte and a
// 300-byte id commits, is fetched whole (OffsetFetch with topics null, as sarama, franz-go and
// `offsets get` send), resumes after a proxy restart, is deleted with DeleteGroups, and starts from
// nothing when it comes back; /healthz answers all along while the lag collector lists the groups.
//
// Then the embedded store with 20,000 groups of 300-character names: /healthz keeps answering
// while the lag collector lists every group, an in-process listing (GET /admin/groups) and an
// `offsets export` run.
//
// Last, a differential check: the same offset conversation (commits in v8 and v2, fetches by
// partition and of the whole group in v1, v5 and v8, OffsetDelete) with the empty group id and
// ids of 64, 300 and 32,767 bytes, once with the broker and once with the proxy: same answers.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import { defaultOffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetDeleteRequest } from '../../protocol/messages/offset-delete-request.js';
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import { createTopics, kafkajsClient } from '../bed/clients/kafkajs.js';
import { expectExactlyRecords, uniqueName } from '../bed/clients/scenarios.js';
import { startRedisCluster } from '../bed/redis.js';
import type { RedisCluster } from '../bed/redis.js';
import { RawClient } from '../harness/raw-client.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';

const brokerBootstrap = inject('kafkaBootstrap');
const BIN = path.resolve('bin/kafka-offset-proxy.js');
let correlation = 1;

/** A group id of exactly `bytes` UTF-8 bytes, unique to this run, with a multi-byte character in it. */
function groupIdOfBytes(bytes: number, label: string): string {
  const head = `${uniqueName(label)}-é-`;
  const id = head + 'g'.repeat(bytes - Buffer.byteLength(head));
  expect(Buffer.byteLength(id)).toBe(bytes);
  return id;
}

function httpPortOf(proxy: ProxyProcess): number {
  for (const line of proxy.output().split('\n')) {
    if (!line.includes('"http listening"')) continue;
    return (JSON.parse(line) as { port: number }).port;
  }
  throw new Error(`no "http listening" line:\n${proxy.output()}`);
}

async function startCli(
  store: string[],
  extra: string[] = [],
): Promise<{ proxy: ProxyProcess; http: number }> {
  await ensureBuilt();
  const proxy = await spawnProxy([
    '--bootstrap-server',
    brokerBootstrap,
    ...store,
    '--http',
    '127.0.0.1:0',
    '--lag-interval-ms',
    '200',
    ...extra,
  ]);
  for (let i = 0; !proxy.output().includes('"http listening"'); i++) {
    if (i > 200) throw new Error(`no HTTP endpoint:\n${proxy.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proxy, http: httpPortOf(proxy) };
}

/** Polls /healthz every `everyMs` until stopped; returns each answer's latency (a failure throws). */
function pollHealth(port: number, everyMs = 50): { stop(): Promise<number[]> } {
  const latencies: number[] = [];
  let failure: unknown;
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      try {
        const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(10_000) });
        if (res.status !== 200) throw new Error(`/healthz answered ${res.status}`);
        await res.arrayBuffer();
      } catch (err) {
        failure ??= err;
        return;
      }
      latencies.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      if (failure) throw failure;
      return latencies;
    },
  };
}

/** The group's committed offsets by a whole-group OffsetFetch (topics null) in v5 and v8. */
async function wholeGroup(bootstrap: string, group: string): Promise<Map<string, bigint>> {
  const client = await RawClient.connect(bootstrap);
  try {
    const v8 = await client.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 8, correlation++, {
      ...defaultOffsetFetchRequest(),
      groups: [{ groupId: group, memberId: null, memberEpoch: -1, topics: null }],
    });
    const v5 = await client.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 5, correlation++, {
      ...defaultOffsetFetchRequest(),
      groupId: group,
      topics: null,
    });
    expect(v8.groups[0]!.errorCode).toBe(0);
    expect(v5.errorCode).toBe(0);
    const out = new Map<string, bigint>();
    for (const t of v8.groups[0]!.topics)
      for (const p of t.partitions) out.set(`${t.name}-${p.partitionIndex}`, p.committedOffset);
    const old = new Map<string, bigint>();
    for (const t of v5.topics)
      for (const p of t.partitions) old.set(`${t.name}-${p.partitionIndex}`, p.committedOffset);
    expect(old).toEqual(out);
    return out;
  } finally {
    client.close();
  }
}

async function deleteGroups(bootstrap: string, groups: string[]): Promise<void> {
  const admin = new Kafka({
    clientId: 'long-names-admin',
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    await admin.deleteGroups(groups);
  } finally {
    await admin.disconnect();
  }
}

const COUNT = 300;
const FIRST = 120;

/** The whole life of one long-named group through a proxy on `store` (restarted once). */
async function groupLifecycle(storeArgs: string[]): Promise<void> {
  const topic = uniqueName('long-names');
  await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 3, replicationFactor: 1 }]);
  const groups = [groupIdOfBytes(64, 'g64'), groupIdOfBytes(300, 'g300')];
  let { proxy, http } = await startCli(storeArgs);
  let health = pollHealth(http);
  try {
    const target = { bootstrap: proxy.bootstrap };
    await kafkajsClient.produce(target, { topic, count: COUNT });
    const firsts = await Promise.all(
      groups.map((group) => kafkajsClient.consume(target, { topic, group, max: FIRST })),
    );
    for (const [i, group] of groups.entries()) {
      expect(firsts[i]!.timedOut).toBe(false);
      const whole = await wholeGroup(proxy.bootstrap, group);
      expect(
        [...whole.values()].reduce((a, b) => a + b, 0n),
        `whole-group fetch of ${group.length}`,
      ).toBe(BigInt(FIRST));
    }

    // Restart: the groups resume where they committed.
    expect(await health.stop()).not.toHaveLength(0);
    expect(await proxy.stop()).toBe(0);
    ({ proxy, http } = await startCli(storeArgs));
    health = pollHealth(http);
    const resumed = { bootstrap: proxy.bootstrap };
    const seconds = await Promise.all(
      groups.map((group) => kafkajsClient.consume(resumed, { topic, group, max: COUNT - FIRST })),
    );
    for (const [i] of groups.entries()) {
      expect(seconds[i]!.timedOut).toBe(false);
      expectExactlyRecords([...firsts[i]!.records, ...seconds[i]!.records], 0, COUNT);
    }

    // DeleteGroups: the offsets go with the group; re-created, it starts from nothing.
    await deleteGroups(proxy.bootstrap, groups);
    for (const group of groups) expect(await wholeGroup(proxy.bootstrap, group)).toEqual(new Map());
    const again = await Promise.all(
      groups.map((group) => kafkajsClient.consume(resumed, { topic, group, max: COUNT })),
    );
    for (const r of again) {
      expect(r.timedOut).toBe(false);
      expectExactlyRecords(r.records, 0, COUNT);
    }
    const latencies = await health.stop();
    expect(latencies.length).toBeGreaterThan(0);
  } finally {
    await health.stop().catch(() => undefined);
    await proxy.stop();
  }
}

describe('64- and 300-byte group ids through the CLI proxy', () => {
  const dirs: string[] = [];
  let cluster: RedisCluster | undefined;
  afterAll(async () => {
    await cluster?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const dataDir = (): string => {
    const d = mkdtempSync(path.join(os.tmpdir(), 'kop-long-names-'));
    dirs.push(d);
    return d;
  };

  test('embedded store', () => groupLifecycle(['--data-dir', dataDir()]));
  test('Redis standalone', () =>
    groupLifecycle(['--store', `${inject('redisUrl')}?prefix=${uniqueName('ln')}`]));
  test('Redis Cluster', async () => {
    cluster = await startRedisCluster();
    await groupLifecycle(['--store', cluster.url]);
  });
  test('ZooKeeper', () => groupLifecycle(['--store', `zk://${inject('zkConnect')}/${uniqueName('ln')}`]));
});

describe('embedded store with 20,000 groups of 300-character names', () => {
  const GROUPS = 20_000;
  let dir: string;
  let topic: string;
  const names: string[] = [];
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-many-groups-'));
    topic = uniqueName('many-groups');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1, replicationFactor: 1 }]);
    const store = new EmbeddedStore({ dataDir: dir });
    for (let i = 0; i < GROUPS; i++) names.push(`${String(i).padStart(5, '0')}-${'n'.repeat(294)}`);
    // Commits issued in one turn share one LMDB transaction: 20 fsyncs, not 20,000.
    for (let i = 0; i < GROUPS; i += 1000) {
      await Promise.all(
        names.slice(i, i + 1000).map((group, j) =>
          store.commit({
            group,
            requestId: `seed-${i + j}`,
            writes: [
              {
                topic,
                partition: 0,
                offset: 0n,
                leaderEpoch: -1,
                metadata: '',
                commitTimestamp: BigInt(Date.now()),
                expireTimestamp: -1n,
              },
            ],
          }),
        ),
      );
    }
    await store.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('/healthz keeps answering while the lag collector, a listing and an export run', async () => {
    // The lag collector lists all 20,000 groups every refresh and reads the 500 it exports (the
    // default --lag-max-groups: series beyond that cost the scrape, not the listing).
    const { proxy, http } = await startCli(['--data-dir', dir]);
    try {
      const health = pollHealth(http, 20);
      const exported = new Promise<number>((resolve, reject) => {
        const child = spawn(process.execPath, [BIN, 'offsets', 'export', '--data-dir', dir], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let lines = 0;
        let err = '';
        child.stdout.on('data', (d: Buffer) => (lines += d.toString().split('\n').length - 1));
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        child.once('exit', (code) =>
          code === 0 ? resolve(lines) : reject(new Error(`export exited ${code}: ${err}`)),
        );
      });
      const listings: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`http://127.0.0.1:${http}/admin/groups`);
        listings.push(((await res.json()) as { groups: string[] }).groups.length);
      }
      expect(await exported).toBe(GROUPS);
      // A few more refreshes over every group, still measured; then the (large) scrape, unmeasured.
      await new Promise((r) => setTimeout(r, 3_000));
      const latencies = (await health.stop()).sort((a, b) => a - b);
      expect(listings).toEqual([GROUPS, GROUPS, GROUPS]);
      const metrics = await (await fetch(`http://127.0.0.1:${http}/metrics`)).text();
      const refreshes = Number(/^kop_lag_refresh_duration_seconds_count (\d+)/m.exec(metrics)?.[1] ?? 0);
      expect(refreshes, 'lag refreshes over every group').toBeGreaterThanOrEqual(2);
      expect(metrics).toMatch(/^kop_lag_refresh_errors_total 0$/m);
      const lagSeries = metrics.split('\n').filter((l) => l.startsWith('kafka_consumergroup_lag_sum{'));
      expect(lagSeries).toHaveLength(500);
      expect(metrics).toMatch(/^kop_lag_groups_truncated 19500$/m);
      // A blocked loop shows as seconds; the bound is generous because the machine is shared (the
      // figures measured on an idle machine are in docs/reliability.md).
      const median = latencies[Math.floor(latencies.length / 2)]!;
      console.log(
        `[many groups] /healthz: ${latencies.length} answers, median ${median.toFixed(1)} ms, ` +
          `p99 ${latencies[Math.floor(latencies.length * 0.99)]!.toFixed(1)} ms, max ${latencies.at(-1)!.toFixed(1)} ms`,
      );
      expect(median).toBeLessThan(100);
      expect(latencies.at(-1)!).toBeLessThan(2_000);
    } finally {
      expect(await proxy.stop()).toBe(0);
    }
  });
});

/**
 * One scripted sequence of offset requests for `group` on `topic`, the answers reduced to what a
 * client reads (error codes and offsets of `topic` only: the broker's "" group may hold others).
 */
async function offsetConversation(bootstrap: string, group: string, topic: string): Promise<unknown[]> {
  const c = await RawClient.connect(bootstrap);
  const mine = <T extends { name: string }>(ts: T[]): T[] => ts.filter((t) => t.name === topic);
  // The order of partitions in an all-topics answer is the coordinator's (a hash map's): not compared.
  const byIndex = <T extends { partitionIndex: number }>(ps: T[]): T[] =>
    [...ps].sort((a, b) => a.partitionIndex - b.partitionIndex);
  const commit = async (version: number, offsets: bigint[]) => {
    const r = await c.request<OffsetCommitResponse>(ApiKey.OffsetCommit, version, correlation++, {
      ...defaultOffsetCommitRequest(),
      groupId: group,
      generationIdOrMemberEpoch: -1,
      memberId: '',
      topics: [
        {
          name: topic,
          partitions: offsets.map((o, p) => ({
            partitionIndex: p,
            committedOffset: o,
            committedLeaderEpoch: -1,
            commitTimestamp: -1n,
            committedMetadata: `m${o}`,
          })),
        },
      ],
    });
    return r.topics.map((t) => t.partitions.map((p) => [p.partitionIndex, p.errorCode]));
  };
  const fetchAll = async (version: 5 | 8) => {
    if (version === 8) {
      const r = await c.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 8, correlation++, {
        ...defaultOffsetFetchRequest(),
        groups: [{ groupId: group, memberId: null, memberEpoch: -1, topics: null }],
      });
      const g = r.groups[0]!;
      return [
        g.errorCode,
        mine(g.topics).map((t) =>
          byIndex(t.partitions).map((p) => [p.partitionIndex, p.committedOffset, p.metadata, p.errorCode]),
        ),
      ];
    }
    const r = await c.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 5, correlation++, {
      ...defaultOffsetFetchRequest(),
      groupId: group,
      topics: null,
    });
    return [
      r.errorCode,
      mine(r.topics).map((t) =>
        byIndex(t.partitions).map((p) => [p.partitionIndex, p.committedOffset, p.metadata, p.errorCode]),
      ),
    ];
  };
  const fetchNamed = async () => {
    const r = await c.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 1, correlation++, {
      ...defaultOffsetFetchRequest(),
      groupId: group,
      topics: [{ name: topic, partitionIndexes: [0, 1, 2] }],
    });
    return r.topics.map((t) =>
      t.partitions.map((p) => [p.partitionIndex, p.committedOffset, p.metadata, p.errorCode]),
    );
  };
  const offsetDelete = async () => {
    const r = await c.request<OffsetDeleteResponse>(ApiKey.OffsetDelete, 0, correlation++, {
      ...defaultOffsetDeleteRequest(),
      groupId: group,
      topics: [{ name: topic, partitions: [{ partitionIndex: 0 }] }],
    });
    return [r.errorCode, r.topics.map((t) => t.partitions.map((p) => [p.partitionIndex, p.errorCode]))];
  };
  try {
    return [
      await fetchAll(8),
      await commit(8, [5n, 6n]),
      await fetchNamed(),
      await commit(2, [7n, 8n, 9n]),
      await fetchAll(5),
      await fetchAll(8),
      await offsetDelete(),
      await fetchAll(8),
      await fetchNamed(),
    ];
  } finally {
    c.close();
  }
}

describe('differential: group ids of every length, the broker and the proxy answer alike', () => {
  let dir: string;
  let store: EmbeddedStore;
  let proxy: Awaited<ReturnType<typeof startOffsetProxy>>;
  let topic: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-names-diff-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(brokerBootstrap, store);
    topic = uniqueName('names-diff');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 3, replicationFactor: 1 }]);
  });
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const cases: [string, (run: string) => string][] = [
    ['the empty group id', () => ''],
    ['a 64-byte group id', (run) => groupIdOfBytes(64, run)],
    ['a 300-byte group id', (run) => groupIdOfBytes(300, run)],
    ['a group id with NUL, braces and slashes', (run) => `${run}\u0000{g}/%2F:x`],
    ['a 32,767-byte group id, the longest Kafka string', (run) => groupIdOfBytes(32_767, run)],
  ];
  test.each(cases)('%s', async (_label, idFor) => {
    const direct = await offsetConversation(brokerBootstrap, idFor(uniqueName('d')), topic);
    const proxied = await offsetConversation(proxy.bootstrap, idFor(uniqueName('p')), topic);
    expect(proxied).toEqual(direct);
  });
});
