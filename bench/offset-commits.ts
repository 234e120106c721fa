/**
 * Offset commit throughput and latency, side by side in one run: the broker's own group
 * coordinator, and the proxy on each store (embedded, Redis, ZooKeeper), all on this machine.
 *
 *   npx tsx bench/offset-commits.ts [--seconds 10] [--rounds 3] [--connections 32] [--groups 64] [--partitions 100]
 *     [--only <regex of proxy targets>] [--cpu-prof <dir>] [--redis-stats] [--baseline <checkout>]
 *
 * Each connection is a closed loop: one OffsetCommit of `partitions` partitions at a time, for
 * groups owned by that connection (admin-style commits, generation -1, as tools and assign()
 * consumers send; the same request for every target). Reports commits/s, partition-offsets/s and
 * p50/p99/max latency. Real components from the test bed: Kafka 4.4.0 (single broker), redis-server
 * with AOF appendfsync always and everysec, Valkey 8 with always and with everysec plus WAITAOF,
 * ZooKeeper.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startKafka } from '../test/bed/kafka.js';
import { startRedis } from '../test/bed/redis.js';
import type { RedisServer } from '../test/bed/redis.js';
import { startZooKeeper } from '../test/bed/zookeeper.js';
import { redisCommand } from '../test/bed/resp.js';
import { ensureBuilt, spawnProxy } from '../test/harness/proxy.js';
import { createTopics } from '../test/bed/clients/kafkajs.js';
import { cpuByThreadMs, cpuMs, cpuSplitMs, pidOnPort } from './process-stats.js';
import { percentile, runCommitLoad } from './commit-load.js';

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
/**
 * Another checkout of this repository, built (`npm run build` there): its proxy runs on the
 * embedded store, memory and both Redis servers in every round beside this one's, so a change is
 * measured against its base in one run (this machine's speed drifts by tens of percent between
 * runs).
 */
const BASELINE = (() => {
  const i = process.argv.indexOf('--baseline');
  return i >= 0 ? path.resolve(process.argv[i + 1]!) : null;
})();
/** Prints where Redis spent its time per commit (INFO commandstats, scripts' inner commands too). */
const REDIS_STATS = process.argv.includes('--redis-stats');
const CPU_PROF = (() => {
  const i = process.argv.indexOf('--cpu-prof');
  return i >= 0 ? path.resolve(process.argv[i + 1]!) : null;
})();

/** usec spent per command, from INFO commandstats. */
async function commandUsec(
  host: string,
  port: number,
): Promise<Map<string, { calls: number; usec: number }>> {
  const out = await redisCommand(host, port, 'INFO commandstats');
  const stats = new Map<string, { calls: number; usec: number }>();
  for (const m of out.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    stats.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return stats;
}

interface Result {
  target: string;
  commits: number;
  errors: number;
  latenciesMs: number[];
  seconds: number;
  /** CPU ms spent during the measured run by the proxy, the store (or broker) and this load generator. */
  cpu: { proxy: number; backend: number; loadgen: number };
  /** The proxy's part of it in system calls (stime), mostly socket reads and writes. */
  proxySysMs: number;
  /** The proxy's part of it on its event loop (the rest: V8's GC and compiler threads). */
  proxyLoopMs: number;
}

async function run(
  target: string,
  /** Connection c goes to bootstraps[c % length]. */
  bootstraps: string[],
  runId: string,
  pids: { proxies?: number[]; backend?: number | undefined },
): Promise<Result> {
  const proxies = pids.proxies ?? [];
  const load = await runCommitLoad({
    bootstraps,
    runId,
    connections: CONNECTIONS,
    groups: GROUPS,
    topic: TOPIC,
    partitions: PARTITIONS,
    seconds: SECONDS,
    processes: { backend: pids.backend },
    counters: () => ({
      proxy: proxies.length ? sum(proxies.map(cpuMs)) : NaN,
      proxySys: proxies.length ? sum(proxies.map((pid) => cpuSplitMs(pid).sys)) : NaN,
      proxyLoop: proxies.length
        ? sum(proxies.map((pid) => cpuByThreadMs(pid).get('event loop') ?? NaN))
        : NaN,
    }),
  });
  return {
    target,
    commits: load.commits,
    errors: load.errors,
    latenciesMs: load.latenciesMs,
    seconds: SECONDS,
    cpu: { proxy: load.cpuMs['proxy']!, backend: load.cpuMs['backend']!, loadgen: load.cpuMs['loadgen']! },
    proxySysMs: load.cpuMs['proxySys']!,
    proxyLoopMs: load.cpuMs['proxyLoop']!,
  };
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

async function main(): Promise<void> {
  console.error(`starting Kafka, Redis and ZooKeeper (${os.cpus().length} cores)...`);
  const [kafka, redis, redisEverysec, zk, valkey, valkeyEverysec] = await Promise.all([
    startKafka(),
    startRedis({ appendfsync: 'always' }),
    startRedis({ appendfsync: 'everysec' }),
    startZooKeeper(),
    // Valkey 8 has WAITAOF (Redis 7.2's): an fsync per commit without appendfsync always.
    startRedis({ server: 'valkey', appendfsync: 'always' }),
    startRedis({ server: 'valkey', appendfsync: 'everysec' }),
  ]);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kop-bench-'));
  const results: Result[] = [];
  try {
    await createTopics({ bootstrap: kafka.bootstrap }, [{ topic: TOPIC, partitions: PARTITIONS }]);
    const brokerPid = pidOnPort(kafka.bootstrap);
    // The proxy runs as its own process (the CLI), as in production, so it does not share a thread
    // with this load generator.
    await ensureBuilt();
    interface Target {
      name: string;
      /** The proxy's flags; none: the broker itself. */
      flags: string[];
      backendPid?: number | undefined;
      redis?: RedisServer;
      /** Another checkout's CLI (--baseline). */
      bin?: string;
      /** Proxy processes side by side, the connections spread over them (default 1). */
      instances?: number;
    }
    const everysec = ['--store', redisEverysec.url];
    const targets: Target[] = [
      { name: 'broker (native __consumer_offsets)', flags: [], backendPid: brokerPid },
      { name: 'proxy + embedded (LMDB, fsync)', flags: ['--data-dir', path.join(dir, 'embedded')] },
      { name: 'proxy + memory (no store I/O: the proxy alone)', flags: ['--store', 'memory://'] },
      { name: 'proxy + Redis (AOF always)', flags: ['--store', redis.url], backendPid: redis.pid, redis },
      ...(BASELINE
        ? [
            {
              name: `baseline proxy (${BASELINE}) + embedded`,
              flags: ['--data-dir', path.join(dir, 'baseline-embedded')],
              bin: path.join(BASELINE, 'bin/kafka-offset-proxy.js'),
            },
            {
              name: `baseline proxy (${BASELINE}) + memory`,
              flags: ['--store', 'memory://'],
              bin: path.join(BASELINE, 'bin/kafka-offset-proxy.js'),
            },
            {
              name: `baseline proxy (${BASELINE}) + Redis (AOF always)`,
              flags: ['--store', redis.url],
              backendPid: redis.pid,
              redis,
              bin: path.join(BASELINE, 'bin/kafka-offset-proxy.js'),
            },
            {
              name: `baseline proxy (${BASELINE}) + Redis (AOF everysec)`,
              flags: everysec,
              backendPid: redisEverysec.pid,
              redis: redisEverysec,
              bin: path.join(BASELINE, 'bin/kafka-offset-proxy.js'),
            },
          ]
        : []),
      {
        name: 'proxy + Redis (AOF everysec, Redis default)',
        flags: everysec,
        backendPid: redisEverysec.pid,
        redis: redisEverysec,
      },
      {
        name: '2 proxy processes + Redis (AOF everysec)',
        flags: everysec,
        backendPid: redisEverysec.pid,
        redis: redisEverysec,
        instances: 2,
      },
      {
        name: 'proxy + Valkey 8 (AOF always)',
        flags: ['--store', valkey.url],
        backendPid: valkey.pid,
        redis: valkey,
      },
      {
        name: 'proxy + Valkey 8 (AOF everysec, waitAofLocal=1: fsynced before each ack)',
        flags: ['--store', `${valkeyEverysec.url}?waitAofLocal=1&waitTimeoutMs=2000`],
        backendPid: valkeyEverysec.pid,
        redis: valkeyEverysec,
      },
      { name: 'proxy + ZooKeeper', flags: ['--store', `zk://${zk.connectString}`], backendPid: zk.pid },
    ];
    // Every round runs every target, so load from outside the benchmark hits them alike; each
    // target's figures are from its median round (by commits/s). Even rounds run the targets in
    // reverse order: targets that share a Redis leave it more data (request records live 10
    // minutes, and every AOF rewrite writes them all), so a fixed order would favour the first.
    const rounds = new Map<string, Result[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 0 ? [...targets].reverse() : targets;
      for (const { name, flags, backendPid, redis: redisServer, bin, instances = 1 } of order) {
        if (ONLY && !ONLY.test(name) && flags.length > 0) continue;
        console.error(`round ${round}: ${name}...`);
        const runId = `${name.replace(/\W+/g, '-')}-${round}`;
        let result: Result;
        if (flags.length === 0) {
          result = await run(name, [kafka.bootstrap], runId, { backend: backendPid });
        } else {
          const nodeArgs = CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`] : [];
          const proxies = await Promise.all(
            Array.from({ length: instances }, () =>
              spawnProxy(['--bootstrap-server', kafka.bootstrap, ...flags], {}, nodeArgs, bin),
            ),
          );
          try {
            const before =
              REDIS_STATS && redisServer ? await commandUsec(redisServer.host, redisServer.port) : null;
            result = await run(
              name,
              proxies.map((p) => p.bootstrap),
              runId,
              { proxies: proxies.map((p) => p.child.pid!), backend: backendPid },
            );
            if (before && redisServer) {
              const after = await commandUsec(redisServer.host, redisServer.port);
              const per = [...after]
                .map(
                  ([cmd, a]) =>
                    [cmd, (a.usec - (before.get(cmd)?.usec ?? 0)) / Math.max(1, result.commits)] as const,
                )
                .filter(([, us]) => us >= 0.5)
                .sort((x, y) => y[1] - x[1]);
              console.error(
                `  Redis usec per commit: ${per.map(([c, us]) => `${c} ${us.toFixed(1)}`).join(', ')}`,
              );
            }
          } finally {
            await Promise.all(proxies.map((p) => p.stop()));
          }
        }
        const per = (ms: number) => (ms / Math.max(1, result.commits)).toFixed(3);
        console.error(
          `  ${(result.commits / result.seconds).toFixed(0)} commits/s` +
            (Number.isNaN(result.proxySysMs)
              ? ''
              : `; proxy CPU ms per commit ${per(result.cpu.proxy)}, of it in system calls ${per(result.proxySysMs)}, on the event loop ${per(result.proxyLoopMs)} (busy ${((100 * result.proxyLoopMs) / (SECONDS * 1000 * instances)).toFixed(0)}% of the measured time)`),
        );
        rounds.set(name, [...(rounds.get(name) ?? []), result]);
      }
    }
    for (const runs of rounds.values()) {
      const sorted = [...runs].sort((a, b) => a.commits - b.commits);
      results.push(sorted[Math.floor((sorted.length - 1) / 2)]!);
    }
  } finally {
    await Promise.allSettled([
      kafka.stop(),
      redis.kill(),
      redisEverysec.kill(),
      valkey.kill(),
      valkeyEverysec.kill(),
      zk.stop(),
    ]);
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
      `| ${r.target} | ${rate(r).toFixed(0)} | ${(rate(r) * PARTITIONS).toFixed(0)} | ${(rate(r) / rate(native)).toFixed(2)}x | ${percentile(sorted, 50).toFixed(2)} | ${percentile(sorted, 99).toFixed(2)} | ${(sorted.at(-1) ?? NaN).toFixed(2)} | ${r.errors} | ${perCommit(r.cpu.proxy, r)} / ${perCommit(r.cpu.backend, r)} / ${perCommit(r.cpu.loadgen, r)} |`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
