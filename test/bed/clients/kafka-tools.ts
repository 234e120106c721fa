// Kafka's own command-line tools, run straight from the bed's jars (`java -cp <classpath> <main>`)
// rather than through bin/*.sh, with their output parsed.
//
// Main classes moved between releases (kafka.admin.* and kafka.tools.* in core before they were
// ported to the tools module), so each tool is looked up in the jars of the classpath in use.
// Options changed too: 4.x deprecates --producer-props / --consumer.config / --messages in favour of
// --command-property / --command-config / --num-records, so the arguments depend on the version.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { BED_CLIENT_CACHE, FAST_JVM_FLAGS } from './java.js';
import { assertSucceeded, runProgram, tail, type RunResult } from './run.js';
import type { ClientTarget } from './types.js';

const MAIN_CLASSES = {
  consumerGroupCommand: [
    'org.apache.kafka.tools.consumer.group.ConsumerGroupCommand',
    'kafka.admin.ConsumerGroupCommand',
  ],
  producerPerformance: ['org.apache.kafka.tools.ProducerPerformance', 'kafka.tools.ProducerPerformance'],
  consumerPerformance: ['org.apache.kafka.tools.ConsumerPerformance', 'kafka.tools.ConsumerPerformance'],
  // Share groups (KIP-932): Kafka 4.x only.
  shareGroupCommand: ['org.apache.kafka.tools.consumer.group.ShareGroupCommand'],
  consoleShareConsumer: ['org.apache.kafka.tools.consumer.ConsoleShareConsumer'],
  brokerApiVersions: ['org.apache.kafka.tools.BrokerApiVersionsCommand'],
  // Streams groups (KIP-1071): Kafka 4.x only.
  streamsGroupCommand: ['org.apache.kafka.tools.streams.StreamsGroupCommand'],
} as const;

export type KafkaTool = keyof typeof MAIN_CLASSES;

const jarContents = new Map<string, Buffer>();

function jarsOf(classpath: string): string[] {
  // Only Kafka's own jars can hold the tools; skip reading the other dependencies.
  return classpath
    .split(path.delimiter)
    .filter((jar) => /^kafka(-tools|_2\.1[23])-[0-9]/.test(path.basename(jar)));
}

/** True if a jar of the classpath contains the class (its name is stored uncompressed in the zip directory). */
function hasClass(classpath: string, className: string): boolean {
  const entry = `${className.replaceAll('.', '/')}.class`;
  return jarsOf(classpath).some((jar) => {
    let content = jarContents.get(jar);
    if (!content) {
      content = fs.readFileSync(jar);
      jarContents.set(jar, content);
    }
    return content.includes(entry);
  });
}

/** The main class of `tool` in this classpath's Kafka version. */
export function toolMainClass(classpath: string, tool: KafkaTool): string {
  const found = MAIN_CLASSES[tool].find((name) => hasClass(classpath, name));
  if (!found)
    throw new Error(`no main class for ${tool} (tried ${MAIN_CLASSES[tool].join(', ')}) in the classpath`);
  return found;
}

/**
 * A tool's output made comparable between two routes: the given names replaced by placeholders,
 * addresses hidden, and since column widths follow the names' lengths and rows come in no set order,
 * spaces collapsed and lines sorted.
 */
export function comparableOutput(output: string, names: Record<string, string>): string {
  let text = output;
  for (const [name, placeholder] of Object.entries(names)) text = text.replaceAll(name, placeholder);
  return text
    .replace(/127\.0\.0\.1:\d+/g, '<host:port>')
    .split('\n')
    .map((line) => line.trim().replace(/\s+/g, ' '))
    .filter((line) => line !== '')
    .sort()
    .join('\n');
}

/** Major version of the Kafka jars in the classpath, from the kafka-clients jar's name. */
export function kafkaMajorVersion(classpath: string): number {
  const jar = classpath
    .split(path.delimiter)
    .map((j) => path.basename(j))
    .find((j) => j.startsWith('kafka-clients-'));
  const match = jar?.match(/^kafka-clients-(\d+)\./);
  if (!match?.[1]) throw new Error('no kafka-clients jar in the classpath');
  return Number(match[1]);
}

/** A client properties file for the tools' --command-config, or undefined without SASL. */
function clientConfigFile(target: ClientTarget): string | undefined {
  if (!target.sasl) return undefined;
  const mechanism = target.sasl.mechanism ?? 'PLAIN';
  const module =
    mechanism === 'PLAIN'
      ? 'org.apache.kafka.common.security.plain.PlainLoginModule'
      : 'org.apache.kafka.common.security.scram.ScramLoginModule';
  const esc = (s: string) => s.replaceAll('\\', '\\\\').replaceAll('"', '\\"');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-tool-'));
  const file = path.join(dir, 'client.properties');
  fs.writeFileSync(
    file,
    [
      'security.protocol=SASL_PLAINTEXT',
      `sasl.mechanism=${mechanism}`,
      `sasl.jaas.config=${module} required username="${esc(target.sasl.username)}" password="${esc(target.sasl.password)}";`,
      '',
    ].join('\n'),
  );
  return file;
}

// Each tool's JVM loads a few thousand classes from ~90 jars. The first run of a tool (per classpath)
// records them in a class-data-sharing archive outside the repository; later runs map it and need
// about half the CPU, which counts on a shared 2-core machine.
const TOOLS_CDS_DIR = path.join(BED_CLIENT_CACHE, 'tools-cds');

function archiveFor(classpath: string, mainClass: string): string {
  const hash = createHash('sha256')
    .update(classpath)
    .update('\0')
    .update(mainClass)
    .digest('hex')
    .slice(0, 16);
  return path.join(TOOLS_CDS_DIR, `${mainClass.split('.').pop()}-${hash}.jsa`);
}

async function runTool(
  classpath: string,
  tool: KafkaTool,
  target: ClientTarget,
  args: (configFile: string | undefined) => string[],
  timeoutMs = 90_000,
): Promise<RunResult> {
  const mainClass = toolMainClass(classpath, tool);
  const archive = archiveFor(classpath, mainClass);
  const recording = !fs.existsSync(archive);
  const scratchArchive = `${archive}.${process.pid}-${Date.now()}.tmp`;
  if (recording) fs.mkdirSync(TOOLS_CDS_DIR, { recursive: true });
  const cds = recording
    ? [`-XX:ArchiveClassesAtExit=${scratchArchive}`]
    : [`-XX:SharedArchiveFile=${archive}`];
  const configFile = clientConfigFile(target);
  try {
    const argv = [...FAST_JVM_FLAGS, ...cds, '-cp', classpath, mainClass, ...args(configFile)];
    const result = await runProgram('java', argv, { timeoutMs });
    assertSucceeded(tool, result);
    // Atomic: a concurrent run maps either the whole archive or none.
    if (recording && fs.existsSync(scratchArchive)) fs.renameSync(scratchArchive, archive);
    return result;
  } finally {
    if (configFile) fs.rmSync(path.dirname(configFile), { recursive: true, force: true });
    fs.rmSync(scratchArchive, { force: true });
  }
}

/**
 * Runs `tool` with `args` and, with SASL, `--command-config <file>` (or the option named by
 * `configOption`); resolves with its output once it exited with status 0.
 */
export function kafkaTool(
  classpath: string,
  tool: KafkaTool,
  target: ClientTarget,
  args: string[],
  opts: { configOption?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  return runTool(
    classpath,
    tool,
    target,
    (config) => [...args, ...(config ? [opts.configOption ?? '--command-config', config] : [])],
    opts.timeoutMs,
  );
}

// ---- ConsumerGroupCommand ----------------------------------------------------------------------

export interface GroupDescriptionRow {
  group: string;
  topic: string;
  partition: number;
  /** null when the group has no committed offset for the partition ('-'). */
  currentOffset: number | null;
  logEndOffset: number | null;
  lag: number | null;
  consumerId: string | null;
  host: string | null;
  clientId: string | null;
}

const dash = (s: string | undefined): string | null => (s === undefined || s === '-' ? null : s);
const num = (s: string | undefined): number | null => (dash(s) === null ? null : Number(s));

/** Parses the whitespace-aligned table that follows a header line starting with `GROUP`. */
export function parseTable(output: string): Record<string, string>[] {
  const lines = output.split('\n');
  const rows: Record<string, string>[] = [];
  let header: string[] | undefined;
  for (const line of lines) {
    const cells = line.trim().split(/\s+/);
    if (cells[0] === 'GROUP') {
      header = cells;
      continue;
    }
    if (!header || line.trim() === '') continue;
    // The SLF4J/log4j chatter of the JVM goes to stderr, but be strict anyway: a row has every column.
    if (cells.length !== header.length) continue;
    rows.push(Object.fromEntries(header.map((h, i) => [h, cells[i] ?? ''])));
  }
  return rows;
}

/** `kafka-consumer-groups --describe --group G`: the group's offsets, log end and lag per partition. */
export async function describeConsumerGroup(
  classpath: string,
  target: ClientTarget,
  group: string,
): Promise<GroupDescriptionRow[]> {
  const result = await runTool(classpath, 'consumerGroupCommand', target, (config) => [
    '--bootstrap-server',
    target.bootstrap,
    '--describe',
    '--group',
    group,
    ...(config ? ['--command-config', config] : []),
  ]);
  return parseTable(result.stdout)
    .map((r) => ({
      group: r['GROUP'] ?? '',
      topic: r['TOPIC'] ?? '',
      partition: Number(r['PARTITION']),
      currentOffset: num(r['CURRENT-OFFSET']),
      logEndOffset: num(r['LOG-END-OFFSET']),
      lag: num(r['LAG']),
      consumerId: dash(r['CONSUMER-ID']),
      host: dash(r['HOST']),
      clientId: dash(r['CLIENT-ID']),
    }))
    .sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));
}

/** `kafka-consumer-groups --bootstrap-server B <args>`; resolves with its stdout (exit 0 required). */
export async function consumerGroups(
  classpath: string,
  target: ClientTarget,
  args: string[],
): Promise<string> {
  const result = await runTool(classpath, 'consumerGroupCommand', target, (config) => [
    '--bootstrap-server',
    target.bootstrap,
    ...args,
    ...(config ? ['--command-config', config] : []),
  ]);
  return result.stdout;
}

/** `kafka-consumer-groups --list`: the group names, one per line. */
export async function listConsumerGroups(classpath: string, target: ClientTarget): Promise<string[]> {
  return (await consumerGroups(classpath, target, ['--list']))
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

export type ResetTarget = 'earliest' | 'latest' | { offset: number } | { shiftBy: number };

/** `kafka-consumer-groups --reset-offsets` for one topic; executes unless `dryRun`. Returns the new offsets. */
export async function resetConsumerGroupOffsets(
  classpath: string,
  target: ClientTarget,
  opts: { group: string; topic: string; to: ResetTarget; dryRun?: boolean },
): Promise<{ topic: string; partition: number; offset: number }[]> {
  const to =
    opts.to === 'earliest'
      ? ['--to-earliest']
      : opts.to === 'latest'
        ? ['--to-latest']
        : 'offset' in opts.to
          ? ['--to-offset', String(opts.to.offset)]
          : ['--shift-by', String(opts.to.shiftBy)];
  const result = await runTool(classpath, 'consumerGroupCommand', target, (config) => [
    '--bootstrap-server',
    target.bootstrap,
    '--reset-offsets',
    '--group',
    opts.group,
    '--topic',
    opts.topic,
    ...to,
    opts.dryRun ? '--dry-run' : '--execute',
    ...(config ? ['--command-config', config] : []),
  ]);
  return parseTable(result.stdout)
    .map((r) => ({
      topic: r['TOPIC'] ?? '',
      partition: Number(r['PARTITION']),
      offset: Number(r['NEW-OFFSET']),
    }))
    .sort((a, b) => a.partition - b.partition);
}

// ---- StreamsGroupCommand -----------------------------------------------------------------------

export interface StreamsGroupToolRun {
  /** Whether --list named the group before, and after --delete. */
  listed: boolean;
  listedAfterDelete: boolean;
  /** Each step's output (comparableOutput, the coordinator's node id hidden too). */
  steps: string[];
}

/**
 * kafka-streams-groups on a stopped streams app's group `group` reading `inputTopic`: --describe
 * (and --members, --offsets, --state), the committed offsets (an empty group's --describe
 * --offsets prints nothing: a dry-run reset to the current offsets shows them), a reset to the
 * earliest, the committed offsets, --delete-offsets of the input, the committed offsets, --delete.
 * `names`: further names to replace (the group and input become <app> and <input>).
 */
export async function streamsGroupToolSteps(
  classpath: string,
  target: ClientTarget,
  group: string,
  inputTopic: string,
  names: Record<string, string> = {},
): Promise<StreamsGroupToolRun> {
  const tool = async (args: string[]): Promise<string> =>
    comparableOutput(
      (
        await kafkaTool(classpath, 'streamsGroupCommand', target, [
          '--bootstrap-server',
          target.bootstrap,
          ...args,
        ])
      ).stdout,
      { ...names, [group]: '<app>', [inputTopic]: '<input>' },
      // Each group has its own coordinator.
    ).replace(/<host:port> \(\d+\)/g, '<host:port> (<node>)');
  const g = ['--group', group];
  const committed = ['--reset-offsets', '--to-current', '--all-input-topics', '--dry-run', ...g];
  const listed = async () => (await tool(['--list'])).split('\n').includes('<app>');
  return {
    listed: await listed(),
    steps: [
      await tool(['--describe', ...g]),
      await tool(['--describe', '--members', ...g]),
      await tool(['--describe', '--offsets', ...g]),
      await tool(['--describe', '--state', ...g]),
      await tool(committed),
      await tool(['--reset-offsets', '--to-earliest', '--all-input-topics', '--execute', ...g]),
      await tool(committed),
      await tool(['--delete-offsets', '--input-topic', inputTopic, ...g]),
      await tool(committed),
      await tool(['--delete', ...g]),
    ],
    listedAfterDelete: await listed(),
  };
}

// ---- ProducerPerformance -----------------------------------------------------------------------

export interface ProducerPerfResult {
  records: number;
  recordsPerSec: number;
  mbPerSec: number;
  avgLatencyMs: number;
  maxLatencyMs: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  p999Ms: number;
}

// "5000 records sent, 5747.126437 records/sec (0.55 MB/sec), 26.64 ms avg latency, 748.00 ms max
//  latency, 25 ms 50th, 40 ms 95th, 50 ms 99th, 53 ms 99.9th."
const PRODUCER_SUMMARY =
  /^(\d+) records sent, ([\d.]+) records\/sec \(([\d.]+) MB\/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.?$/;

export function parseProducerPerformance(output: string): ProducerPerfResult {
  // Interim progress lines look alike but lack the percentiles; the summary is the last line that matches.
  const lines = output.split('\n').map((l) => l.trim());
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = PRODUCER_SUMMARY.exec(lines[i] ?? '');
    if (m) {
      const n = m.slice(1).map(Number);
      return {
        records: n[0]!,
        recordsPerSec: n[1]!,
        mbPerSec: n[2]!,
        avgLatencyMs: n[3]!,
        maxLatencyMs: n[4]!,
        p50Ms: n[5]!,
        p95Ms: n[6]!,
        p99Ms: n[7]!,
        p999Ms: n[8]!,
      };
    }
  }
  throw new Error(`no ProducerPerformance summary in its output:\n${tail(output)}`);
}

export async function producerPerformance(
  classpath: string,
  target: ClientTarget,
  opts: {
    topic: string;
    numRecords: number;
    recordSize?: number;
    throughput?: number;
    acks?: 'all' | '1' | '0';
    /** More producer properties, `key=value` (e.g. `batch.size=262144`). */
    props?: string[];
    /** How long the tool may run (default 90 s). */
    timeoutMs?: number;
  },
): Promise<ProducerPerfResult> {
  const modern = kafkaMajorVersion(classpath) >= 4;
  const result = await runTool(
    classpath,
    'producerPerformance',
    target,
    (config) => {
      const args = ['--topic', opts.topic, '--num-records', String(opts.numRecords)];
      args.push(
        '--record-size',
        String(opts.recordSize ?? 100),
        '--throughput',
        String(opts.throughput ?? -1),
      );
      const props = [`acks=${opts.acks ?? 'all'}`, ...(opts.props ?? [])];
      if (modern) args.push('--bootstrap-server', target.bootstrap, '--command-property', ...props);
      else args.push('--producer-props', `bootstrap.servers=${target.bootstrap}`, ...props);
      if (config) args.push(modern ? '--command-config' : '--producer.config', config);
      return args;
    },
    opts.timeoutMs,
  );
  return parseProducerPerformance(result.stdout);
}

// ---- ConsumerPerformance -----------------------------------------------------------------------

export interface ConsumerPerfResult {
  mbConsumed: number;
  mbPerSec: number;
  records: number;
  recordsPerSec: number;
  rebalanceTimeMs: number;
  fetchTimeMs: number;
}

/** Parses the CSV header + values pair ConsumerPerformance prints (without --show-detailed-stats). */
export function parseConsumerPerformance(output: string): ConsumerPerfResult {
  const lines = output.split('\n').map((l) => l.trim());
  const h = lines.findIndex((l) => l.startsWith('start.time,'));
  const header = lines[h]?.split(/,\s*/);
  const values = lines[h + 1]?.split(/,\s*/);
  if (h < 0 || !header || !values || values.length !== header.length) {
    throw new Error(`no ConsumerPerformance summary in its output:\n${tail(output)}`);
  }
  const field = (name: string): number => {
    const v = values[header.indexOf(name)];
    if (v === undefined || header.indexOf(name) < 0)
      throw new Error(`ConsumerPerformance output lacks ${name}`);
    return Number(v);
  };
  return {
    mbConsumed: field('data.consumed.in.MB'),
    mbPerSec: field('MB.sec'),
    records: field('data.consumed.in.nMsg'),
    recordsPerSec: field('nMsg.sec'),
    rebalanceTimeMs: field('rebalance.time.ms'),
    fetchTimeMs: field('fetch.time.ms'),
  };
}

export async function consumerPerformance(
  classpath: string,
  target: ClientTarget,
  opts: { topic: string; numRecords: number; group?: string; timeoutMs?: number },
): Promise<ConsumerPerfResult> {
  const modern = kafkaMajorVersion(classpath) >= 4;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const result = await runTool(
    classpath,
    'consumerPerformance',
    target,
    (config) => {
      const args = ['--bootstrap-server', target.bootstrap, '--topic', opts.topic];
      args.push(modern ? '--num-records' : '--messages', String(opts.numRecords));
      args.push('--timeout', String(timeoutMs));
      if (opts.group) args.push('--group', opts.group);
      if (config) args.push(modern ? '--command-config' : '--consumer.config', config);
      return args;
    },
    timeoutMs + 45_000,
  );
  return parseConsumerPerformance(result.stdout);
}
