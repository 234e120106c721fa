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
 * with AOF appendfsync always, ZooKeeper.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiKey } from '../protocol/messages/index.js';
import { defaultOffsetCommitRequest } from '../protocol/messages/offset-commit-request.js';
import { decodeResponseFrame, encodeRequestFrame } from '../protocol/frames.js';
import type { OffsetCommitResponse } from '../protocol/messages/offset-commit-response.js';
import { startKafka } from '../test/bed/kafka.js';
import { startRedis } from '../test/bed/redis.js';
import type { RedisServer } from '../test/bed/redis.js';
import { startZooKeeper } from '../test/bed/zookeeper.js';
import { redisCommand } from '../test/bed/resp.js';
import { ensureBuilt, spawnProxy } from '../test/harness/proxy.js';
import { RawClient } from '../test/harness/raw-client.js';
import { createTopics } from '../test/bed/clients/kafkajs.js';
import { cpuByThreadMs, cpuMs, cpuSplitMs } from './process-stats.js';
import { ZERO_UUID } from '../protocol/generated-support.js';

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
  /** The proxy's part of it in system calls (stime), mostly socket reads and writes. */
  proxySysMs: number;
  /** The proxy's part of it on its event loop (the rest: V8's GC and compiler threads). */
  proxyLoopMs: number;
}

/** A placeholder offset whose 8 bytes occur nowhere else in a request: where the offsets go. */
const MARK = 0x5eed_c0de_5eed_c0den;

/**
 * One group's OffsetCommit v8 request frame, encoded once with the project's codec; each send only
 * patches the correlation id and the offsets in place. Encoding 100 partitions from objects for
 * every request made this load generator, which shares the two cores with the system under test,
 * take ~0.1 ms of CPU per commit; real clients are on other machines. The same bytes go to every
 * target. One request per connection is in flight, and a connection's next request is written only
 * after the previous response, so reusing the buffer never changes bytes still being sent.
 */
class CommitFrame {
  private readonly frame: Buffer;
  private readonly offsetAt: number[] = [];

  constructor(group: string) {
    this.frame = encodeRequestFrame(
      { apiKey: ApiKey.OffsetCommit, apiVersion: 8, correlationId: 0, clientId: 'bench' },
      {
        ...defaultOffsetCommitRequest(),
        groupId: group,
        generationIdOrMemberEpoch: -1,
        memberId: '',
        topics: [
          {
            name: TOPIC,
            topicId: ZERO_UUID,
            partitions: Array.from({ length: PARTITIONS }, (_, p) => ({
              partitionIndex: p,
              committedOffset: MARK,
              committedLeaderEpoch: -1,
              committedMetadata: '',
            })),
          },
        ],
      },
    );
    for (let at = 0; at + 8 <= this.frame.length; at++) {
      if (this.frame.readBigInt64BE(at) === MARK) this.offsetAt.push(at);
    }
    if (this.offsetAt.length !== PARTITIONS)
      throw new Error(`found ${this.offsetAt.length} offsets in the template`);
  }

  /** The frame with this correlation id and offset (below 2^31) in every partition. */
  with(correlationId: number, offset: number): Buffer {
    const f = this.frame;
    f.writeInt32BE(correlationId, 8); // after size (4), api key (2) and version (2)
    for (const at of this.offsetAt) {
      f.writeInt32BE(0, at);
      f.writeInt32BE(offset, at + 4);
    }
    return f;
  }
}

async function run(
  target: string,
  /** Connection c goes to bootstraps[c % length]. */
  bootstraps: string[],
  runId: string,
  pids: { proxies?: number[]; backend?: number | undefined },
): Promise<Result> {
  const clients = await Promise.all(
    Array.from({ length: CONNECTIONS }, (_, c) => RawClient.connect(bootstraps[c % bootstraps.length]!)),
  );
  const latencies: number[] = [];
  let commits = 0;
  let errors = 0;
  let correlation = 1;
  const warmupEnd = Date.now() + 1000;
  const end = warmupEnd + SECONDS * 1000;
  let cpuStart = { proxy: NaN, proxySys: NaN, proxyLoop: NaN, backend: NaN, loadgen: NaN };
  const sampleCpu = () => ({
    proxy: pids.proxies ? sum(pids.proxies.map(cpuMs)) : NaN,
    proxySys: pids.proxies ? sum(pids.proxies.map((pid) => cpuSplitMs(pid).sys)) : NaN,
    proxyLoop: pids.proxies
      ? sum(pids.proxies.map((pid) => cpuByThreadMs(pid).get('event loop') ?? NaN))
      : NaN,
    backend: cpuMs(pids.backend),
    loadgen: process.cpuUsage().user / 1000 + process.cpuUsage().system / 1000,
  });
  const warmupTimer = setTimeout(() => (cpuStart = sampleCpu()), warmupEnd - Date.now());
  await Promise.all(
    clients.map(async (client, c) => {
      const frames = Array.from(
        { length: Math.max(1, Math.floor(GROUPS / CONNECTIONS)) },
        (_, g) => new CommitFrame(`${runId}-${c}-${g}`),
      );
      let offset = 1;
      let g = 0;
      while (Date.now() < end) {
        const started = performance.now();
        const id = correlation++;
        client.write(frames[g++ % frames.length]!.with(id, offset++));
        const [frame] = await client.read(1);
        const { header, body } = decodeResponseFrame(frame!, ApiKey.OffsetCommit, 8);
        if (header.correlationId !== id)
          throw new Error(`correlation id ${header.correlationId}, expected ${id}`);
        const response = body as OffsetCommitResponse;
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
  const proxySysMs = cpuEnd.proxySys - cpuStart.proxySys;
  const proxyLoopMs = cpuEnd.proxyLoop - cpuStart.proxyLoop;
  return { target, commits, errors, latenciesMs: latencies, seconds: SECONDS, cpu, proxySysMs, proxyLoopMs };
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

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
