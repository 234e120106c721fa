// Proxy overhead benchmark: Kafka's own ProducerPerformance and ConsumerPerformance (1 KB records)
// directly against a bed broker and through the proxy CLI (a child process, so its CPU time and peak
// RSS can be read from /proc), in one run, alternating direct and proxied runs so that load from
// elsewhere on the machine hits both alike. Then a fixed moderate rate, to see the added latency.
//
//   npx tsx bench/proxy.ts [--records N] [--rate R] [--rate-records N] [--rounds K] [--consume-rounds K]
//
// Produce: K rounds per side (each into a fresh topic). Consume: --consume-rounds runs per side,
// alternating, all reading the first produced topic (N records) in new groups.
//
// Needs the built CLI (`npm run build`; the script builds it first unless --no-build).
import { execFileSync } from 'node:child_process';
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
import { spawnProxy } from '../test/harness/proxy.js';
import { RawClient, produceRequest } from '../test/harness/raw-client.js';
import { cpuMs, statusKb } from './process-stats.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const { values: args } = parseArgs({
  options: {
    records: { type: 'string', default: '300000' },
    'record-size': { type: 'string', default: '1024' },
    rate: { type: 'string', default: '2000' },
    'rate-records': { type: 'string', default: '40000' },
    rounds: { type: 'string', default: '2' },
    'consume-rounds': { type: 'string', default: '5' },
    'rtt-requests': { type: 'string', default: '3000' },
    'no-build': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
  },
});
const RECORDS = Number(args.records);
const RECORD_SIZE = Number(args['record-size']);
const RATE = Number(args.rate);
const RATE_RECORDS = Number(args['rate-records']);
const ROUNDS = Number(args.rounds);
const CONSUME_ROUNDS = Number(args['consume-rounds']);
const RTT_REQUESTS = Number(args['rtt-requests']);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

function log(line: string): void {
  console.log(`[bench] ${line}`);
}

async function main(): Promise<void> {
  if (!args['no-build']) {
    log('building the CLI (npm run build)');
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: repo, stdio: 'inherit' });
  }
  log('starting a 1-node Kafka');
  const cluster = await startKafka({ brokers: 1 });
  const proxyArgs = ['--bootstrap-server', cluster.bootstrap, '--log-level', 'info'];
  const nodeArgs = args['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(args['cpu-prof'])}`] : [];
  const proxy = await spawnProxy(proxyArgs, {}, nodeArgs);
  const pid = proxy.child.pid!;
  const direct = { bootstrap: cluster.bootstrap };
  const viaProxy = { bootstrap: proxy.bootstrap };
  const proxyCpu = { produce: 0, consume: 0, rate: 0, rtt: 0 };
  const produceRuns: Record<'direct' | 'proxy', ProducerPerfResult[]> = { direct: [], proxy: [] };
  const consumeRuns: Record<'direct' | 'proxy', ConsumerPerfResult[]> = { direct: [], proxy: [] };
  const rateRuns: Record<'direct' | 'proxy', ProducerPerfResult[]> = { direct: [], proxy: [] };
  const classpath = cluster.classpath;
  const t0 = Date.now();

  try {
    // A warm-up through the proxy (JIT, connections, listeners) that is not measured.
    const warm = `bench-warmup-${Date.now()}`;
    await createTopics(direct, [{ topic: warm, partitions: 3 }]);
    await producerPerformance(classpath, viaProxy, {
      topic: warm,
      numRecords: 20_000,
      recordSize: RECORD_SIZE,
    });

    let consumeTopic: string | undefined;
    const rateOrder: ('direct' | 'proxy')[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      rateOrder.push(...(round % 2 === 0 ? (['direct', 'proxy'] as const) : (['proxy', 'direct'] as const)));
    }
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which side goes first, so neither always gets the warmer page cache.
      const order: ('direct' | 'proxy')[] = round % 2 === 0 ? ['direct', 'proxy'] : ['proxy', 'direct'];
      for (const side of order) {
        const target = side === 'direct' ? direct : viaProxy;
        const topic = `bench-${side}-${round}-${Date.now()}`;
        await createTopics(direct, [{ topic, partitions: 3 }]);
        const before = cpuMs(pid);
        const p = await producerPerformance(classpath, target, {
          topic,
          numRecords: RECORDS,
          recordSize: RECORD_SIZE,
        });
        if (side === 'proxy') proxyCpu.produce += cpuMs(pid) - before;
        produceRuns[side].push(p);
        log(
          `round ${round} ${side} produce: ${p.recordsPerSec.toFixed(0)} rec/s, ${p.mbPerSec} MB/s, p50 ${p.p50Ms} ms, p99 ${p.p99Ms} ms`,
        );
        consumeTopic ??= topic;
      }
    }

    // Consume runs are short (a few seconds each), so there are more of them, alternating sides,
    // every one reading the same topic (the same bytes, equally warm in the page cache) in a new group.
    for (let round = 0; round < CONSUME_ROUNDS; round++) {
      const order: ('direct' | 'proxy')[] = round % 2 === 0 ? ['direct', 'proxy'] : ['proxy', 'direct'];
      for (const side of order) {
        const target = side === 'direct' ? direct : viaProxy;
        const before = cpuMs(pid);
        const c = await consumerPerformance(classpath, target, {
          topic: consumeTopic!,
          numRecords: RECORDS,
          group: `bench-consume-${side}-${round}-${Date.now()}`,
        });
        if (side === 'proxy') proxyCpu.consume += cpuMs(pid) - before;
        consumeRuns[side].push(c);
        log(
          `consume round ${round} ${side}: ${c.recordsPerSec.toFixed(0)} rec/s, ${c.mbPerSec} MB/s (fetch ${c.fetchTimeMs} ms)`,
        );
      }
    }

    for (const side of rateOrder) {
      const target = side === 'direct' ? direct : viaProxy;
      const topic = `bench-rate-${side}-${Date.now()}`;
      await createTopics(direct, [{ topic, partitions: 3 }]);
      const before = cpuMs(pid);
      const r = await producerPerformance(classpath, target, {
        topic,
        numRecords: RATE_RECORDS,
        recordSize: RECORD_SIZE,
        throughput: RATE,
      });
      if (side === 'proxy') proxyCpu.rate += cpuMs(pid) - before;
      rateRuns[side].push(r);
      log(
        `rate ${RATE}/s ${side}: ${r.recordsPerSec.toFixed(0)} rec/s, avg ${r.avgLatencyMs} ms, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, p99.9 ${r.p999Ms} ms`,
      );
    }

    // Request round trips, one at a time: Produce acks=1 of one 1 KB record on one connection,
    // alternating direct and proxied blocks. Microsecond resolution, unlike the tools' whole ms.
    const rttTopic = `bench-rtt-${Date.now()}`;
    await createTopics(direct, [{ topic: rttTopic, partitions: 1 }]);
    const rtt: Record<'direct' | 'proxy', number[]> = { direct: [], proxy: [] };
    const conns = {
      direct: await RawClient.connect(cluster.bootstrap),
      // The proxy's listener for the partition leader (node 1): the connection a client would use.
      proxy: await RawClient.connect(`127.0.0.1:${proxy.port + 1 + cluster.brokers[0]!.nodeId}`),
    };
    const value = 'x'.repeat(RECORD_SIZE);
    let correlationId = 0;
    const blocks = 10;
    const before = cpuMs(pid);
    for (let block = 0; block < blocks * 2; block++) {
      const side = block % 2 === 0 ? 'direct' : 'proxy';
      for (let i = 0; i < RTT_REQUESTS / blocks; i++) {
        const frame = produceRequest(9, ++correlationId, rttTopic, 1, value);
        const t = process.hrtime.bigint();
        conns[side].write(frame);
        await conns[side].read(1);
        rtt[side].push(Number(process.hrtime.bigint() - t) / 1000);
      }
    }
    proxyCpu.rtt = cpuMs(pid) - before;
    conns.direct.close();
    conns.proxy.close();
    const pct = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))]!;
    const rttSummary = {
      requests: RTT_REQUESTS,
      directUs: { p50: Math.round(pct(rtt.direct, 0.5)), p99: Math.round(pct(rtt.direct, 0.99)) },
      proxyUs: { p50: Math.round(pct(rtt.proxy, 0.5)), p99: Math.round(pct(rtt.proxy, 0.99)) },
    };
    log(`request round trip: ${JSON.stringify(rttSummary)}`);

    const hwmMb = statusKb(pid, 'VmHWM') / 1024;
    const rssMb = statusKb(pid, 'VmRSS') / 1024;
    const prodRatio =
      median(produceRuns.proxy.map((r) => r.recordsPerSec)) /
      median(produceRuns.direct.map((r) => r.recordsPerSec));
    const consRatio =
      median(consumeRuns.proxy.map((r) => r.recordsPerSec)) /
      median(consumeRuns.direct.map((r) => r.recordsPerSec));
    const mbProduced = (ROUNDS * RECORDS * RECORD_SIZE) / 1e6;
    const mbConsumedViaProxy = (CONSUME_ROUNDS * RECORDS * RECORD_SIZE) / 1e6;
    const summary = {
      records: RECORDS,
      recordSize: RECORD_SIZE,
      rounds: ROUNDS,
      produce: {
        directRecPerSec: produceRuns.direct.map((r) => Math.round(r.recordsPerSec)),
        proxyRecPerSec: produceRuns.proxy.map((r) => Math.round(r.recordsPerSec)),
        ratio: Number(prodRatio.toFixed(3)),
        directP50P99: produceRuns.direct.map((r) => [r.p50Ms, r.p99Ms]),
        proxyP50P99: produceRuns.proxy.map((r) => [r.p50Ms, r.p99Ms]),
      },
      consume: {
        directRecPerSec: consumeRuns.direct.map((r) => Math.round(r.recordsPerSec)),
        proxyRecPerSec: consumeRuns.proxy.map((r) => Math.round(r.recordsPerSec)),
        ratio: Number(consRatio.toFixed(3)),
      },
      requestRoundTrip: {
        ...rttSummary,
        addedP50Us: rttSummary.proxyUs.p50 - rttSummary.directUs.p50,
        addedP99Us: rttSummary.proxyUs.p99 - rttSummary.directUs.p99,
      },
      fixedRate: {
        rate: RATE,
        records: RATE_RECORDS,
        direct: rateRuns.direct.map((r) => ({
          p50: r.p50Ms,
          p99: r.p99Ms,
          p999: r.p999Ms,
          avg: r.avgLatencyMs,
        })),
        proxy: rateRuns.proxy.map((r) => ({
          p50: r.p50Ms,
          p99: r.p99Ms,
          p999: r.p999Ms,
          avg: r.avgLatencyMs,
        })),
        addedP99Ms: median(rateRuns.proxy.map((r) => r.p99Ms)) - median(rateRuns.direct.map((r) => r.p99Ms)),
      },
      proxyProcess: {
        cpuMsProduce: Math.round(proxyCpu.produce),
        cpuMsConsume: Math.round(proxyCpu.consume),
        cpuMsFixedRate: Math.round(proxyCpu.rate),
        cpuMsRoundTrips: Math.round(proxyCpu.rtt),
        // CPU per MB relayed, each way: produce and consume each move RECORDS * RECORD_SIZE per round.
        cpuMsPerMbProduce: Number((proxyCpu.produce / mbProduced).toFixed(2)),
        cpuMsPerMbConsume: Number((proxyCpu.consume / mbConsumedViaProxy).toFixed(2)),
        peakRssMb: Number(hwmMb.toFixed(1)),
        endRssMb: Number(rssMb.toFixed(1)),
      },
      wallSeconds: Math.round((Date.now() - t0) / 1000),
      loadAverage: (await import('node:os')).loadavg().map((x) => Number(x.toFixed(2))),
    };
    console.log(JSON.stringify(summary, null, 2));
  } finally {
    const code = await proxy.stop();
    log(`proxy exited with ${code}`);
    await cluster.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
