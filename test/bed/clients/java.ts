// The official Java client, through test/bed/java/Driver.java run as a child process.
//
// The driver is compiled once per (source, client jars) into a cache outside the repository and
// reused by every later run, so a test pays only the JVM start (~0.5 s of CPU with the archive), never javac.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { bedCacheDir } from '../kafka.js';
import { assertSucceeded, jsonLines, runProgram, tail, type RunResult } from './run.js';
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

const javaSource = (name: string): string => fileURLToPath(new URL(`../java/${name}`, import.meta.url));

/** A program of test/bed/java: its main class (which has a `warmup` command) and its sources. */
export interface JavaProgram {
  main: string;
  sources: string[];
  /** Jars it needs beyond the client's (file names matched), e.g. kafka-streams and its own dependencies. */
  moreJars?: RegExp;
}

/** Driver.java and its admin commands: every program of the bed is compiled with them. */
const DRIVER_SOURCES = [javaSource('Driver.java'), javaSource('DriverAdmin.java')];
/** Driver.java: builds against every Kafka version the bed runs. */
export const DRIVER: JavaProgram = { main: 'Driver', sources: DRIVER_SOURCES };
/** ShareDriver.java: KafkaShareConsumer, Kafka 4.x clients only; it borrows Driver's helpers. */
export const SHARE_DRIVER: JavaProgram = {
  main: 'ShareDriver',
  sources: [...DRIVER_SOURCES, javaSource('ShareDriver.java')],
};
/** ChurnDriver.java: a churning KIP-848 group of consumers; it borrows Driver's helpers. */
export const CHURN_DRIVER: JavaProgram = {
  main: 'ChurnDriver',
  sources: [...DRIVER_SOURCES, javaSource('ChurnDriver.java')],
};
/** StreamsDriver.java: a Kafka Streams word-count app; it borrows Driver's helpers. */
export const STREAMS_DRIVER: JavaProgram = {
  main: 'StreamsDriver',
  sources: [...DRIVER_SOURCES, javaSource('StreamsDriver.java')],
  // kafka-streams' runtime dependencies beyond the client's (its pom's compile scope).
  moreJars: /^(kafka-streams|rocksdbjni|jackson-annotations|jackson-databind|jackson-core)-[0-9]/,
};
/** The bed's cache outside the repository (KOP_CACHE_DIR, default ~/.cache/kafka-offset-proxy). */
export const BED_CLIENT_CACHE = bedCacheDir();
const CACHE_ROOT = path.join(BED_CLIENT_CACHE, 'java-driver');

// Short-lived JVMs: C1 only, the smallest GC, and the JDK's class-data archive.
// JVM log messages (e.g. a class-data archive that no longer matches) go to stderr, never into the
// stdout the helpers parse.
export const FAST_JVM_FLAGS = [
  '-XX:TieredStopAtLevel=1',
  '-XX:+UseSerialGC',
  '-XX:-UsePerfData',
  '-Xshare:auto',
  '-Xmx256m',
  '-Xlog:disable',
  '-Xlog:all=warning:stderr',
];

// The driver needs kafka-clients and its runtime dependencies only. Leaving out the broker's jars
// also leaves out its logging binding, so nothing but the driver's JSON reaches stdout.
const CLIENT_JAR = /^(kafka-clients|slf4j-api|lz4-java|lz4|snappy-java|zstd-jni)-[0-9]/;

export function clientClasspath(bedClasspath: string, moreJars?: RegExp): string {
  const wanted = (name: string) => CLIENT_JAR.test(name) || (moreJars?.test(name) ?? false);
  const jars = bedClasspath.split(path.delimiter).filter((jar) => wanted(path.basename(jar)));
  if (!jars.some((jar) => path.basename(jar).startsWith('kafka-clients-'))) {
    throw new Error(`no kafka-clients jar in the classpath: ${bedClasspath.slice(0, 300)}`);
  }
  return jars.join(path.delimiter);
}

export interface CompiledDriver {
  /** The driver's jar, to put first on the classpath. */
  jar: string;
  /** JVM flags that use the driver's class-data-sharing archive, if one could be recorded. */
  cdsFlags: string[];
}

const compiled = new Map<string, Promise<CompiledDriver>>();

/**
 * Compiles the driver against the client jars of `bedClasspath` into a jar (once per source and
 * classpath, cached across runs) and records a class-data-sharing archive of the client's classes,
 * which halves the CPU time of every later JVM start: tests start dozens of them on 2 cores.
 */
export function compileDriver(bedClasspath: string, program: JavaProgram = DRIVER): Promise<CompiledDriver> {
  const classpath = clientClasspath(bedClasspath, program.moreJars);
  const digest = createHash('sha256').update(program.main);
  for (const source of program.sources) digest.update('\0').update(fs.readFileSync(source));
  const hash = digest.update('\0').update(classpath).digest('hex').slice(0, 16);
  let pending = compiled.get(hash);
  if (!pending) {
    pending = compileInto(path.join(CACHE_ROOT, hash), classpath, program);
    compiled.set(hash, pending);
    pending.catch(() => compiled.delete(hash));
  }
  return pending;
}

async function compileInto(dir: string, classpath: string, program: JavaProgram): Promise<CompiledDriver> {
  const jar = path.join(dir, 'driver.jar');
  if (!fs.existsSync(jar)) {
    // Build in a private directory and rename it into place: another test process compiling the
    // same driver at the same time must never see a half-written jar.
    fs.mkdirSync(CACHE_ROOT, { recursive: true });
    const scratch = fs.mkdtempSync(path.join(CACHE_ROOT, 'tmp-'));
    try {
      const classes = path.join(scratch, 'classes');
      const javac = await runProgram(
        'javac',
        ['-nowarn', '-d', classes, '-cp', classpath, ...program.sources],
        {
          timeoutMs: 120_000,
        },
      );
      assertSucceeded(`javac ${program.main}.java`, javac);
      // A jar, not a directory: class-data sharing only archives classes loaded from jars.
      assertSucceeded(
        'jar',
        await runProgram('jar', ['cf', path.join(scratch, 'driver.jar'), '-C', classes, '.']),
      );
      fs.rmSync(classes, { recursive: true });
      try {
        fs.renameSync(scratch, dir);
      } catch (error) {
        // Lost the race to a concurrent compile: its result is just as good.
        if (!fs.existsSync(jar)) throw error;
      }
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
    }
  }
  pruneStaleBuilds(dir);
  return { jar, cdsFlags: await cdsArchive(dir, [jar, classpath].join(path.delimiter), program.main) };
}

const WEEK_MS = 7 * 24 * 3600_000;

/** Every edit of a driver's sources makes a new build directory; drop those unused for a week. */
function pruneStaleBuilds(current: string): void {
  for (const entry of fs.readdirSync(CACHE_ROOT)) {
    const dir = path.join(CACHE_ROOT, entry);
    if (dir === current) continue;
    try {
      // A build's jar is read by every run, so its access time says when it was last used; a
      // scratch directory (tmp-*) older than a day belongs to a compile that died.
      const jar = path.join(dir, 'driver.jar');
      const lastUsed = fs.existsSync(jar) ? fs.statSync(jar).atimeMs : fs.statSync(dir).mtimeMs;
      const maxAge = entry.startsWith('tmp-') ? WEEK_MS / 7 : WEEK_MS;
      if (Date.now() - lastUsed > maxAge) fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // removed concurrently
    }
  }
}

/** Records (once) the archive at its final path: it is only valid for the exact classpath it was made with. */
async function cdsArchive(dir: string, classpath: string, main: string): Promise<string[]> {
  const archive = path.join(dir, 'driver.jsa');
  if (!fs.existsSync(archive)) {
    const scratch = path.join(dir, `driver-${process.pid}.tmp.jsa`);
    const result = await runProgram(
      'java',
      [...FAST_JVM_FLAGS, `-XX:ArchiveClassesAtExit=${scratch}`, '-cp', classpath, main, 'warmup'],
      { timeoutMs: 60_000 },
    );
    if (result.code !== 0 || !fs.existsSync(scratch)) {
      // Only slower without it; the driver itself works.
      fs.rmSync(scratch, { force: true });
      return [];
    }
    fs.renameSync(scratch, archive);
  }
  // -Xshare:auto (the default) falls back to no sharing if the archive does not match.
  return [`-XX:SharedArchiveFile=${archive}`];
}

export type GroupProtocol = 'classic' | 'consumer';
export type CommitMode = 'sync' | 'async' | 'auto';

export interface JavaConsumeOptions extends ConsumeOptions {
  commit?: CommitMode;
  /** `consumer` is KIP-848's protocol; it needs a 4.x broker. Default classic. */
  protocol?: GroupProtocol;
  isolation?: 'read_committed' | 'read_uncommitted';
}

export interface JavaProduceOptions extends ProduceOptions {
  /** Produce all records in one transaction with this id. */
  transactionalId?: string;
  /** With transactionalId: abort the transaction instead of committing it. */
  abort?: boolean;
  /** The producer's batch.size (default Kafka's, 16384). */
  batchSize?: number;
  /** Values padded to this many characters (paddedRecordValue) instead of recordValue. */
  valueBytes?: number;
}

export interface JavaProduceResult extends ProduceResult {
  perPartition: { partition: number; firstOffset: number; lastOffset: number; count: number }[];
}

export interface TransformOptions {
  input: string;
  output: string;
  group: string;
  transactionalId: string;
  max: number;
  protocol?: GroupProtocol;
  timeoutMs?: number;
  /** Abort the first transaction (then redo its records), to prove aborted work leaves no trace. */
  abortFirst?: boolean;
}

export interface TransformResult {
  /** Records written to `output` in committed transactions. */
  count: number;
  transactions: number;
  aborted: number;
  committed: CommittedOffset[];
  timedOut: boolean;
}

export interface ClusterDescription {
  clusterId: string;
  controller: { id: number; host: string; port: number } | null;
  nodes: { id: number; host: string; port: number }[];
}

export interface JavaClient extends BedClient {
  produce(target: ClientTarget, opts: JavaProduceOptions): Promise<JavaProduceResult>;
  consume(target: ClientTarget, opts: JavaConsumeOptions): Promise<ConsumeResult>;
  /** Exactly-once read-process-write: values of `input` upper-cased into `output`, offsets committed in the transaction. */
  transform(target: ClientTarget, opts: TransformOptions): Promise<TransformResult>;
  describeCluster(target: ClientTarget): Promise<ClusterDescription>;
  groupOffsets(target: ClientTarget, group: string): Promise<CommittedOffset[]>;
  createTopic(
    target: ClientTarget,
    topic: string,
    partitions?: number,
    replicationFactor?: number,
  ): Promise<boolean>;
  deleteGroup(target: ClientTarget, group: string): Promise<void>;
  /** Admin.listConsumerGroups: each group with the state the client reports. */
  listGroups(target: ClientTarget): Promise<{ group: string; state: string }[]>;
  /** Admin.describeConsumerGroups of one group. */
  describeGroup(
    target: ClientTarget,
    group: string,
  ): Promise<{ state: string; members: number; simple: boolean }>;
  /** Runs the driver with raw arguments (plus the target's); returns its JSON lines. */
  run(target: ClientTarget, args: string[], timeoutMs?: number): Promise<Record<string, unknown>[]>;
}

function targetArgs(target: ClientTarget): string[] {
  const args = ['--bootstrap', target.bootstrap];
  if (target.sasl) {
    args.push('--sasl-mechanism', target.sasl.mechanism ?? 'PLAIN');
    args.push('--username', target.sasl.username, '--password', target.sasl.password);
  }
  return args;
}

function committedFrom(lines: Record<string, unknown>[]): CommittedOffset[] {
  const line = lines.find((l) => l['type'] === 'committed');
  return sortCommitted((line?.['offsets'] as CommittedOffset[] | undefined) ?? []);
}

export function single(
  lines: Record<string, unknown>[],
  type: string,
  what: string,
): Record<string, unknown> {
  const line = lines.find((l) => l['type'] === type);
  if (!line) throw new Error(`${what}: the driver printed no "${type}" line`);
  return line;
}

/** Runs one program of test/bed/java with raw arguments (plus the target's). */
export type ProgramRun = (
  target: ClientTarget,
  args: string[],
  timeoutMs?: number,
) => Promise<{ lines: Record<string, unknown>[]; result: RunResult }>;

/** Compiles `program` (once) and returns what makes the `java` arguments of one run of it. */
async function argvBuilder(
  bedClasspath: string,
  program: JavaProgram,
): Promise<(target: ClientTarget, args: string[]) => string[]> {
  const driver = await compileDriver(bedClasspath, program);
  const classpath = [driver.jar, clientClasspath(bedClasspath, program.moreJars)].join(path.delimiter);
  return (target, args) => [
    ...FAST_JVM_FLAGS,
    ...driver.cdsFlags,
    '-cp',
    classpath,
    program.main,
    ...args,
    ...targetArgs(target),
  ];
}

/**
 * Compiles `program` against the client jars of `bedClasspath` (once) and returns a runner of it.
 * The runner throws when the program reports an error line; its exit status is the caller's to judge.
 */
export async function programRunner(bedClasspath: string, program: JavaProgram): Promise<ProgramRun> {
  const argvOf = await argvBuilder(bedClasspath, program);
  return async (target, args, timeoutMs = 60_000) => {
    const result = await runProgram('java', argvOf(target, args), { timeoutMs });
    const lines = jsonLines(result.stdout);
    const error = lines.find((l) => l['type'] === 'error');
    if (error) {
      throw new Error(
        `Java ${program.main} ${args.slice(0, 2).join(' ')}: ${String(error['error'])}: ${String(error['message'])}\n${tail(result.stderr, 15)}`,
      );
    }
    return { lines, result };
  };
}

/**
 * The `java` arguments that run `program` with `args` (plus the target's), for a test that keeps
 * it as a live child process (its stdin, its lines as they come) rather than waiting for its end.
 */
export async function programArgv(
  bedClasspath: string,
  program: JavaProgram,
  target: ClientTarget,
  args: string[],
): Promise<string[]> {
  return (await argvBuilder(bedClasspath, program))(target, args);
}

/**
 * A Java client running the kafka-clients jars of `bedClasspath` (the bed's `kafkaClasspath`, or
 * one for another version to test an older client). Compiles the driver on first use.
 */
export async function javaClient(
  bedClasspath: string,
  opts: { name?: string; protocol?: GroupProtocol } = {},
): Promise<JavaClient> {
  const runDriver = await programRunner(bedClasspath, DRIVER);
  const defaultProtocol = opts.protocol ?? 'classic';

  const run = async (
    target: ClientTarget,
    args: string[],
    timeoutMs = 60_000,
  ): Promise<Record<string, unknown>[]> => {
    const { lines, result } = await runDriver(target, args, timeoutMs);
    assertSucceeded(`Java driver ${args.slice(0, 2).join(' ')}`, result);
    return lines;
  };

  return {
    name: opts.name ?? `java-${defaultProtocol}`,
    run,

    async produce(target, p) {
      const args = [
        'produce',
        '--topic',
        p.topic,
        '--count',
        String(p.count),
        '--start',
        String(p.start ?? 0),
      ];
      if (p.transactionalId) args.push('--transactional-id', p.transactionalId);
      if (p.abort) args.push('--abort');
      if (p.batchSize !== undefined) args.push('--batch-size', String(p.batchSize));
      if (p.valueBytes !== undefined) args.push('--value-bytes', String(p.valueBytes));
      const line = single(await run(target, args), 'produced', 'produce');
      const perPartition = line['partitions'] as JavaProduceResult['perPartition'];
      return { count: Number(line['count']), partitions: perPartition.map((x) => x.partition), perPartition };
    },

    async consume(target, c) {
      const timeoutMs = c.timeoutMs ?? DEFAULT_CONSUME_TIMEOUT_MS;
      const args = ['consume', '--topic', c.topic, '--group', c.group, '--max', String(c.max)];
      args.push('--commit', c.commit ?? 'sync', '--protocol', c.protocol ?? defaultProtocol);
      args.push('--timeout-ms', String(timeoutMs));
      if (c.isolation) args.push('--isolation', c.isolation);
      // The JVM gets the consume deadline plus room to start, commit and leave the group.
      const lines = await run(target, args, timeoutMs + 45_000);
      const done = single(lines, 'done', 'consume');
      const commitErrors = done['commitErrors'] as string[];
      if (commitErrors.length > 0) throw new Error(`Java consumer commit errors: ${commitErrors.join('; ')}`);
      const records = lines.filter((l) => l['type'] === 'record') as unknown as (ConsumedRecord & {
        type: string;
      })[];
      return {
        records: records.map(({ topic, partition, offset, key, value }) => ({
          topic,
          partition,
          offset,
          key,
          value,
        })),
        committed: committedFrom(lines),
        timedOut: done['timedOut'] === true,
      };
    },

    async transform(target, t) {
      const timeoutMs = t.timeoutMs ?? DEFAULT_CONSUME_TIMEOUT_MS;
      const args = ['transform', '--input', t.input, '--output', t.output, '--group', t.group];
      args.push('--transactional-id', t.transactionalId, '--max', String(t.max));
      args.push('--protocol', t.protocol ?? defaultProtocol, '--timeout-ms', String(timeoutMs));
      if (t.abortFirst) args.push('--abort-first');
      const lines = await run(target, args, timeoutMs + 45_000);
      const done = single(lines, 'done', 'transform');
      return {
        count: Number(done['count']),
        transactions: Number(done['transactions']),
        aborted: Number(done['aborted']),
        committed: committedFrom(lines),
        timedOut: done['timedOut'] === true,
      };
    },

    async describeCluster(target) {
      const line = single(await run(target, ['admin', 'describe-cluster']), 'cluster', 'describe-cluster');
      return line as unknown as ClusterDescription;
    },

    async groupOffsets(target, group) {
      return committedFrom(await run(target, ['admin', 'group-offsets', '--group', group]));
    },

    async createTopic(target, topic, partitions = 1, replicationFactor = 1) {
      const args = ['admin', 'create-topic', '--topic', topic];
      args.push('--partitions', String(partitions), '--replication-factor', String(replicationFactor));
      return single(await run(target, args), 'topic', 'create-topic')['created'] === true;
    },

    async deleteGroup(target, group) {
      await run(target, ['admin', 'delete-group', '--group', group]);
    },

    async listGroups(target) {
      return (await run(target, ['admin', 'list-groups']))
        .filter((l) => l['type'] === 'group')
        .map((l) => ({ group: String(l['group']), state: String(l['state']) }));
    },

    async describeGroup(target, group) {
      const line = single(
        await run(target, ['admin', 'describe-group', '--group', group]),
        'described',
        'describe-group',
      );
      return {
        state: String(line['state']),
        members: Number(line['members']),
        simple: line['simple'] === true,
      };
    },
  };
}
