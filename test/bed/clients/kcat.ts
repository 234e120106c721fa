// librdkafka through kcat 1.7: `kcat -P` to produce, `kcat -G group topic` (the balanced
// KafkaConsumer) to consume in a group. kcat cannot read a group's committed offsets, so the helper
// asks kafkajs for them afterwards.

import { fetchCommittedOffsets } from './kafkajs.js';
import { assertSucceeded, jsonLines, runProgram } from './run.js';
import {
  DEFAULT_CONSUME_TIMEOUT_MS,
  recordKey,
  recordValue,
  type BedClient,
  type ClientTarget,
  type ConsumeOptions,
  type ConsumeResult,
  type ConsumedRecord,
  type ProduceOptions,
  type ProduceResult,
} from './types.js';

export const KCAT = process.env['KOP_KCAT'] ?? 'kcat';

function connectionArgs(target: ClientTarget): string[] {
  const args = [
    '-b',
    target.bootstrap,
    '-X',
    'reconnect.backoff.ms=50',
    '-X',
    'reconnect.backoff.max.ms=1000',
  ];
  if (target.sasl) {
    args.push(
      '-X',
      'security.protocol=SASL_PLAINTEXT',
      '-X',
      `sasl.mechanisms=${target.sasl.mechanism ?? 'PLAIN'}`,
    );
    args.push('-X', `sasl.username=${target.sasl.username}`, '-X', `sasl.password=${target.sasl.password}`);
  }
  return args;
}

/** Produces records `key-i`/`value-i` (kcat's default partitioner hashes the key). */
export async function produce(target: ClientTarget, opts: ProduceOptions): Promise<ProduceResult> {
  const start = opts.start ?? 0;
  let input = '';
  for (let i = start; i < start + opts.count; i++) input += `${recordKey(i)}\t${recordValue(i)}\n`;
  const args = [
    '-P',
    '-t',
    opts.topic,
    '-K',
    '\t',
    '-X',
    'acks=all',
    '-X',
    'linger.ms=5',
    ...connectionArgs(target),
  ];
  const result = await runProgram(KCAT, args, { input, timeoutMs: 60_000 });
  assertSucceeded('kcat -P', result);
  // kcat reports failed deliveries on stderr but may still exit 0.
  if (/Delivery failed|ERROR/i.test(result.stderr))
    throw new Error(`kcat -P reported errors:\n${result.stderr}`);
  // kcat does not report where records went.
  return { count: opts.count, partitions: [] };
}

export interface KcatConsumeOptions extends ConsumeOptions {
  /** Extra librdkafka properties (-X). */
  config?: Record<string, string>;
}

/**
 * Consumes in a balanced group until `max` records (`-c`) or the deadline (SIGTERM, on which kcat
 * closes the consumer cleanly). librdkafka stores the offset of each record as kcat receives it and
 * auto-commits the stored offsets, finally on close, so exactly the returned records are committed.
 */
export async function consume(target: ClientTarget, opts: KcatConsumeOptions): Promise<ConsumeResult> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_CONSUME_TIMEOUT_MS;
  const config: Record<string, string> = {
    'auto.offset.reset': 'earliest',
    'session.timeout.ms': '10000',
    'heartbeat.interval.ms': '500',
    'fetch.wait.max.ms': '100',
    'auto.commit.interval.ms': '500',
    ...opts.config,
  };
  const args = ['-G', opts.group, '-c', String(opts.max), '-J', '-q', ...connectionArgs(target)];
  for (const [key, value] of Object.entries(config)) args.push('-X', `${key}=${value}`);
  args.push(opts.topic);
  const result = await runProgram(KCAT, args, { timeoutMs });
  const timedOut = result.signal === 'SIGTERM' || result.signal === 'SIGKILL';
  if (!timedOut) assertSucceeded('kcat -G', result);
  const records: ConsumedRecord[] = jsonLines(result.stdout).map((line) => ({
    topic: String(line['topic']),
    partition: Number(line['partition']),
    offset: Number(line['offset']),
    key: (line['key'] as string | null | undefined) ?? null,
    value: (line['payload'] as string | null | undefined) ?? null,
  }));
  return {
    records,
    committed: await fetchCommittedOffsets(target, opts.group, opts.topic),
    timedOut: records.length < opts.max,
  };
}

export const kcatClient: BedClient = { name: 'kcat', produce, consume };
