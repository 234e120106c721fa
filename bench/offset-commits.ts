/**
 * Offset commit throughput and latency, side by side in one run: the broker's own group
 * coordinator, and the proxy on each store (embedded, Redis, ZooKeeper), all on this machine.
 *
 *   npx tsx bench/offset-commits.ts [--seconds 10] [--rounds 3] [--connections 32] [--groups 64] [--partitions 100]
 *     [--only <regex of proxy targets>] [--cpu-prof <dir>]
 *
 * Each connection is a closed loop: one OffsetCommit of `partitions` partitions at a time, for
 * groups owned by that connection (admin-style commits, generation -1, as tools and assign()
 * consumers send; the same request for every target). Reports commits/s, partition-offsets/s and
 * p50/p99/max latency. Real components from the test bed: Kafka 4.4.0 (single broker), redis-server
 * with AOF appendfsync always, ZooKeeper.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiKey } from '../protocol/messages/index.js';
import { defaultOffsetCommitRequest } from '../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../protocol/messages/offset-commit-response.js';
import { startKafka } from '../test/bed/kafka.js';
import { startRedis } from '../test/bed/redis.js';
import { startZooKeeper } from '../test/bed/zookeeper.js';
import { ensureBuilt, spawnProxy } from '../test/harness/proxy.js';
import { RawClient } from '../test/harness/raw-client.js';
import { createTopics } from '../test/bed/clients/kafkajs.js';
import { cpuMs } from './process-stats.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const SECONDS = arg('seconds', 10);
const CONNECTIONS = arg('connections', 32);
const GROUPS = arg('groups', 64);
const PARTITIONS = arg('partitions', 100);
const ROUNDS = arg('rounds', 3);
const TOPIC = 'bench-commits';
const ONLY = (() => {
  const i = process.argv.indexOf('--only');
  return i >= 0 ? new RegExp(process.argv[i + 1]!, 'i') : null;
})();
const CPU_PROF = (() => {
  const i = process.argv.indexOf('--cpu-prof');
  return i >= 0 ? path.resolve(process.argv[i + 1]!) : null;
})();

/** The pid listening on a local TCP port (the broker runs under the bed's wrapper). */
function pidOnPort(hostPort: string): number | undefined {
  const port = hostPort.split(',')[0]!.split(':').at(-1);
  const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
  const m = /pid=(\d+)/.exec(out);
  return m ? Number(m[1]) : undefined;
}

interface Result {
  target: string;
  commits: number;
  errors: number;
  latenciesMs: number[];
  seconds: number;
  /** CPU ms spent during the measured run by the proxy, the store (or broker) and this load generator. */
  cpu: { proxy: number; backend: number; loadgen: number };
}

function body(group: string, offset: bigint): unknown {
  return {
    ...defaultOffsetCommitRequest(),
    groupId: group,
    generationIdOrMemberEpoch: -1,
    memberId: '',
    topics: [
      {
        name: TOPIC,
        partitions: Array.from({ length: PARTITIONS }, (_, p) => ({
          partitionIndex: p,
          committedOffset: offset,
          committedLeaderEpoch: -1,
          commitTimestamp: -1n,
          committedMetadata: '',
        })),
      },
    ],
  };
}

async function run(
  target: string,
  bootstrap: string,
  runId: string,
  pids: { proxy?: number; backend?: number },
): Promise<Result> {
  const clients = await Promise.all(Array.from({ length: CONNECTIONS }, () => RawClient.connect(bootstrap)));
  const latencies: number[] = [];
  let commits = 0;
  let errors = 0;
  let correlation = 1;
  const warmupEnd = Date.now() + 1000;
  const end = warmupEnd + SECONDS * 1000;
  let cpuStart = { proxy: NaN, backend: NaN, loadgen: NaN };
  const sampleCpu = () => ({
    proxy: cpuMs(pids.proxy),
    backend: cpuMs(pids.backend),
    loadgen: process.cpuUsage().user / 1000 + process.cpuUsage().system / 1000,
  });
  const warmupTimer = setTimeout(() => (cpuStart = sampleCpu()), warmupEnd - Date.now());
  await Promise.all(
    clients.map(async (client, c) => {
      let offset = 1n;
      let g = 0;
      while (Date.now() < end) {
        const group = `${runId}-${c}-${g++ % Math.max(1, Math.floor(GROUPS / CONNECTIONS))}`;
        const started = performance.now();
        const response = await client.request<OffsetCommitResponse>(
          ApiKey.OffsetCommit,
          8,
          correlation++,
          body(group, offset++),
        );
        const ms = performance.now() - started;
        if (Date.now() < warmupEnd) continue;
        if (response.topics.some((t) => t.partitions.some((p) => p.errorCode !== 0))) errors++;
        else commits++;
        latencies.push(ms);
      }
    }),
  );
  clearTimeout(warmupTimer);
  const cpuEnd = sampleCpu();
  for (const client of clients) client.close();
  const cpu = {
    proxy: cpuEnd.proxy - cpuStart.proxy,
    backend: cpuEnd.backend - cpuStart.backend,
    loadgen: cpuEnd.loadgen - cpuStart.loadgen,
  };
  return { target, commits, errors, latenciesMs: latencies, seconds: SECONDS, cpu };
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function main(): Promise<void> {
  console.error(`starting Kafka, Redis and ZooKeeper (${os.cpus().length} cores)...`);
  const [kafka, redis, redisEverysec, zk] = await Promise.all([
    startKafka(),
    startRedis({ appendfsync: 'always' }),
    startRedis({ appendfsync: 'everysec' }),
    startZooKeeper(),
  ]);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kop-bench-'));
  const results: Result[] = [];
  try {
    await createTopics({ bootstrap: kafka.bootstrap }, [{ topic: TOPIC, partitions: PARTITIONS }]);
    const brokerPid = pidOnPort(kafka.bootstrap);
    // The proxy runs as its own process (the CLI), as in production, so it does not share a thread
    // with this load generator.
    await ensureBuilt();
    const targets: [string, string[], number | undefined][] = [
      ['broker (native __consumer_offsets)', [], brokerPid],
      ['proxy + embedded (LMDB, fsync)', ['--data-dir', path.join(dir, 'embedded')], undefined],
      ['proxy + memory (no store I/O: the proxy alone)', ['--store', 'memory://'], undefined],
      ['proxy + Redis (AOF always)', ['--store', redis.url], redis.pid],
      ['proxy + Redis (AOF everysec, Redis default)', ['--store', redisEverysec.url], redisEverysec.pid],
      ['proxy + ZooKeeper', ['--store', `zk://${zk.connectString}`], zk.pid],
    ];
    // Every round runs every target, so load from outside the benchmark hits them alike; each
    // target's figures are from its median round (by commits/s).
    const rounds = new Map<string, Result[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [name, flags, backendPid] of targets) {
        if (ONLY && !ONLY.test(name) && flags.length > 0) continue;
        console.error(`round ${round}: ${name}...`);
        const runId = `${name.replace(/\W+/g, '-')}-${round}`;
        let result: Result;
        if (flags.length === 0) {
          result = await run(name, kafka.bootstrap, runId, { backend: backendPid });
        } else {
          const nodeArgs = CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`] : [];
          const proxy = await spawnProxy(['--bootstrap-server', kafka.bootstrap, ...flags], {}, nodeArgs);
          try {
            result = await run(name, proxy.bootstrap, runId, { proxy: proxy.child.pid, backend: backendPid });
          } finally {
            await proxy.stop();
          }
        }
        console.error(`  ${(result.commits / result.seconds).toFixed(0)} commits/s`);
        rounds.set(name, [...(rounds.get(name) ?? []), result]);
      }
    }
    for (const runs of rounds.values()) {
      const sorted = [...runs].sort((a, b) => a.commits - b.commits);
      results.push(sorted[Math.floor((sorted.length - 1) / 2)]!);
    }
  } finally {
    await Promise.allSettled([kafka.stop(), redis.kill(), redisEverysec.kill(), zk.stop()]);
    rmSync(dir, { recursive: true, force: true });
  }

  const native = results[0]!;
  const rate = (r: Result): number => r.commits / r.seconds;
  console.log(
    `\n${CONNECTIONS} connections, ${GROUPS} groups, ${PARTITIONS} partitions per commit, ${SECONDS} s per target and round, ${ROUNDS} rounds (median shown), ${os.cpus().length} cores\n`,
  );
  console.log(
    '| target | commits/s | partition offsets/s | vs broker | p50 ms | p99 ms | max ms | errors | CPU ms per commit: proxy / store or broker / load generator |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  const perCommit = (ms: number, r: Result): string =>
    Number.isNaN(ms) ? '-' : (ms / Math.max(1, r.commits)).toFixed(3);
  for (const r of results) {
    const sorted = [...r.latenciesMs].sort((a, b) => a - b);
    console.log(
      `| ${r.target} | ${rate(r).toFixed(0)} | ${(rate(r) * PARTITIONS).toFixed(0)} | ${(rate(r) / rate(native)).toFixed(2)}x | ${pct(sorted, 50).toFixed(2)} | ${pct(sorted, 99).toFixed(2)} | ${(sorted.at(-1) ?? NaN).toFixed(2)} | ${r.errors} | ${perCommit(r.cpu.proxy, r)} / ${perCommit(r.cpu.backend, r)} / ${perCommit(r.cpu.loadgen, r)} |`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
