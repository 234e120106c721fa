// kafkajs, in-process: the cheapest client of the bed, also used for topic creation and for reading
// a group's committed offsets on behalf of clients that cannot (kcat).

import { Kafka, Partitioners, logLevel, type Admin, type SASLOptions } from 'kafkajs';

import {
  DEFAULT_CONSUME_TIMEOUT_MS,
  recordKey,
  recordValue,
  sortCommitted,
  type BedClient,
  type ClientTarget,
  type CommittedOffset,
  type ConsumeOptions,
  type ConsumeResult,
  type ConsumedRecord,
  type ProduceOptions,
  type ProduceResult,
} from './types.js';

let clientSeq = 0;

function kafkaFor(target: ClientTarget): Kafka {
  let sasl: SASLOptions | undefined;
  if (target.sasl) {
    const { username, password } = target.sasl;
    const mechanism = target.sasl.mechanism ?? 'PLAIN';
    sasl =
      mechanism === 'PLAIN'
        ? { mechanism: 'plain', username, password }
        : mechanism === 'SCRAM-SHA-256'
          ? { mechanism: 'scram-sha-256', username, password }
          : { mechanism: 'scram-sha-512', username, password };
  }
  return new Kafka({
    clientId: `bed-kafkajs-${process.pid}-${++clientSeq}`,
    brokers: target.bootstrap.split(','),
    ...(sasl ? { sasl } : {}),
    // kafkajs logs connection errors at ERROR while it retries; a failing test reports its own error.
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
    requestTimeout: 15_000,
    retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: 10 },
  });
}

async function withAdmin<T>(target: ClientTarget, fn: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = kafkaFor(target).admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

export interface TopicSpec {
  topic: string;
  partitions?: number;
  replicationFactor?: number;
}

/** Creates the topics (an existing topic is left alone) and waits until every partition has a leader. */
export async function createTopics(target: ClientTarget, topics: TopicSpec[]): Promise<void> {
  await withAdmin(target, async (admin) => {
    await admin.createTopics({
      // kafkajs' own wait gives up on UNKNOWN_TOPIC_OR_PARTITION, which a broker answers while it is
      // still applying the new topic's metadata; the loop below waits for that too.
      waitForLeaders: false,
      topics: topics.map((t) => ({
        topic: t.topic,
        numPartitions: t.partitions ?? 1,
        replicationFactor: t.replicationFactor ?? 1,
      })),
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const { topics: meta } = await admin.fetchTopicMetadata({ topics: topics.map((t) => t.topic) });
        const ready = topics.every((t) => {
          const m = meta.find((x) => x.name === t.topic);
          return m && m.partitions.length === (t.partitions ?? 1) && m.partitions.every((p) => p.leader >= 0);
        });
        if (ready) return;
      } catch (error) {
        if (Date.now() > deadline) throw error;
      }
      if (Date.now() > deadline)
        throw new Error(`topics ${topics.map((t) => t.topic).join(', ')} have no leaders after 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
}

/** The group's committed offsets for `topic` (partitions without a commit are left out). */
export async function fetchCommittedOffsets(
  target: ClientTarget,
  group: string,
  topic: string,
): Promise<CommittedOffset[]> {
  return withAdmin(target, async (admin) => {
    const topics = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    const out: CommittedOffset[] = [];
    for (const t of topics) {
      for (const p of t.partitions) {
        const offset = Number(p.offset);
        if (offset >= 0) out.push({ topic: t.topic, partition: p.partition, offset });
      }
    }
    return sortCommitted(out);
  });
}

export async function describeCluster(target: ClientTarget): Promise<{
  clusterId: string;
  controller: number | null;
  brokers: { nodeId: number; host: string; port: number }[];
}> {
  return withAdmin(target, (admin) => admin.describeCluster());
}

export async function produce(target: ClientTarget, opts: ProduceOptions): Promise<ProduceResult> {
  const producer = kafkaFor(target).producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
    // kafkajs retries a broker's whole produce request when one of its partitions fails (typically
    // NOT_LEADER on a topic created a moment ago), rewriting the batches that had succeeded.
    // Idempotence makes the broker drop those duplicates.
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  try {
    const start = opts.start ?? 0;
    const messages = Array.from({ length: opts.count }, (_, n) => ({
      key: recordKey(start + n),
      value: recordValue(start + n),
    }));
    const metadata = await producer.send({ topic: opts.topic, messages, acks: -1 });
    return { count: opts.count, partitions: metadata.map((m) => m.partition).sort((x, y) => x - y) };
  } finally {
    await producer.disconnect();
  }
}

export interface KafkajsConsumeOptions extends ConsumeOptions {
  /** Read from the start of the partitions when the group has no committed offset (default true). */
  fromBeginning?: boolean;
}

/**
 * Consumes in group `group` until exactly `max` records or the deadline, committing the offsets of
 * the records it returns after every batch (autoCommit off, so nothing past `max` is committed).
 */
export async function consume(target: ClientTarget, opts: KafkajsConsumeOptions): Promise<ConsumeResult> {
  const kafka = kafkaFor(target);
  const consumer = kafka.consumer({
    groupId: opts.group,
    // Tuned for a local broker: a dead member is noticed quickly, an empty fetch returns quickly.
    sessionTimeout: 10_000,
    rebalanceTimeout: 10_000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 100,
    allowAutoTopicCreation: false,
    retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: 10 },
  });
  const records: ConsumedRecord[] = [];
  let finish: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  let failure: unknown;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_CONSUME_TIMEOUT_MS;
  const deadline = setTimeout(() => finish(), timeoutMs);

  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [opts.topic], fromBeginning: opts.fromBeginning ?? true });
    // A consumer that crashes (e.g. the proxy closes the connection) must fail the call, not hang
    // until the deadline. Retriable crashes (e.g. the coordinator still loading on a fresh broker)
    // restart the consumer by themselves.
    consumer.on(consumer.events.CRASH, (event) => {
      if (event.payload.restart) return;
      failure = event.payload.error;
      finish();
    });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
        let last: string | undefined;
        for (const message of batch.messages) {
          if (records.length >= opts.max || !isRunning() || isStale()) break;
          records.push({
            topic: batch.topic,
            partition: batch.partition,
            offset: Number(message.offset),
            key: message.key?.toString('utf8') ?? null,
            value: message.value?.toString('utf8') ?? null,
          });
          resolveOffset(message.offset);
          last = message.offset;
        }
        if (last !== undefined) {
          await consumer.commitOffsets([
            { topic: batch.topic, partition: batch.partition, offset: String(BigInt(last) + 1n) },
          ]);
        }
        if (records.length >= opts.max) finish();
      },
    });
    await finished;
  } finally {
    clearTimeout(deadline);
    await consumer.disconnect();
  }
  if (failure) throw failure;
  return {
    records,
    committed: await fetchCommittedOffsets(target, opts.group, opts.topic),
    timedOut: records.length < opts.max,
  };
}

export const kafkajsClient: BedClient = { name: 'kafkajs', produce, consume };

/** OffsetCommit without a member (an admin's commit, as kafka-consumer-groups --reset-offsets). */
export async function setGroupOffsets(
  target: ClientTarget,
  group: string,
  topic: string,
  offsets: { partition: number; offset: number }[],
): Promise<void> {
  await withAdmin(target, (admin) =>
    admin.setOffsets({
      groupId: group,
      topic,
      partitions: offsets.map((o) => ({ partition: o.partition, offset: String(o.offset) })),
    }),
  );
}

/** A transaction that only commits the group's offsets (TxnOffsetCommit), then commits. */
export async function commitOffsetsInTransaction(
  target: ClientTarget,
  opts: {
    transactionalId: string;
    group: string;
    topic: string;
    offsets: { partition: number; offset: number }[];
  },
): Promise<void> {
  const producer = kafkaFor(target).producer({
    transactionalId: opts.transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  try {
    const txn = await producer.transaction();
    await txn.sendOffsets({
      consumerGroupId: opts.group,
      topics: [
        {
          topic: opts.topic,
          partitions: opts.offsets.map((o) => ({ partition: o.partition, offset: String(o.offset) })),
        },
      ],
    });
    await txn.commit();
  } finally {
    await producer.disconnect();
  }
}
