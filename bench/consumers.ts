// The consumers of the data-path benchmark (bench/proxy.ts) besides Kafka's ConsumerPerformance
// (Java): librdkafka through kcat (`-G`, its balanced KafkaConsumer, as test/bed/clients/kcat.ts
// drives it) and kafkajs in this process. Each reads the first `records` records of a topic in a new
// group and returns its records per second; the relay's CPU is measured around it by the caller.
// They differ on the wire from the Java 4.4 consumer (Fetch v18, NodeEndpoints at the end of the
// answer): kcat 1.7's librdkafka 2.0 and kafkajs 2.2 send Fetch v11, each with its own fetch sizes.
import { spawn } from 'node:child_process';
import { Kafka, logLevel } from 'kafkajs';
import { KCAT } from '../test/bed/clients/kcat.js';

/** The consumers `--consumers` may name; `java` is ConsumerPerformance (kafka-tools.ts). */
export const CONSUMER_NAMES = ['java', 'librdkafka', 'kafkajs'] as const;
export type ConsumerName = (typeof CONSUMER_NAMES)[number];

export function parseConsumers(list: string): ConsumerName[] {
  const names = list
    .split(',')
    .map((c) => c.trim())
    .filter((c) => c !== '');
  for (const c of names)
    if (!(CONSUMER_NAMES as readonly string[]).includes(c))
      throw new Error(`unknown consumer ${c} (known: ${CONSUMER_NAMES.join(', ')})`);
  return names as ConsumerName[];
}

export interface ConsumeRun {
  topic: string;
  records: number;
  group: string;
  timeoutMs: number;
}

/**
 * kcat -G: consumes `records` records (`-c`) from the earliest offset and exits. Its output (one
 * short line per record) goes to /dev/null: only the relay's CPU is measured, and kcat's own
 * printing would only slow the reads.
 */
export async function consumeWithKcat(
  bootstrap: string,
  run: ConsumeRun,
): Promise<{ recordsPerSec: number }> {
  const args = [
    '-G',
    run.group,
    '-b',
    bootstrap,
    '-c',
    String(run.records),
    '-q',
    '-f',
    '%o\n',
    '-X',
    'auto.offset.reset=earliest',
    '-X',
    'enable.auto.commit=false',
    run.topic,
  ];
  const start = process.hrtime.bigint();
  await new Promise<void>((resolve, reject) => {
    const child = spawn(KCAT, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), run.timeoutMs);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`kcat -G exited with ${code ?? signal}: ${stderr.slice(-2000)}`));
    });
  });
  return { recordsPerSec: run.records / (Number(process.hrtime.bigint() - start) / 1e9) };
}

/** kafkajs in this process: a consumer from the beginning, until `records` records have arrived. */
export async function consumeWithKafkajs(
  bootstrap: string,
  run: ConsumeRun,
): Promise<{ recordsPerSec: number }> {
  const kafka = new Kafka({
    clientId: `bench-kafkajs-${process.pid}`,
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    requestTimeout: 30_000,
  });
  const consumer = kafka.consumer({ groupId: run.group, sessionTimeout: 30_000 });
  const start = process.hrtime.bigint();
  let seen = 0;
  try {
    await consumer.connect();
    await consumer.subscribe({ topics: [run.topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`kafkajs: ${seen} of ${run.records} records in ${run.timeoutMs} ms`)),
        run.timeoutMs,
      );
      consumer
        .run({
          autoCommit: false,
          eachBatch: ({ batch }) => {
            seen += batch.messages.length;
            if (seen >= run.records) {
              clearTimeout(timer);
              resolve();
            }
            return Promise.resolve();
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return { recordsPerSec: run.records / (Number(process.hrtime.bigint() - start) / 1e9) };
}
