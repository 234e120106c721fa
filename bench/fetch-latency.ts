/**
 * One Fetch at a time, direct and through the proxy, timed from request to the last byte of the
 * response: shows how long the proxy's relay of a large response takes, apart from any client.
 *
 *   npx tsx bench/fetch-latency.ts [--records 4000] [--rounds 20]
 *
 * Starts a 1-node Kafka from the bed and the proxy CLI (`npm run build` first), writes `records`
 * 1 KB records to a 1-partition topic, then fetches them from offset 0 with partition limits of
 * 1 MiB and 4 MiB (Fetch v11, the response is relayed without being decoded), in blocks of 10
 * alternating direct and proxied, and prints the median time of each.
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
import { spawnProxy } from '../test/harness/proxy.js';
import { RawClient, produceRequest } from '../test/harness/raw-client.js';

const { values: args } = parseArgs({
  options: { records: { type: 'string', default: '4000' }, rounds: { type: 'string', default: '20' } },
});
const RECORDS = Number(args.records);
const ROUNDS = Number(args.rounds);

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
  const proxy = await spawnProxy(['--bootstrap-server', kafka.bootstrap, '--store', 'memory://']);
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
    };
    let correlationId = 0;
    for (const limit of [1 << 20, 4 << 20]) {
      const ms: Record<'direct' | 'proxy', number[]> = { direct: [], proxy: [] };
      let bytes = 0;
      for (let round = 0; round < ROUNDS; round++) {
        for (const side of round % 2 === 0
          ? (['direct', 'proxy'] as const)
          : (['proxy', 'direct'] as const)) {
          for (let i = 0; i < 10; i++) {
            const t = process.hrtime.bigint();
            sides[side].write(fetchFrame(topic, ++correlationId, limit));
            const [frame] = await sides[side].read(1);
            ms[side].push(Number(process.hrtime.bigint() - t) / 1e6);
            bytes = frame!.length;
          }
        }
      }
      const d = median(ms.direct);
      const p = median(ms.proxy);
      console.log(
        `partition limit ${limit >> 20} MiB (responses of ${bytes} bytes): direct ${d.toFixed(2)} ms, proxy ${p.toFixed(2)} ms, added ${(p - d).toFixed(2)} ms (relay at ${((bytes / (p - d)) * 1e-3).toFixed(0)} MB/s if not overlapped)`,
      );
    }
    sides.direct.close();
    sides.proxy.close();
  } finally {
    await proxy.stop();
    await kafka.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
