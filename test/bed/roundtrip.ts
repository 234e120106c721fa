// A kafkajs round trip against a bed cluster, for the bed smoke tests (test/integration/bed-kafka*.test.ts).
import { Kafka, logLevel } from 'kafkajs';
import type { KafkaConfig } from 'kafkajs';

export function kafkaClient(bootstrap: string, extra: Partial<KafkaConfig> = {}): Kafka {
  return new Kafka({
    clientId: 'bed-test',
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3000,
    retry: { retries: 8, initialRetryTime: 200 },
    ...extra,
  });
}

/** Produces `values` to a new topic and consumes them back in a new group; returns what was read. */
export async function roundTrip(kafka: Kafka, topic: string, values: string[]): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
  const producer = kafka.producer();
  await producer.connect();
  try {
    await producer.send({ topic, messages: values.map((value) => ({ value })) });
  } finally {
    await producer.disconnect();
  }
  const consumer = kafka.consumer({
    groupId: `${topic}-group`,
    sessionTimeout: 10_000,
    heartbeatInterval: 1000,
  });
  const received: string[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`consumed ${received.length}/${values.length} records`)),
        60_000,
      );
      // A crashed consumer stops silently otherwise: fail with its error instead of the timeout.
      // Retriable crashes (restart: true) are followed by a restart of the consumer.
      consumer.on(consumer.events.CRASH, ({ payload }) => {
        if (payload.restart) return;
        clearTimeout(timer);
        reject(payload.error);
      });
      void consumer
        .run({
          eachMessage: async ({ message }) => {
            received.push(message.value?.toString('utf8') ?? '');
            if (received.length >= values.length) {
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
  return received;
}
