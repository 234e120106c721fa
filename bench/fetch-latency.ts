/**
 * One Fetch at a time, direct and through the proxy, timed from request to the last byte of the
 * response: shows how long the proxy's relay of a large response takes, apart from any client.
 *
 *   npx tsx bench/fetch-latency.ts [--records 4000] [--rounds 20] [--cpu-prof <dir>]
 *
 * Starts a 1-node Kafka from the bed and the proxy CLI (`npm run build` first), writes `records`
 * 1 KB records to a 1-partition topic, then fetches them from offset 0 with partition limits of
 * 1 MiB and 4 MiB (Fetch v11, the response is relayed without being decoded), in blocks of 10
 * rotating between three sides: direct, through the proxy, and through a bare Node relay (a child
 * process that only pipes sockets, no Kafka code: the floor for any relay written in Node). It
 * prints the median time of each and the CPU each relay process spent per MB it passed on. Then
 * the same three sides produce 16 KiB batches with 5 requests in flight, as a producer does, and
 * it prints each side's MB/s.
 */
import { parseArgs } from 'node:util';
import { encodeRequestFrame } from '../protocol/frames.js';
import {
  defaultFetchPartition,
  defaultFetchRequest,
  defaultFetchTopic,
} from '../protocol/messages/fetch-request.js';
import { ApiKey } from '../protocol/messages/index.js';
import { createTopics } from '../test/bed/clients/kafkajs.js';
import { startKafka } from '../test/bed/kafka.js';
import { freePortRange, spawnProxy } from '../test/harness/proxy.js';
import { RawClient, produceRequest } from '../test/harness/raw-client.js';
import { cpuByThreadMs, cpuMs, cpuSplitMs } from './process-stats.js';
import { startBareRelay } from './relays.js';

const { values: args } = parseArgs({
  options: {
    records: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '20' },
    /** Writes the proxy's .cpuprofile into this directory when it exits. */
    'cpu-prof': { type: 'string' },
  },
});
const RECORDS = Number(args.records);
const ROUNDS = Number(args.rounds);
/** Produce requests per side and block. */
const PRODUCE_BLOCK = 300;

function fetchFrame(topic: string, correlationId: number, partitionMaxBytes: number): Buffer {
  return encodeRequestFrame(
    { apiKey: ApiKey.Fetch, apiVersion: 11, correlationId, clientId: 'bench-fetch-latency' },
    {
      ...defaultFetchRequest(),
      maxWaitMs: 500,
      minBytes: 1,
      maxBytes: 52_428_800,
      topics: [
        {
          ...defaultFetchTopic(),
          topic,
          partitions: [{ ...defaultFetchPartition(), partition: 0, fetchOffset: 0n, partitionMaxBytes }],
        },
      ],
      forgottenTopicsData: [],
      rackId: '',
    },
  );
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const kafka = await startKafka({ brokers: 1 });
  const cpuProf = args['cpu-prof'];
  const proxy = await spawnProxy(
    ['--bootstrap-server', kafka.bootstrap, '--store', 'memory://'],
    {},
    cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${cpuProf}`] : [],
  );
  const bare = await startBareRelay(await freePortRange(0), kafka.bootstrap);
  try {
    const topic = `bench-fetch-${Date.now()}`;
    await createTopics({ bootstrap: kafka.bootstrap }, [{ topic, partitions: 1 }]);
    const producer = await RawClient.connect(kafka.bootstrap);
    const value = 'x'.repeat(1024);
    for (let i = 0; i < RECORDS; i += 100) {
      const n = Math.min(100, RECORDS - i);
      for (let j = 0; j < n; j++) producer.write(produceRequest(9, i + j + 1, topic, 1, value));
      await producer.read(n);
    }
    producer.close();
    const sides = {
      direct: await RawClient.connect(kafka.bootstrap),
      // The proxy's listener for the partition leader, as a client would use it.
      proxy: await RawClient.connect(`127.0.0.1:${proxy.port + 1 + kafka.brokers[0]!.nodeId}`),
      bare: await RawClient.connect(bare.address),
    };
    type Side = keyof typeof sides;
    const pids: Record<Side, number | undefined> = {
      direct: undefined,
      proxy: proxy.child.pid,
      bare: bare.pid,
    };
    const orders: Side[][] = [
      ['direct', 'proxy', 'bare'],
      ['proxy', 'bare', 'direct'],
      ['bare', 'direct', 'proxy'],
    ];
    let correlationId = 0;
    for (const limit of [1 << 20, 4 << 20]) {
      const ms: Record<Side, number[]> = { direct: [], proxy: [], bare: [] };
      const cpu: Record<Side, number> = { direct: 0, proxy: 0, bare: 0 };
      const relayed: Record<Side, number> = { direct: 0, proxy: 0, bare: 0 };
      let bytes = 0;
      for (let round = 0; round < ROUNDS; round++) {
        for (const side of orders[round % orders.length]!) {
          const cpu0 = cpuMs(pids[side]);
          for (let i = 0; i < 10; i++) {
            const t = process.hrtime.bigint();
            sides[side].write(fetchFrame(topic, ++correlationId, limit));
            const [frame] = await sides[side].read(1);
            ms[side].push(Number(process.hrtime.bigint() - t) / 1e6);
            bytes = frame!.length;
            relayed[side] += bytes;
          }
          cpu[side] += cpuMs(pids[side]) - cpu0;
        }
      }
      const d = median(ms.direct);
      const line = (side: 'proxy' | 'bare'): string => {
        const m = median(ms[side]);
        const perMb = cpu[side] / (relayed[side] / 1e6);
        return `${side} ${m.toFixed(2)} ms (added ${(m - d).toFixed(2)} ms, ${perMb.toFixed(2)} ms CPU per MB relayed)`;
      };
      console.log(
        `partition limit ${limit >> 20} MiB (responses of ${bytes} bytes), medians of ${ROUNDS * 10}: direct ${d.toFixed(2)} ms; ${line('proxy')}; ${line('bare')}`,
      );
    }
    // Produce the way a producer does: 16 KiB batches (Produce v11, acks=all: the highest the proxy offers, so what Kafka 4 clients
    // send; the proxy decodes these responses for KIP-951 addresses), up to 5 requests in flight.
    const batch = 'p'.repeat(16 * 1024);
    const elapsed: Record<Side, number> = { direct: 0, proxy: 0, bare: 0 };
    const produceCpu: Record<Side, number> = { direct: 0, proxy: 0, bare: 0 };
    let produced = 0;
    const proxyThreads0 = cpuByThreadMs(pids.proxy);
    const proxySplit0 = cpuSplitMs(pids.proxy);
    for (let round = 0; round < ROUNDS; round++) {
      for (const side of orders[round % orders.length]!) {
        const c = sides[side];
        const cpu0 = cpuMs(pids[side]);
        const t = process.hrtime.bigint();
        let sent = 0;
        let answered = 0;
        while (answered < PRODUCE_BLOCK) {
          while (sent < PRODUCE_BLOCK && sent - answered < 5) {
            c.write(produceRequest(11, ++correlationId, topic, -1, batch));
            sent++;
          }
          await c.read(1);
          answered++;
        }
        elapsed[side] += Number(process.hrtime.bigint() - t) / 1e6;
        produceCpu[side] += cpuMs(pids[side]) - cpu0;
        if (side === 'direct') produced += PRODUCE_BLOCK * batch.length;
      }
    }
    const mbPerS = (side: Side): number => produced / 1e6 / (elapsed[side] / 1000);
    const produceLine = (side: 'proxy' | 'bare'): string =>
      `${side} ${mbPerS(side).toFixed(0)} MB/s (ratio ${(mbPerS(side) / mbPerS('direct')).toFixed(2)}, ${(produceCpu[side] / (produced / 1e6)).toFixed(2)} ms CPU per MB)`;
    console.log(
      `produce, 16 KiB batches, 5 in flight, ${ROUNDS} blocks of ${PRODUCE_BLOCK} per side: direct ${mbPerS('direct').toFixed(0)} MB/s; ${produceLine('proxy')}; ${produceLine('bare')}`,
    );
    // Where the proxy's CPU of the produce phase went, by thread (all three sides' blocks: the
    // proxy's threads are busy only during its own).
    const threads = [...cpuByThreadMs(pids.proxy)]
      .map(([name, ms]) => [name, ms - (proxyThreads0.get(name) ?? 0)] as const)
      .filter(([, ms]) => ms > 0)
      .sort((a, b) => b[1] - a[1]);
    const proxySplit = cpuSplitMs(pids.proxy);
    console.log(
      `proxy CPU during the produce phase: user ${(proxySplit.user - proxySplit0.user).toFixed(0)} ms, system ${(proxySplit.sys - proxySplit0.sys).toFixed(0)} ms; by thread: ${threads.map(([n, ms]) => `${n} ${ms.toFixed(0)} ms`).join(', ')}`,
    );
    for (const c of Object.values(sides)) c.close();
  } finally {
    await bare.stop();
    await proxy.stop();
    await kafka.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
