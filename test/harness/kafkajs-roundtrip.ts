// A small kafkajs produce + group consume + commit round trip for an arbitrary kafkajs
// configuration (TLS, SASL), for targets the bed's kafkajs helper has no options for.
import { Kafka, logLevel } from 'kafkajs';
import type { KafkaConfig } from 'kafkajs';
import { createTopics } from '../bed/clients/kafkajs.js';
import type { ClientTarget } from '../bed/clients/types.js';
import { uniqueName } from '../bed/clients/scenarios.js';

export interface RoundTripResult {
  topic: string;
  /** The distinct values read, in the order first read. */
  values: string[];
  /** Records delivered, counting again those a rejoin delivered twice (at-least-once). */
  deliveries: number;
  committed: number;
  brokers: { nodeId: number; host: string; port: number }[];
}

/**
 * Creates a topic through `admin` (default: the brokers directly), produces `count` records and
 * consumes them in a group with `config`, committing; returns what was read and the committed
 * total as the group coordinator reports it. It waits for `count` distinct values: a consumer that
 * rejoins (a session lost on a loaded machine) reads again from its last commit, as it would from
 * a broker, and those deliveries are counted but do not end the wait early.
 */
export async function kafkajsRoundTrip(
  config: Omit<KafkaConfig, 'logLevel'>,
  admin: ClientTarget,
  count = 100,
): Promise<RoundTripResult> {
  const topic = uniqueName('rt');
  await createTopics(admin, [{ topic, partitions: 2 }]);
  const kafka = new Kafka({
    connectionTimeout: 5_000,
    requestTimeout: 15_000,
    retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: 8 },
    ...config,
    logLevel: logLevel.NOTHING,
  });
  const adminClient = kafka.admin();
  await adminClient.connect();
  const { brokers } = await adminClient.describeCluster();

  // Idempotent: a send retried after a timeout on a loaded machine must not write its records
  // twice, or the committed total (the log's end) passes `count` (once 71 of 50).
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  await producer.send({
    topic,
    acks: -1,
    messages: Array.from({ length: count }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
  });
  await producer.disconnect();

  const group = `${topic}-group`;
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: 10_000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 100,
  });
  const values: string[] = [];
  const seen = new Set<string>();
  let deliveries = 0;
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`consumed ${values.length} of ${count} in 30 s (${deliveries} deliveries)`)),
        30_000,
      );
      consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch, resolveOffset }) => {
            for (const m of batch.messages) {
              const value = m.value?.toString() ?? '';
              deliveries++;
              if (!seen.has(value)) values.push(value);
              seen.add(value);
              resolveOffset(m.offset);
            }
            const last = batch.messages.at(-1);
            if (last) {
              await consumer.commitOffsets([
                { topic, partition: batch.partition, offset: String(BigInt(last.offset) + 1n) },
              ]);
            }
            if (values.length >= count) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  const offsets = await adminClient.fetchOffsets({ groupId: group, topics: [topic] });
  await adminClient.disconnect();
  const committed = offsets
    .flatMap((t) => t.partitions)
    .reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0);
  return { topic, values, deliveries, committed, brokers };
}
