/**
 * Offset store benchmark (not a test): `npx tsx bench/stores.ts [seconds-per-run]`.
 *
 * Every caller is one consumer group member committing 100 partitions at a time (fenced: the
 * group has a Stable generation, so the guard runs), in a closed loop. Runs each store with 1
 * and with 32 concurrent callers (each on its own group), and prints commits/s, partitions/s and
 * latency percentiles as a Markdown table.
 *
 * Redis (AOF appendfsync always) and ZooKeeper are started through the test bed unless
 * KOP_BENCH_REDIS_URL / KOP_BENCH_ZK_URL name running ones. The embedded store writes to a
 * temporary directory on the machine's disk.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../backends/open-store.js';
import type { OffsetStore, OffsetWrite } from '../backends/store.js';
import { startRedis } from '../test/bed/redis.js';
import { startZooKeeper } from '../test/bed/zookeeper.js';

const SECONDS = Number(process.argv[2] ?? 5);
const PARTITIONS = 100;
const CONCURRENCY = [1, 32];

interface Result {
  store: string;
  callers: number;
  commits: number;
  seconds: number;
  latenciesMs: number[];
  errors: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function run(name: string, store: OffsetStore, callers: number): Promise<Result> {
  const tag = `bench-${Date.now().toString(36)}-${callers}`;
  const groups = Array.from({ length: callers }, (_, i) => `${tag}-g${i}`);
  for (const g of groups) {
    await store.updateGroup(g, {
      kind: 'joined',
      generationId: 1,
      memberId: 'm',
      groupInstanceId: null,
      members: [{ memberId: 'm', groupInstanceId: null }],
    });
    await store.updateGroup(g, { kind: 'synced', generationId: 1, memberId: 'm' });
  }
  const latenciesMs: number[] = [];
  let errors = 0;
  let seq = 0;
  const end = Date.now() + SECONDS * 1000;
  const t0 = performance.now();
  await Promise.all(
    groups.map(async (group) => {
      for (let offset = 1n; Date.now() < end; offset++) {
        const writes: OffsetWrite[] = [];
        for (let p = 0; p < PARTITIONS; p++) {
          writes.push({
            topic: 'bench-topic',
            partition: p,
            offset,
            leaderEpoch: 3,
            metadata: '',
            commitTimestamp: BigInt(Date.now()),
            expireTimestamp: -1n,
          });
        }
        const start = performance.now();
        try {
          const outcome = await store.commit({
            group,
            identity: {
              generationIdOrMemberEpoch: 1,
              memberId: 'm',
              groupInstanceId: null,
              requestVersion: 9,
            },
            writes,
            requestId: `${group}-${seq++}`,
          });
          if (outcome.status !== 'ok') throw new Error(`unexpected outcome ${outcome.status}`);
          latenciesMs.push(performance.now() - start);
        } catch {
          errors++;
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  for (const g of groups) await store.deleteGroup(g);
  return {
    store: name,
    callers,
    commits: latenciesMs.length,
    seconds,
    latenciesMs: latenciesMs.sort((a, b) => a - b),
    errors,
  };
}

async function main(): Promise<void> {
  const stops: (() => Promise<void>)[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'kop-bench-stores-'));
  stops.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  try {
    let redisUrl = process.env['KOP_BENCH_REDIS_URL'];
    if (redisUrl === undefined) {
      const redis = await startRedis({ appendfsync: 'always' });
      stops.push(() => redis.kill());
      redisUrl = redis.url;
    }
    let zkUrl = process.env['KOP_BENCH_ZK_URL'];
    if (zkUrl === undefined) {
      const zk = await startZooKeeper();
      stops.push(() => zk.stop());
      zkUrl = `${zk.url}/bench`;
    }
    const stores: [string, string | undefined][] = [
      ['memory', 'memory://'],
      ['embedded (LMDB, fsync)', undefined],
      ['redis (AOF always)', redisUrl],
      ['zookeeper (1 server)', zkUrl],
    ];
    const results: Result[] = [];
    for (const [name, url] of stores) {
      const store = await openStore(url, { dataDir, operationTimeoutMs: 30_000 });
      try {
        await store.ping();
        for (const callers of CONCURRENCY) {
          const r = await run(name, store, callers);
          results.push(r);
          console.error(`${name} x${callers}: ${(r.commits / r.seconds).toFixed(0)} commits/s`);
        }
      } finally {
        await store.close();
      }
    }
    console.log(
      `\n${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), Node ${process.version}, ${SECONDS} s per run, ${PARTITIONS} partitions per commit\n`,
    );
    console.log('| store | callers | commits/s | partitions/s | p50 ms | p99 ms | max ms | errors |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of results) {
      const rate = r.commits / r.seconds;
      console.log(
        `| ${r.store} | ${r.callers} | ${rate.toFixed(0)} | ${(rate * PARTITIONS).toFixed(0)} | ${percentile(r.latenciesMs, 50).toFixed(2)} | ${percentile(r.latenciesMs, 99).toFixed(2)} | ${(r.latenciesMs.at(-1) ?? NaN).toFixed(2)} | ${r.errors} |`,
      );
    }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
}

await main();
