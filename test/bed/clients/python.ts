// python confluent-kafka 1.7 (librdkafka 2.0) through test/bed/clients/confluent_driver.py.
// The Debian package is installed for the system interpreter only, hence /usr/bin/python3.

import { fileURLToPath } from 'node:url';

import { assertSucceeded, jsonLines, runProgram, tail } from './run.js';
import {
  DEFAULT_CONSUME_TIMEOUT_MS,
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

export const PYTHON = process.env['KOP_PYTHON'] ?? '/usr/bin/python3';
const DRIVER = fileURLToPath(new URL('./confluent_driver.py', import.meta.url));

function targetArgs(target: ClientTarget): string[] {
  const args = ['--bootstrap', target.bootstrap];
  if (target.sasl) {
    args.push('--sasl-mechanism', target.sasl.mechanism ?? 'PLAIN');
    args.push('--username', target.sasl.username, '--password', target.sasl.password);
  }
  return args;
}

async function runDriver(
  target: ClientTarget,
  args: string[],
  timeoutMs: number,
): Promise<Record<string, unknown>[]> {
  const result = await runProgram(PYTHON, [DRIVER, ...args, ...targetArgs(target)], { timeoutMs });
  const lines = jsonLines(result.stdout);
  const error = lines.find((l) => l['type'] === 'error');
  if (error) {
    throw new Error(
      `Python driver ${args[0]}: ${String(error['error'])}: ${String(error['message'])}\n${tail(result.stderr, 15)}`,
    );
  }
  assertSucceeded(`Python driver ${args[0]}`, result);
  return lines;
}

function committedFrom(lines: Record<string, unknown>[]): CommittedOffset[] {
  const line = lines.find((l) => l['type'] === 'committed');
  if (!line) throw new Error('Python driver printed no committed offsets');
  return sortCommitted(line['offsets'] as CommittedOffset[]);
}

export async function produce(target: ClientTarget, opts: ProduceOptions): Promise<ProduceResult> {
  const args = [
    'produce',
    '--topic',
    opts.topic,
    '--count',
    String(opts.count),
    '--start',
    String(opts.start ?? 0),
  ];
  const line = (await runDriver(target, args, 60_000)).find((l) => l['type'] === 'produced');
  if (!line) throw new Error('Python driver printed no produce result');
  return { count: Number(line['count']), partitions: line['partitions'] as number[] };
}

/** Consumes in a group, committing synchronously (`commit(asynchronous=False)`) after every batch. */
export async function consume(target: ClientTarget, opts: ConsumeOptions): Promise<ConsumeResult> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_CONSUME_TIMEOUT_MS;
  const args = ['consume', '--topic', opts.topic, '--group', opts.group, '--max', String(opts.max)];
  args.push('--timeout-ms', String(timeoutMs));
  const lines = await runDriver(target, args, timeoutMs + 30_000);
  const records = lines.filter((l) => l['type'] === 'record') as unknown as (ConsumedRecord & {
    type: string;
  })[];
  const done = lines.find((l) => l['type'] === 'done');
  return {
    records: records.map(({ topic, partition, offset, key, value }) => ({
      topic,
      partition,
      offset,
      key,
      value,
    })),
    committed: committedFrom(lines),
    timedOut: done?.['timedOut'] !== false,
  };
}

/** The group's committed offsets for `topic`, read by librdkafka. */
export async function committedOffsets(
  target: ClientTarget,
  group: string,
  topic: string,
): Promise<CommittedOffset[]> {
  return committedFrom(await runDriver(target, ['committed', '--topic', topic, '--group', group], 30_000));
}

export const pythonClient: BedClient = { name: 'python-confluent', produce, consume };
