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
//     [--rate-rounds K] [--rtt-requests N] [--connections N] [--warmup-records N] [--store URL]
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
// produced topic (N records) in a new group. Then ProducerPerformance at a fixed rate, and single
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
import {
  consumerPerformance,
  producerPerformance,
  type ConsumerPerfResult,
  type ProducerPerfResult,
} from '../test/bed/clients/kafka-tools.js';
import { startKafka } from '../test/bed/kafka.js';
import { freePortRange, spawnProxy } from '../test/harness/proxy.js';
import type { ProxyProcess } from '../test/harness/proxy.js';
import {
  RawClient,
  apiVersionsRequest,
  brokerAddresses,
  metadataRequestBody,
  produceRequest,
  splitHostPort,
} from '../test/harness/raw-client.js';
import { ApiKey } from '../protocol/messages/index.js';
import type { MetadataResponse } from '../protocol/messages/metadata-response.js';
import { childPids, cpuByThreadMs, cpuSplitMs, statusKb } from './process-stats.js';
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
const RATE_ROUNDS = Number(args['rate-rounds']);
const RTT_REQUESTS = Number(args['rtt-requests']);
const CONNECTIONS = Number(args.connections);
const WARMUP_RECORDS = Number(args['warmup-records']);
/** A loaded shared machine can take minutes for a run. */
const TOOL_TIMEOUT_MS = 600_000;
const SIDE_NAMES = ['direct', 'proxy', 'bare', 'haproxy'];
/** A side of SIDE_NAMES, or `baseline`, `baseline2`, ... for the checkouts of --baseline. */
type SideName = string;
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

interface Side {
  name: SideName;
  /** Where clients bootstrap. */
  bootstrap: string;
  /** The address of the partition leader's connection (node 1) as a client of this side uses it. */
  leader: string;
  /** The relay process, when there is one. */
  pid?: number;
  /** A proxy side's HTTP endpoint (its metrics: how many connections moved to the native relay). */
  http?: string;
  produce: ProducerPerfResult[];
  consume: ConsumerPerfResult[];
  rate: ProducerPerfResult[];
  rttUs: number[];
  /** The relay's VmRSS growth with CONNECTIONS open connections, in MB. */
  connectionsRssMb?: number;
  cpu: { produce: Cpu; consume: Cpu; rate: Cpu; rtt: Cpu };
  /** The relay's CPU ms (user + sys) of each produce and consume run, in order: warm-up shows here. */
  cpuPerRunMs: { produce: number[]; consume: number[] };
  /** The relay's CPU over the warm-up's produce and consume runs (WARMUP_RECORDS each). */
  warmupCpu: Cpu;
  /** The produce sweep, by `batch.size/record size`: each run's relay CPU ms and records/s. */
  sweep: Map<string, { cpuMs: number[]; recordsPerSec: number[] }>;
}
interface Cpu {
  user: number;
  sys: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const pct = (xs: number[], q: number): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))]!;

function log(line: string): void {
  console.log(`[bench] ${line}`);
}

/**
 * Runs `fn` and adds the side's relay CPU time over it to `into` (and to `runs`, when given). When
 * `label` is given it logs that time split by thread: the event loop against V8's compiler and GC
 * threads, which is what tells a relay still compiling from one doing its work.
 */
async function measured<T>(
  side: Side,
  into: Cpu,
  fn: () => Promise<T>,
  runs?: number[],
  label?: string,
): Promise<T> {
  const movesBefore = await nativeMoves(side);
  const before = cpuSplitMs(side.pid);
  const threadsBefore = cpuByThreadMs(side.pid);
  const result = await fn();
  const after = cpuSplitMs(side.pid);
  const movesAfter = await nativeMoves(side);
  if (movesBefore !== null && movesAfter !== null)
    log(
      `${label ?? 'run'} ${side.name}: ${movesAfter.native - movesBefore.native} moves to the native relay, ` +
        `${movesAfter.javascript - movesBefore.javascript} back to JavaScript`,
    );
  if (side.pid !== undefined) {
    into.user += after.user - before.user;
    into.sys += after.sys - before.sys;
    runs?.push(after.user - before.user + after.sys - before.sys);
    if (label !== undefined)
      log(`${label} ${side.name} CPU ms by thread: ${threadDelta(threadsBefore, cpuByThreadMs(side.pid))}`);
  }
  return result;
}

/** A proxy side's native relay handovers since its start (its metrics), or null for other sides. */
async function nativeMoves(side: Side): Promise<{ native: number; javascript: number } | null> {
  if (side.http === undefined) return null;
  const text = await (await fetch(`http://${side.http}/metrics`)).text();
  const count = (to: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(`kop_native_relay_handovers_total{to="${to}"}`));
    return line === undefined ? 0 : Number(line.split(' ').at(-1));
  };
  return { native: count('native'), javascript: count('javascript') };
}

/** "event loop 640, node 20, ..." : each thread name's CPU ms between two cpuByThreadMs readings. */
function threadDelta(before: Map<string, number>, after: Map<string, number>): string {
  return [...after]
    .map(([name, ms]) => [name, ms - (before.get(name) ?? 0)] as const)
    .filter(([, ms]) => ms > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${name} ${ms.toFixed(0)}`)
    .join(', ');
}

/** The partition leader's (node `nodeId`'s) address as the side at `bootstrap` answers Metadata. */
async function leaderThrough(bootstrap: string, nodeId: number): Promise<string> {
  const client = await RawClient.connect(bootstrap);
  try {
    const body = await client.request<MetadataResponse>(ApiKey.Metadata, 12, 1, metadataRequestBody());
    const node = brokerAddresses(body).find((b) => b.nodeId === nodeId);
    if (!node) throw new Error(`${bootstrap}: Metadata names no node ${nodeId}`);
    return `${node.host}:${node.port}`;
  } finally {
    client.close();
  }
}

/** The sides in round `round`'s order: as given, reversed every other round. */
function ordered(sides: Side[], round: number): Side[] {
  return round % 2 === 0 ? sides : [...sides].reverse();
}

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

  const newSide = (name: SideName, bootstrap: string, leader: string, pid?: number): Side => ({
    name,
    bootstrap,
    leader,
    pid,
    produce: [],
    consume: [],
    rate: [],
    rttUs: [],
    cpu: {
      produce: { user: 0, sys: 0 },
      consume: { user: 0, sys: 0 },
      rate: { user: 0, sys: 0 },
      rtt: { user: 0, sys: 0 },
    },
    cpuPerRunMs: { produce: [], consume: [] },
    warmupCpu: { user: 0, sys: 0 },
    sweep: new Map(),
  });

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
      sweepReport(sides, t0, load);
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
    // same topic (the same bytes, equally warm in the page cache) in a new group.
    for (let round = 0; round < CONSUME_ROUNDS; round++) {
      for (const side of ordered(sides, round)) {
        const c = await measured(
          side,
          side.cpu.consume,
          () =>
            consumerPerformance(classpath, side, {
              topic: consumeTopic!,
              numRecords: RECORDS,
              group: `bench-consume-${side.name}-${round}-${Date.now()}`,
              timeoutMs: TOOL_TIMEOUT_MS,
            }),
          side.cpuPerRunMs.consume,
          `consume round ${round}`,
        );
        side.consume.push(c);
        log(
          `consume round ${round} ${side.name}: ${c.recordsPerSec.toFixed(0)} rec/s, ${c.mbPerSec} MB/s (fetch ${c.fetchTimeMs} ms)`,
        );
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

    report(sides, t0, load);
    if (SWEEP.batches.length > 0) sweepReport(sides, t0, load);
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

/**
 * The sweep's table: per batch.size and record size, each side's median CPU ms per produced MB
 * (relays) and MB/s, and each proxy's CPU per MB over HAProxy's (the issue's bound is 1.2).
 */
function sweepReport(sides: Side[], t0: number, load: number[]): void {
  const haproxy = sides.find((s) => s.name === 'haproxy');
  const proxies = sides.filter((s) => s.name === 'proxy' || baselines.has(s.name));
  const loadRange = load.length
    ? `${Math.min(...load).toFixed(1)}-${Math.max(...load).toFixed(1)}`
    : os.loadavg()[0]!.toFixed(1);
  const cpuPerMb = (side: Side, key: string, size: number): number | null => {
    const e = side.sweep.get(key);
    if (side.pid === undefined || !e) return null;
    const mb = (Math.round((Number(args['sweep-mb']) * 1e6) / size) * size) / 1e6;
    return median(e.cpuMs) / mb;
  };
  const lines = [
    `produce sweep: ${args['sweep-mb']} MB per run, ${ROUNDS} rounds, medians; ` +
      `${Math.round((Date.now() - t0) / 1000)} s; load average (1 min) ${loadRange}`,
    '',
    `| batch.size | record B | ${sides.map((s) => (s.pid === undefined ? `${s.name} MB/s` : `${s.name} CPU ms/MB, MB/s`)).join(' | ')} | ${proxies.map((p) => `${p.name} / haproxy CPU`).join(' | ')} |`,
    `|---:|---:|${sides.map(() => '---:').join('|')}|${proxies.map(() => '---:').join('|')}|`,
  ];
  for (const batch of SWEEP.batches) {
    for (const size of SWEEP.records) {
      const key = `${batch}/${size}`;
      const cells = sides.map((s) => {
        const mbs = ((median(s.sweep.get(key)?.recordsPerSec ?? [0]) * size) / 1e6).toFixed(1);
        const cpu = cpuPerMb(s, key, size);
        return cpu === null ? mbs : `${cpu.toFixed(2)}, ${mbs}`;
      });
      const h = haproxy ? cpuPerMb(haproxy, key, size) : null;
      const ratios = proxies.map((p) => {
        const c = cpuPerMb(p, key, size);
        return c !== null && h ? (c / h).toFixed(2) : '';
      });
      lines.push(`| ${batch} | ${size} | ${cells.join(' | ')} | ${ratios.join(' | ')} |`);
    }
  }
  console.log(lines.join('\n'));
}

function report(sides: Side[], t0: number, load: number[]): void {
  const direct = sides.find((s) => s.name === 'direct');
  const mbPerRun = (RECORDS * RECORD_SIZE) / 1e6;
  /** Median over rounds of the side's records/s divided by direct's in the same round. */
  const ratio = (side: Side, runs: (s: Side) => { recordsPerSec: number }[]): number | null =>
    direct ? median(runs(side).map((r, i) => r.recordsPerSec / runs(direct)[i]!.recordsPerSec)) : null;
  const perMb = (cpu: Cpu, runs: number): number | null => (cpu.user + cpu.sys) / (runs * mbPerRun);
  const rows = sides.map((s) => {
    const relay = s.pid !== undefined;
    return {
      side: s.name,
      produceRecPerSec: s.produce.map((r) => Math.round(r.recordsPerSec)),
      produceRatio: ratio(s, (x) => x.produce),
      consumeRecPerSec: s.consume.map((r) => Math.round(r.recordsPerSec)),
      consumeRatio: ratio(s, (x) => x.consume),
      cpuMsPerMbProduce: relay ? perMb(s.cpu.produce, s.produce.length) : null,
      cpuMsPerMbConsume: relay ? perMb(s.cpu.consume, s.consume.length) : null,
      cpuUserSysMs: relay ? s.cpu : null,
      cpuMsPerRun: relay ? s.cpuPerRunMs : null,
      /** CPU per MB over the warm-up (produce and consume together): the cost before compilation settles. */
      warmupCpuMsPerMb:
        relay && WARMUP_RECORDS > 0
          ? (s.warmupCpu.user + s.warmupCpu.sys) / ((2 * WARMUP_RECORDS * RECORD_SIZE) / 1e6)
          : null,
      /** Over the relay's whole life (warm-up included), by thread name: JIT and GC threads show here. */
      cpuMsByThread: relay ? Object.fromEntries(cpuByThreadMs(s.pid)) : null,
      peakRssMb: relay ? statusKb(s.pid!, 'VmHWM') / 1024 : null,
      rssMbPer1000Connections:
        s.connectionsRssMb !== undefined ? (s.connectionsRssMb * 1000) / CONNECTIONS : null,
      fixedRateP50P99Ms: s.rate.map((r) => [r.p50Ms, r.p99Ms]),
      fixedRateMedianP50P99Ms: s.rate.length
        ? [median(s.rate.map((r) => r.p50Ms)), median(s.rate.map((r) => r.p99Ms))]
        : null,
      roundTripP50P99Us: s.rttUs.length
        ? [Math.round(pct(s.rttUs, 0.5)), Math.round(pct(s.rttUs, 0.99))]
        : null,
    };
  });
  const loadRange = load.length
    ? `${Math.min(...load).toFixed(1)}-${Math.max(...load).toFixed(1)}`
    : os.loadavg()[0]!.toFixed(1);
  console.log(
    JSON.stringify(
      {
        records: RECORDS,
        recordSize: RECORD_SIZE,
        rounds: ROUNDS,
        consumeRounds: CONSUME_ROUNDS,
        rate: RATE,
        rows,
        wallSeconds: Math.round((Date.now() - t0) / 1000),
        loadAverage1mRange: loadRange,
      },
      null,
      2,
    ),
  );
  const f = (x: number | null | undefined, digits = 2): string => (x == null ? '' : x.toFixed(digits));
  const lines = [
    `${RECORDS} x ${RECORD_SIZE} B, ${ROUNDS} produce and ${CONSUME_ROUNDS} consume rounds, fixed rate ${RATE}/s; load average (1 min) ${loadRange}`,
    '',
    '| side | produce rec/s (median) | ratio to direct | consume rec/s (median) | ratio to direct | CPU ms/MB produce | CPU ms/MB consume | peak RSS MB | RSS MB per 1,000 connections | p50 / p99 ms at fixed rate | Produce round trip p50 / p99 µs |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.side} | ${Math.round(median(r.produceRecPerSec))} | ${f(r.produceRatio)} | ${Math.round(median(r.consumeRecPerSec))} | ${f(r.consumeRatio)} | ${f(r.cpuMsPerMbProduce)} | ${f(r.cpuMsPerMbConsume)} | ${f(r.peakRssMb, 0)} | ${f(r.rssMbPer1000Connections, 1)} | ${r.fixedRateMedianP50P99Ms?.join(' / ') ?? ''} | ${r.roundTripP50P99Us?.join(' / ') ?? ''} |`,
    ),
  ];
  console.log(lines.join('\n'));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
