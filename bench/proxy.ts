// Data-path cost of the proxy, side by side with other relays in one run: Kafka's own
// ProducerPerformance and ConsumerPerformance (1 KB records) directly against a bed broker, through
// the proxy CLI, through a bare Node relay (sockets piped, no Kafka code) and through HAProxy in TCP
// mode (L4). Every relay is a child process, so its CPU time and peak RSS are read from /proc. The
// broker has a listener per relay, advertised at that relay's port, so clients that bootstrap
// through a relay stay on it (as the proxy keeps its clients by rewriting addresses).
// `--external-side 'name=command'` (repeatable) adds any other relay, e.g. another Kafka proxy, as a
// side: a shell command line with placeholders, run in a process of its own and measured alike.
//
//   npx tsx bench/proxy.ts [--sides direct,proxy,bare,haproxy] [--baseline <dir>[,<dir>]]
//     [--records N] [--rounds K] [--consume-rounds K] [--rate R] [--rate-records N]
//     [--consumers java,librdkafka,kafkajs] [--rate-rounds K] [--rtt-requests N] [--connections N] [--warmup-records N] [--store URL]
//     [--cpu-prof <dir>] [--batch-sizes B,B,...] [--record-sizes S,S,...] [--sweep-mb MB] [--sweep-only] [--moves]
//     [--proxy-node-args=<node options>] [--proxy-output <file>] [--no-build]
//     [--external-side 'name=command with {placeholders}']...
//
// First a warm-up through every relay that is not counted: WARMUP records produced and consumed, so
// that a JIT-compiled relay (the proxy, a Node relay, a JVM) is measured as it runs once compiled,
// as an operator's relay runs for hours, not while its compiler still works. Its CPU per MB is
// reported on its own (warmupCpuMsPerMb): what a relay costs before it is compiled.
// Rounds run every side, the order reversed every other round, so load from elsewhere on the machine
// hits all alike. Produce: each run into a fresh 3-partition topic. Consume: every run reads the first
// produced topic (N records) in a new group, with each consumer `--consumers` names (Java's
// ConsumerPerformance, librdkafka through kcat, kafkajs: bench/consumers.ts) in turn. Then ProducerPerformance at a fixed rate, and single
// Produce requests one at a time on one raw connection to the partition leader (µs round trips).
// `--batch-sizes` and `--record-sizes` add a produce sweep: every producer batch.size by every record
// size, --rounds runs of --sweep-mb MB each per side, and a table of every side's CPU per MB and
// throughput per combination (`--sweep-only`: the warm-up and the sweep, nothing else).
// `--baseline <dir>[,<dir>...]` adds other built checkouts' proxies as sides ("baseline",
// "baseline2", ...), for paired comparisons.
//
// An external side's command may name: {listenPort} (where the relay must listen; clients bootstrap
// at 127.0.0.1:{listenPort}, and the four ports after it are free too, for a relay that listens on a
// port per broker), {brokerHost} and {brokerPort} (the broker's client listener, advertised as
// itself: for a relay that rewrites broker addresses), {relayedBrokerPort} (a broker listener
// advertised at 127.0.0.1:{listenPort}: for a relay that does not), and {file:<path>} (a copy of
// that file with these placeholders expanded, e.g. a configuration template). The command must exec
// the relay (not fork it), so that the pid measured is the relay's. The connection a client uses for
// the partition leader is the one the side's own Metadata answer names.
//
// Needs the built CLI (`npm run build`; the script builds it first unless --no-build) and, for the
// haproxy side, `haproxy` on the PATH (Debian: apt-get install haproxy).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createTopics } from '../test/bed/clients/kafkajs.js';
import { consumerPerformance, producerPerformance } from '../test/bed/clients/kafka-tools.js';
import { startKafka } from '../test/bed/kafka.js';
import { freePortRange, spawnProxy } from '../test/harness/proxy.js';
import type { ProxyProcess } from '../test/harness/proxy.js';
import { RawClient, apiVersionsRequest, produceRequest, splitHostPort } from '../test/harness/raw-client.js';
import { consumeWithKafkajs, consumeWithKcat, parseConsumers } from './consumers.js';
import type { ConsumerName } from './consumers.js';
import { consumersReport, report, sweepReport } from './data-path-report.js';
import type { DataPathRun } from './data-path-report.js';
import { leaderThrough, log, measured, newSide, ordered } from './data-path-sides.js';
import type { Side, SideName } from './data-path-sides.js';
import { childPids, statusKb } from './process-stats.js';
import { startBareRelay, startExternalRelay, startHaproxy } from './relays.js';
import type { RelayProcess } from './relays.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const { values: args } = parseArgs({
  options: {
    sides: { type: 'string', default: 'direct,proxy,bare,haproxy' },
    baseline: { type: 'string' },
    records: { type: 'string', default: '300000' },
    'record-size': { type: 'string', default: '1024' },
    rounds: { type: 'string', default: '3' },
    'consume-rounds': { type: 'string', default: '5' },
    /** Which consumers read in the consume rounds, each against every side (bench/consumers.ts). */
    consumers: { type: 'string', default: 'java' },
    rate: { type: 'string', default: '2000' },
    'rate-records': { type: 'string', default: '20000' },
    'rate-rounds': { type: 'string', default: '2' },
    'rtt-requests': { type: 'string', default: '2000' },
    connections: { type: 'string', default: '1000' },
    'warmup-records': { type: 'string', default: '300000' },
    store: { type: 'string' },
    'no-build': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    /** Options for node itself on the `proxy` side only (e.g. V8 heap flags), space-separated. */
    'proxy-node-args': { type: 'string', default: '' },
    /** Writes the proxy side's stdout and stderr (its log, and e.g. --trace-gc lines) to this file. */
    'proxy-output': { type: 'string' },
    /** `name=command`: another relay as a side (see the placeholders above); repeatable. */
    'external-side': { type: 'string', multiple: true, default: [] },
    'batch-sizes': { type: 'string' },
    'record-sizes': { type: 'string' },
    'sweep-mb': { type: 'string', default: '100' },
    'sweep-only': { type: 'boolean', default: false },
    /**
     * Gives each proxy side an HTTP endpoint and logs, per run, its connections moved to the native
     * relay (its metrics). Off by default: an idle proxy with its metrics on spent 2.5 ms of CPU a
     * second in bench/memory.ts (their event-loop-delay timer most of it), which a short run counts
     * as relay work.
     */
    moves: { type: 'boolean', default: false },
  },
});
const numbers = (list: string | undefined): number[] =>
  (list ?? '')
    .split(',')
    .filter((x) => x.trim() !== '')
    .map(Number);
const SWEEP = { batches: numbers(args['batch-sizes']), records: numbers(args['record-sizes']) };
if (SWEEP.batches.length > 0 && SWEEP.records.length === 0) SWEEP.records.push(Number(args['record-size']));
if (SWEEP.records.length > 0 && SWEEP.batches.length === 0) SWEEP.batches.push(16384);
const SWEEP_ONLY = args['sweep-only'];
const RECORDS = Number(args.records);
const RECORD_SIZE = Number(args['record-size']);
const RATE = Number(args.rate);
const RATE_RECORDS = Number(args['rate-records']);
const ROUNDS = Number(args.rounds);
const CONSUME_ROUNDS = Number(args['consume-rounds']);
const CONSUMERS = parseConsumers(args.consumers);
const RATE_ROUNDS = Number(args['rate-rounds']);
const RTT_REQUESTS = Number(args['rtt-requests']);
const CONNECTIONS = Number(args.connections);
const WARMUP_RECORDS = Number(args['warmup-records']);
/** A loaded shared machine can take minutes for a run. */
const TOOL_TIMEOUT_MS = 600_000;
const SIDE_NAMES = ['direct', 'proxy', 'bare', 'haproxy'];
const chosen: SideName[] = args.sides.split(',').map((s) => s.trim());
for (const s of chosen) if (!SIDE_NAMES.includes(s)) throw new Error(`unknown side ${s}`);
/** --baseline a,b: other built checkouts' proxies, as sides after `proxy`. */
const baselines = new Map(
  (args.baseline ?? '')
    .split(',')
    .filter((dir) => dir !== '')
    .map((dir, i) => [i === 0 ? 'baseline' : `baseline${i + 1}`, path.resolve(dir)] as const),
);
chosen.splice(chosen.indexOf('proxy') + 1, 0, ...baselines.keys());
/** --external-side name=command: other relays' command templates, as sides after the rest. */
const externals = new Map(
  args['external-side'].map((spec) => {
    const at = spec.indexOf('=');
    const name = spec.slice(0, at).trim();
    if (at <= 0 || !/^[A-Za-z0-9_-]+$/.test(name))
      throw new Error(`--external-side ${spec}: expected name=command`);
    if (chosen.includes(name) || SIDE_NAMES.includes(name)) throw new Error(`side ${name} is named twice`);
    return [name, spec.slice(at + 1).trim()] as const;
  }),
);
chosen.push(...externals.keys());
const RUN: DataPathRun = {
  records: RECORDS,
  recordSize: RECORD_SIZE,
  rounds: ROUNDS,
  consumeRounds: CONSUME_ROUNDS,
  rate: RATE,
  warmupRecords: WARMUP_RECORDS,
  connections: CONNECTIONS,
  sweepMb: Number(args['sweep-mb']),
  sweep: SWEEP,
  isProxy: (name) => name === 'proxy' || baselines.has(name),
};

async function main(): Promise<void> {
  if (!args['no-build']) {
    log('building the CLI (npm run build)');
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: repo, stdio: 'inherit' });
  }
  // Per relay side: where it listens (front) and a broker listener advertised there.
  const relayPorts = new Map<SideName, { front: number; listener: number }>();
  for (const name of chosen) {
    if (name === 'bare' || name === 'haproxy' || externals.has(name)) {
      relayPorts.set(name, {
        front: await freePortRange(externals.has(name) ? 4 : 0),
        listener: await freePortRange(0),
      });
    }
  }
  log(`starting a 1-node Kafka; sides ${chosen.join(', ')}`);
  const cluster = await startKafka({
    brokers: 1,
    extraListeners: [...relayPorts].map(([name, p], i) => ({
      name: `RELAY_${i}_${name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`,
      port: p.listener,
      advertisedPort: p.front,
    })),
  });
  const nodeId = cluster.brokers[0]!.nodeId;
  const proxies: ProxyProcess[] = [];
  const relays: RelayProcess[] = [];
  const sides: Side[] = [];
  const t0 = Date.now();
  const load: number[] = [];
  const loadTimer = setInterval(() => load.push(os.loadavg()[0]!), 10_000);

  try {
    for (const name of chosen) {
      if (name === 'direct') {
        sides.push(newSide(name, cluster.bootstrap, cluster.bootstrap));
      } else if (name === 'proxy' || baselines.has(name)) {
        const http = args.moves ? `127.0.0.1:${await freePortRange(1)}` : undefined;
        const proxyArgs = ['--bootstrap-server', cluster.bootstrap, '--log-level', 'info'];
        if (http !== undefined) proxyArgs.push('--http', http);
        if (args.store) proxyArgs.push('--store', args.store);
        const nodeArgs =
          name === 'proxy' && args['cpu-prof']
            ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(args['cpu-prof'])}`]
            : [];
        if (name === 'proxy') nodeArgs.push(...args['proxy-node-args'].split(' ').filter((a) => a !== ''));
        const checkout = baselines.get(name);
        const bin = checkout ? path.join(checkout, 'bin/kafka-offset-proxy.js') : undefined;
        const proxy = await spawnProxy(proxyArgs, {}, nodeArgs, bin);
        proxies.push(proxy);
        // The proxy's listener for node 1 (port + 1 + node id), the connection a client would use.
        const side = newSide(name, proxy.bootstrap, `127.0.0.1:${proxy.port + 1 + nodeId}`, proxy.child.pid);
        if (http !== undefined) side.http = http;
        sides.push(side);
      } else if (name === 'bare' || name === 'haproxy') {
        const ports = relayPorts.get(name)!;
        const upstream = `127.0.0.1:${ports.listener}`;
        const relay =
          name === 'bare'
            ? await startBareRelay(ports.front, upstream)
            : await startHaproxy(ports.front, upstream);
        relays.push(relay);
        sides.push(newSide(name, relay.address, relay.address, relay.pid));
      } else {
        const ports = relayPorts.get(name)!;
        const [brokerHost, brokerPort] = splitHostPort(cluster.bootstrap);
        const relay = await startExternalRelay(name, externals.get(name)!, ports.front, {
          listenPort: ports.front,
          brokerHost,
          brokerPort,
          relayedBrokerPort: ports.listener,
        });
        relays.push(relay);
        log(`${name}: ${relay.command} (pid ${relay.pid})`);
        const children = childPids(relay.pid);
        if (children.length) log(`${name}: warning: child processes ${children.join(', ')} are not measured`);
        sides.push(newSide(name, relay.address, await leaderThrough(relay.address, nodeId), relay.pid));
      }
    }
    const classpath = cluster.classpath;
    const admin = { bootstrap: cluster.bootstrap };

    // The warm-up through every relay (JIT, connections, listeners): see the top of this file.
    if (WARMUP_RECORDS > 0) {
      for (const side of sides) {
        if (side.pid === undefined) continue;
        const warm = `bench-warmup-${side.name}-${Date.now()}`;
        await createTopics(admin, [{ topic: warm, partitions: 3 }]);
        await measured(
          side,
          side.warmupCpu,
          () =>
            producerPerformance(classpath, side, {
              topic: warm,
              numRecords: WARMUP_RECORDS,
              recordSize: RECORD_SIZE,
              timeoutMs: TOOL_TIMEOUT_MS,
            }),
          undefined,
          'warm-up produce',
        );
        await measured(
          side,
          side.warmupCpu,
          () =>
            consumerPerformance(classpath, side, {
              topic: warm,
              numRecords: WARMUP_RECORDS,
              group: `bench-warmup-${side.name}-${Date.now()}`,
              timeoutMs: TOOL_TIMEOUT_MS,
            }),
          undefined,
          'warm-up consume',
        );
        const mb = (2 * WARMUP_RECORDS * RECORD_SIZE) / 1e6;
        const ms = side.warmupCpu.user + side.warmupCpu.sys;
        log(
          `warm-up ${side.name}: ${WARMUP_RECORDS} records produced and consumed, ${(ms / mb).toFixed(2)} CPU ms/MB`,
        );
      }
    }

    if (SWEEP.batches.length > 0) await produceSweep(sides, classpath, admin);
    if (SWEEP_ONLY) {
      sweepReport(RUN, sides, t0, load);
      return;
    }

    let consumeTopic: string | undefined;
    for (let round = 0; round < ROUNDS; round++) {
      for (const side of ordered(sides, round)) {
        const topic = `bench-${side.name}-${round}-${Date.now()}`;
        await createTopics(admin, [{ topic, partitions: 3 }]);
        const p = await measured(
          side,
          side.cpu.produce,
          () =>
            producerPerformance(classpath, side, {
              topic,
              numRecords: RECORDS,
              recordSize: RECORD_SIZE,
              timeoutMs: TOOL_TIMEOUT_MS,
            }),
          side.cpuPerRunMs.produce,
          `produce round ${round}`,
        );
        side.produce.push(p);
        log(
          `produce round ${round} ${side.name}: ${p.recordsPerSec.toFixed(0)} rec/s, ${p.mbPerSec} MB/s, p50 ${p.p50Ms} ms, p99 ${p.p99Ms} ms`,
        );
        consumeTopic ??= topic;
      }
    }

    // Consume runs are short (a few seconds each), so there are more of them, every one reading the
    // same topic (the same bytes, equally warm in the page cache) in a new group. Every consumer
    // reads through every side in each round, so all of them meet the same load.
    for (let round = 0; round < CONSUME_ROUNDS; round++) {
      for (const consumer of CONSUMERS) {
        for (const side of ordered(sides, round)) {
          const cpu = { user: 0, sys: 0 };
          const group = `bench-consume-${consumer}-${side.name}-${round}-${Date.now()}`;
          const recordsPerSec = await measured(
            side,
            cpu,
            () => consumeOnce(consumer, classpath, side, consumeTopic!, group),
            undefined,
            `consume ${consumer} round ${round}`,
          );
          const entry = side.consumers.get(consumer) ?? { cpuMs: [], recordsPerSec: [] };
          entry.cpuMs.push(cpu.user + cpu.sys);
          entry.recordsPerSec.push(recordsPerSec);
          side.consumers.set(consumer, entry);
          if (consumer === 'java') {
            side.cpu.consume.user += cpu.user;
            side.cpu.consume.sys += cpu.sys;
            side.cpuPerRunMs.consume.push(cpu.user + cpu.sys);
          }
          log(
            `consume ${consumer} round ${round} ${side.name}: ${recordsPerSec.toFixed(0)} rec/s` +
              (side.pid !== undefined ? `, ${(cpu.user + cpu.sys).toFixed(0)} CPU ms` : ''),
          );
        }
      }
    }

    for (let round = 0; round < RATE_ROUNDS; round++) {
      for (const side of ordered(sides, round)) {
        const topic = `bench-rate-${side.name}-${round}-${Date.now()}`;
        await createTopics(admin, [{ topic, partitions: 3 }]);
        const r = await measured(side, side.cpu.rate, () =>
          producerPerformance(classpath, side, {
            topic,
            numRecords: RATE_RECORDS,
            recordSize: RECORD_SIZE,
            timeoutMs: TOOL_TIMEOUT_MS,
            throughput: RATE,
          }),
        );
        side.rate.push(r);
        log(
          `rate ${RATE}/s round ${round} ${side.name}: avg ${r.avgLatencyMs} ms, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, p99.9 ${r.p999Ms} ms`,
        );
      }
    }

    // Request round trips, one at a time: Produce acks=1 of one 1 KB record on one connection per
    // side, in blocks rotating between the sides. Microsecond resolution, unlike the tools' whole ms.
    if (RTT_REQUESTS > 0) {
      const rttTopic = `bench-rtt-${Date.now()}`;
      await createTopics(admin, [{ topic: rttTopic, partitions: 1 }]);
      const conns = await Promise.all(sides.map((s) => RawClient.connect(s.leader)));
      const value = 'x'.repeat(RECORD_SIZE);
      let correlationId = 0;
      const blocks = 10;
      for (let block = 0; block < blocks; block++) {
        for (const [i, side] of ordered(sides, block).map((s) => [sides.indexOf(s), s] as const)) {
          await measured(side, side.cpu.rtt, async () => {
            for (let n = 0; n < RTT_REQUESTS / blocks; n++) {
              const t = process.hrtime.bigint();
              conns[i]!.write(produceRequest(9, ++correlationId, rttTopic, 1, value));
              await conns[i]!.read(1);
              side.rttUs.push(Number(process.hrtime.bigint() - t) / 1000);
            }
          });
        }
      }
      for (const c of conns) c.close();
    }

    // Memory per connection: each relay's RSS before and with CONNECTIONS connections open, each
    // having had one ApiVersions answer (so the proxy has opened its broker connection too).
    if (CONNECTIONS > 0) {
      for (const side of sides) {
        if (side.pid === undefined) continue;
        const before = statusKb(side.pid, 'VmRSS');
        const conns: RawClient[] = [];
        for (let i = 0; i < CONNECTIONS; i += 100) {
          const wave = await Promise.all(
            Array.from({ length: Math.min(100, CONNECTIONS - i) }, () => RawClient.connect(side.leader)),
          );
          for (const c of wave) c.write(apiVersionsRequest(3, 1));
          await Promise.all(wave.map((c) => c.read(1)));
          conns.push(...wave);
        }
        side.connectionsRssMb = (statusKb(side.pid, 'VmRSS') - before) / 1024;
        for (const c of conns) c.close();
        log(`${side.name}: +${side.connectionsRssMb.toFixed(1)} MB RSS with ${CONNECTIONS} connections`);
      }
    }

    report(RUN, sides, t0, load);
    if (CONSUME_ROUNDS > 0) consumersReport(RUN, sides, CONSUMERS, load);
    if (SWEEP.batches.length > 0) sweepReport(RUN, sides, t0, load);
  } finally {
    clearInterval(loadTimer);
    for (const proxy of proxies) log(`proxy exited with ${await proxy.stop()}`);
    if (args['proxy-output'] && proxies[0]) {
      // The `proxy` side is always the first proxy started.
      writeFileSync(path.resolve(args['proxy-output']), proxies[0].output());
      log(`proxy output written to ${args['proxy-output']}`);
    }
    for (const relay of relays) await relay.stop();
    await cluster.stop();
  }
}

/** One consume run of `consumer` through `side`: RECORDS records of `topic` in group `group`; records/s. */
async function consumeOnce(
  consumer: ConsumerName,
  classpath: string,
  side: Side,
  topic: string,
  group: string,
): Promise<number> {
  const run = { topic, records: RECORDS, group, timeoutMs: TOOL_TIMEOUT_MS };
  if (consumer === 'librdkafka') return (await consumeWithKcat(side.bootstrap, run)).recordsPerSec;
  if (consumer === 'kafkajs') return (await consumeWithKafkajs(side.bootstrap, run)).recordsPerSec;
  const c = await consumerPerformance(classpath, side, {
    topic,
    numRecords: RECORDS,
    group,
    timeoutMs: TOOL_TIMEOUT_MS,
  });
  side.consume.push(c);
  return c.recordsPerSec;
}

/** Every batch.size by every record size: --rounds produce runs of --sweep-mb MB per side. */
async function produceSweep(sides: Side[], classpath: string, admin: { bootstrap: string }): Promise<void> {
  for (const batch of SWEEP.batches) {
    for (const size of SWEEP.records) {
      const key = `${batch}/${size}`;
      const numRecords = Math.round((Number(args['sweep-mb']) * 1e6) / size);
      for (let round = 0; round < ROUNDS; round++) {
        for (const side of ordered(sides, round)) {
          const topic = `bench-sweep-${side.name}-${batch}-${size}-${round}-${Date.now()}`;
          await createTopics(admin, [{ topic, partitions: 3 }]);
          const cpu = { user: 0, sys: 0 };
          const p = await measured(
            side,
            cpu,
            () =>
              producerPerformance(classpath, side, {
                topic,
                numRecords,
                recordSize: size,
                // As throughput tuning guides set it: room for a whole batch per request.
                props: [`batch.size=${batch}`, `max.request.size=${Math.max(1 << 20, 2 * batch)}`],
                timeoutMs: TOOL_TIMEOUT_MS,
              }),
            undefined,
            `sweep ${batch}/${size}`,
          );
          const entry = side.sweep.get(key) ?? { cpuMs: [], recordsPerSec: [] };
          entry.cpuMs.push(cpu.user + cpu.sys);
          entry.recordsPerSec.push(p.recordsPerSec);
          side.sweep.set(key, entry);
          const runMb = (numRecords * size) / 1e6;
          log(
            `sweep batch.size=${batch} record ${size} B round ${round} ${side.name}: ${p.mbPerSec} MB/s` +
              (side.pid !== undefined ? `, ${(entry.cpuMs.at(-1)! / runMb).toFixed(2)} CPU ms/MB` : ''),
          );
        }
      }
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
