// A kafkajs consumer group for fault tests: `members` consumers in one group read a topic slowly
// (a pause per message), committing every message's offset through the proxy, and keep going
// through disconnects (kafkajs restarts a crashed consumer; we restart one that gave up). It
// finishes when every record of the topic was seen at least once and the group's committed offsets
// reach the end of every partition.
import { Kafka, logLevel } from 'kafkajs';
import type { Consumer } from 'kafkajs';
import { sleep } from './commit-checker.js';

export interface GroupRun {
  /** Resolves when every record was seen and committed, or rejects at the deadline. */
  done: Promise<void>;
  /** Distinct records seen, and deliveries in all (the difference is redelivery). */
  seen(): { distinct: number; deliveries: number };
  /** Consumer crashes (kafkajs CRASH events) and restarts the helper did itself. */
  crashes: number;
  restarts: number;
  /** Commits kafkajs reported as failed (they are retried by the next message's commit). */
  commitFailures: number;
  stop(): Promise<void>;
}

export interface GroupRunOptions {
  bootstrap: string;
  topic: string;
  group: string;
  /** Records per partition (the topic's end offsets). */
  endOffsets: Map<number, number>;
  members?: number;
  perMessageMs?: number;
  timeoutMs?: number;
}

export function runGroup(opts: GroupRunOptions): GroupRun {
  const kafka = new Kafka({
    clientId: `reliability-${opts.group}`,
    brokers: [opts.bootstrap],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
    requestTimeout: 15_000,
    retry: { initialRetryTime: 200, maxRetryTime: 2_000, retries: 30 },
  });
  const seen = new Set<string>();
  let deliveries = 0;
  const committed = new Map<number, number>();
  const consumers: Consumer[] = [];
  let stopped = false;
  const total = [...opts.endOffsets.values()].reduce((a, b) => a + b, 0);
  const run: GroupRun = {
    done: Promise.resolve(),
    seen: () => ({ distinct: seen.size, deliveries }),
    crashes: 0,
    restarts: 0,
    commitFailures: 0,
    stop: async () => {
      stopped = true;
      await Promise.allSettled(consumers.map((c) => c.disconnect()));
    },
  };
  const finished = () =>
    seen.size >= total && [...opts.endOffsets].every(([p, end]) => (committed.get(p) ?? 0) >= end);

  const startMember = async (): Promise<void> => {
    const consumer = kafka.consumer({
      groupId: opts.group,
      sessionTimeout: 10_000,
      rebalanceTimeout: 10_000,
      heartbeatInterval: 500,
      maxWaitTimeInMs: 100,
      retry: { initialRetryTime: 200, maxRetryTime: 2_000, retries: 30 },
    });
    consumers.push(consumer);
    consumer.on(consumer.events.CRASH, (event) => {
      run.crashes++;
      if (!event.payload.restart && !stopped) {
        // kafkajs gave up on this member: start a new one, as an application's supervisor would.
        run.restarts++;
        void consumer.disconnect().finally(() => void startMember().catch(() => {}));
      }
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [opts.topic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        deliveries++;
        seen.add(`${partition}:${message.offset}`);
        if (opts.perMessageMs) await sleep(opts.perMessageMs);
        const next = Number(message.offset) + 1;
        try {
          await consumer.commitOffsets([{ topic: opts.topic, partition, offset: String(next) }]);
          committed.set(partition, Math.max(committed.get(partition) ?? 0, next));
        } catch (err) {
          run.commitFailures++;
          throw err; // the message is redelivered after kafkajs's retry
        }
      },
    });
  };

  run.done = (async () => {
    for (let i = 0; i < (opts.members ?? 2); i++) await startMember();
    const deadline = Date.now() + (opts.timeoutMs ?? 90_000);
    while (!finished()) {
      if (Date.now() > deadline) {
        throw new Error(
          `group ${opts.group} did not finish: ${seen.size}/${total} records seen, committed ${JSON.stringify([...committed])}`,
        );
      }
      await sleep(100);
    }
  })();
  return run;
}
