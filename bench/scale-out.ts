/**
 * How the proxy scales out: 1, 2 and 3 proxy processes over one Redis and over a 3-master Redis
 * Cluster, beside the broker's own group coordinator, in one run. Reports commits/s and the CPU
 * each proxy process and each store process spent per commit, then derives the cores a deployment
 * needs for a target rate of partition commits per second from those measured costs.
 *
 *   npx tsx bench/scale-out.ts [--seconds 10] [--rounds 3] [--connections 48] [--groups 96]
 *     [--partitions 100] [--appendfsync everysec|always] [--target 1000000]
 *
 * The machine has few cores, so the rates say little about a real deployment: every process here
 * shares them with the others and with the load generator. What carries over is the CPU per
 * commit of each process, and whether it stays flat as processes are added (no coordination cost
 * between proxies, keys spread over the Cluster's masters). Real components from the test bed:
 * Kafka 4.4.0 (single broker), redis-server standalone and Cluster.
 */
import os from 'node:os';
import { startKafka } from '../test/bed/kafka.js';
import { startRedis, startRedisCluster } from '../test/bed/redis.js';
import { createTopics } from '../test/bed/clients/kafkajs.js';
import { ensureBuilt, spawnProxy } from '../test/harness/proxy.js';
import { percentile, runCommitLoad } from './commit-load.js';
import type { CommitLoadResult } from './commit-load.js';
import { cpuMs, pidOnPort } from './process-stats.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : fallback;
}

const SECONDS = Number(arg('seconds', '10'));
const ROUNDS = Number(arg('rounds', '3'));
const CONNECTIONS = Number(arg('connections', '48'));
const GROUPS = Number(arg('groups', '96'));
const PARTITIONS = Number(arg('partitions', '100'));
const APPENDFSYNC = arg('appendfsync', 'everysec') as 'everysec' | 'always';
/** Partition commits per second the sizing is derived for. */
const TARGET = Number(arg('target', '1000000'));
const TOPIC = 'bench-scale-out';

interface Case {
  name: string;
  store: 'broker' | 'redis' | 'cluster';
  proxies: number;
}

interface Measured {
  c: Case;
  result: CommitLoadResult;
  /** CPU ms per commit of each proxy process, over the commits that went through it. */
  proxyMs: number[];
  /** CPU ms per second each proxy process spends with no load (timers, metadata refreshes). */
  proxyIdleMsPerS: number[];
  /** CPU ms per commit of each store process (the broker for the broker case). */
  storeMs: number[];
}

async function main(): Promise<void> {
  console.error(`starting Kafka, Redis and a 3-master Redis Cluster (${os.cpus().length} cores)...`);
  const [kafka, redis, cluster] = await Promise.all([
    startKafka(),
    startRedis({ appendfsync: APPENDFSYNC }),
    startRedisCluster({ appendfsync: APPENDFSYNC }),
  ]);
  try {
    await createTopics({ bootstrap: kafka.bootstrap }, [{ topic: TOPIC, partitions: PARTITIONS }]);
    await ensureBuilt();
    const cases: Case[] = [{ name: 'broker (native __consumer_offsets)', store: 'broker', proxies: 0 }];
    for (const store of ['redis', 'cluster'] as const)
      for (const proxies of [1, 2, 3])
        cases.push({
          name: `${proxies} prox${proxies === 1 ? 'y' : 'ies'} + ${store === 'redis' ? 'one Redis' : 'Redis Cluster (3 masters)'}`,
          store,
          proxies,
        });
    const rounds = new Map<string, Measured[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      // Alternate the order so drift on this shared machine does not favour one end of the list.
      for (const c of round % 2 === 0 ? [...cases].reverse() : cases) {
        console.error(`round ${round}: ${c.name}...`);
        const runId = `${c.name.replace(/\W+/g, '-')}-${round}`;
        const storePids =
          c.store === 'broker'
            ? [pidOnPort(kafka.bootstrap)]
            : c.store === 'redis'
              ? [redis.pid]
              : cluster.members.map((m) => m.pid);
        const storeUrl = c.store === 'redis' ? redis.url : cluster.url;
        const proxies = await Promise.all(
          Array.from({ length: c.proxies }, () =>
            spawnProxy(['--bootstrap-server', kafka.bootstrap, '--store', storeUrl]),
          ),
        );
        try {
          const idle = await idleCpu(proxies.map((p) => p.child.pid));
          const processes: Record<string, number | undefined> = {};
          proxies.forEach((p, i) => (processes[`proxy${i}`] = p.child.pid));
          storePids.forEach((pid, i) => (processes[`store${i}`] = pid));
          const result = await runCommitLoad({
            bootstraps: proxies.length > 0 ? proxies.map((p) => p.bootstrap) : [kafka.bootstrap],
            runId,
            connections: CONNECTIONS,
            groups: GROUPS,
            topic: TOPIC,
            partitions: PARTITIONS,
            seconds: SECONDS,
            processes,
          });
          const per = (ms: number | undefined): number => (ms ?? NaN) / Math.max(1, result.commits);
          const m: Measured = {
            c,
            result,
            proxyMs: proxies.map(
              (_, i) => (result.cpuMs[`proxy${i}`] ?? NaN) / Math.max(1, result.commitsVia[i]!),
            ),
            proxyIdleMsPerS: idle,
            storeMs: storePids.map((_, i) => per(result.cpuMs[`store${i}`])),
          };
          console.error(
            `  ${(result.commits / SECONDS).toFixed(0)} commits/s, ${result.errors} errors; CPU ms per commit: proxies ${fmt(m.proxyMs)}, store ${fmt(m.storeMs)}`,
          );
          rounds.set(c.name, [...(rounds.get(c.name) ?? []), m]);
        } finally {
          await Promise.all(proxies.map((p) => p.stop()));
        }
      }
    }
    report([...rounds.values()].map(median));
  } finally {
    await Promise.allSettled([kafka.stop(), redis.kill(), cluster.stop()]);
  }
}

/** CPU ms per second of each process over 2 s with no load. */
async function idleCpu(pids: (number | undefined)[]): Promise<number[]> {
  const before = pids.map(cpuMs);
  await new Promise((r) => setTimeout(r, 2000));
  return pids.map((pid, i) => (cpuMs(pid) - before[i]!) / 2);
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
const fmt = (xs: number[]): string => xs.map((x) => x.toFixed(3)).join(' + ');

/** The round with the median rate. */
function median(runs: Measured[]): Measured {
  const sorted = [...runs].sort((a, b) => a.result.commits - b.result.commits);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

function report(measured: Measured[]): void {
  const commitsPerSecond = TARGET / PARTITIONS;
  const cores = (msPerCommit: number): string => ((msPerCommit * commitsPerSecond) / 1000).toFixed(1);
  console.log(
    `\n${CONNECTIONS} connections, ${GROUPS} groups, ${PARTITIONS} partitions per commit, Redis AOF appendfsync ${APPENDFSYNC}, ${SECONDS} s per case and round, ${ROUNDS} rounds (median shown), ${os.cpus().length} cores`,
  );
  console.log(
    `Cores for ${TARGET.toLocaleString('en')} partition commits/s = ${commitsPerSecond.toLocaleString('en')} commits/s x CPU ms per commit / 1000.\n`,
  );
  console.log(
    '| case | commits/s | p50 ms | p99 ms | errors | CPU ms per commit, each proxy (its own commits) | each proxy idle, ms/s | each store process (broker), per commit of all | all proxies | all store | proxy cores needed | store cores needed |',
  );
  console.log('|---|---:|---:|---:|---:|---|---|---|---:|---:|---:|---:|');
  for (const { c, result, proxyMs, proxyIdleMsPerS, storeMs } of measured) {
    const sorted = [...result.latenciesMs].sort((a, b) => a - b);
    // The fleet's CPU per commit: each proxy's cost weighted by its share of the commits.
    const proxyTotal = sum(proxyMs.map((ms, i) => ms * result.commitsVia[i]!)) / Math.max(1, result.commits);
    const storeTotal = sum(storeMs);
    console.log(
      `| ${c.name} | ${(result.commits / result.seconds).toFixed(0)} | ${percentile(sorted, 50).toFixed(2)} | ${percentile(sorted, 99).toFixed(2)} | ${result.errors} | ${proxyMs.length ? fmt(proxyMs) : '-'} | ${proxyIdleMsPerS.length ? proxyIdleMsPerS.map((x) => x.toFixed(0)).join(' + ') : '-'} | ${fmt(storeMs)} | ${proxyMs.length ? proxyTotal.toFixed(3) : '-'} | ${storeTotal.toFixed(3)} | ${proxyMs.length ? cores(proxyTotal) : '-'} | ${cores(storeTotal)} |`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
