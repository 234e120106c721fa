// Kafka Streams with the official library: a word-count app, through
// test/bed/java/StreamsDriver.java run as a child process, against the bed's Kafka version.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assertSucceeded } from './run.js';
import { programArgv, programRunner, single, STREAMS_DRIVER } from './java.js';
import type { ClientTarget } from './types.js';

export type StreamsProtocol = 'classic' | 'streams';
export type ProcessingGuarantee = 'at_least_once' | 'exactly_once_v2';

export interface WordCountOptions {
  applicationId: string;
  input: string;
  output: string;
  protocol: StreamsProtocol;
  guarantee: ProcessingGuarantee;
  /** Stop only after reading at least this many input lines and words (then `quietMs` of nothing new). */
  minLines?: number;
  minWords?: number;
  quietMs?: number;
  commitIntervalMs?: number;
  timeoutMs?: number;
}

export interface WordCountResult {
  /** Input lines and words this run processed (more than the input's when records were processed twice). */
  lines: number;
  words: number;
  /** Stream threads that died (each ends the app: nothing restarts them). */
  threadDeaths: number;
  deaths: string[];
  /** KafkaStreams' state when it stopped: RUNNING unless it failed. */
  state: string;
  timedOut: boolean;
}

/** One app of a `startInstance` process: its application id, where it connects, what it counts. */
export interface InstanceApp {
  applicationId: string;
  /** Bootstrap only (no SASL): each app of one process may connect elsewhere. */
  target: ClientTarget;
  input: string;
  output: string;
  protocol: StreamsProtocol;
  guarantee: ProcessingGuarantee;
}

/**
 * One instance each of several word-count apps in one process (`startInstance`): a test runs two
 * or three such processes, so one SIGKILL crashes an instance of every app at once and the JVM
 * starts are shared.
 */
export interface InstanceOptions {
  apps: InstanceApp[];
  /** The instance's state directory: a restarted instance gets its predecessor's, as on one host. */
  stateDir: string;
  /** The process SIGKILLs itself once every app has processed this many records (lines plus words). */
  sigkillAfter?: number;
  /**
   * Each app's session timeout: the group's `streams.session.timeout.ms` (streams protocol; the
   * bed's broker allows 5 s and more) or the consumer's `session.timeout.ms` (classic).
   */
  sessionTimeoutMs?: number;
  commitIntervalMs?: number;
  timeoutMs?: number;
}

export interface StreamsInstance {
  /**
   * Its JSON lines so far (state changes and thread deaths by app; `sigkill`, with the input lines
   * and words each app had processed; `done`).
   */
  readonly lines: Record<string, unknown>[];
  /** How the process ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The last state KafkaStreams reported for the app. */
  state(applicationId: string): string | undefined;
  /** The app's stream threads that died here so far (also those of a process since SIGKILLed). */
  deaths(applicationId: string): string[];
  /** Closes its stdin (every app then closes cleanly, which commits); their `done` figures by app. */
  stop(): Promise<Record<string, WordCountResult>>;
  /** SIGKILLs it if it still runs (clean-up; a test's crash is the instance's own `sigkillAfter`). */
  kill(): void;
  /** Its lines and the end of its stderr, for a failure's message. */
  explain(): string;
}

const SETPRIV = '/usr/bin/setpriv';

function resultOf(app: Record<string, unknown>, timedOut: boolean): WordCountResult {
  return {
    lines: Number(app['lines']),
    words: Number(app['words']),
    threadDeaths: Number(app['threadDeaths']),
    deaths: app['deaths'] as string[],
    state: String(app['state']),
    timedOut,
  };
}

/** Runs `use` on a new scratch directory, removed afterwards. */
async function withScratch<T>(use: (dir: string) => Promise<T>): Promise<T> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-streams-'));
  try {
    return await use(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export interface JavaStreamsClient {
  /** Creates the topics, each with `partitions` partitions. */
  createTopics(target: ClientTarget, topics: string[], partitions: number): Promise<void>;
  /** Produces each line as one record (key: its line number) into each topic. */
  produceLines(target: ClientTarget, topics: string | string[], lines: string[]): Promise<void>;
  wordCount(target: ClientTarget, opts: WordCountOptions): Promise<WordCountResult>;
  /** The last count of each word in `topic` (read_committed, from the start to its end). */
  readCounts(target: ClientTarget, topic: string): Promise<Record<string, number>>;
  /** `readCounts` of several topics at once (one JVM), by topic. */
  readCountsOf(target: ClientTarget, topics: string[]): Promise<Record<string, Record<string, number>>>;
  /** Starts an instance of each app in one process that runs until stopped (or its own SIGKILL). */
  startInstance(opts: InstanceOptions): Promise<StreamsInstance>;
}

/** A process that starts many apps needs more than the 256 MiB heap of the bed's short-lived JVMs. */
const INSTANCE_HEAP = '-Xmx1g';

export async function javaStreamsClient(bedClasspath: string): Promise<JavaStreamsClient> {
  const run = await programRunner(bedClasspath, STREAMS_DRIVER);
  const readCountsOf = async (target: ClientTarget, topics: string[]) => {
    const args = ['read-counts', '--topics', topics.join(','), '--timeout-ms', '90000'];
    const { lines, result } = await run(target, args, 150_000);
    assertSucceeded(`StreamsDriver read-counts ${topics.join(',')}`, result);
    const line = single(lines, 'counts', 'read-counts');
    if (line['timedOut'] === true)
      throw new Error(`read-counts ${topics.join(',')}: did not reach the end in time`);
    return line['topics'] as Record<string, Record<string, number>>;
  };
  return {
    async createTopics(target, topics, partitions) {
      const args = ['create-topics', '--topics', topics.join(','), '--partitions', String(partitions)];
      const { result } = await run(target, args, 120_000);
      assertSucceeded(`StreamsDriver create-topics ${topics.join(',')}`, result);
    },

    async produceLines(target, topics, lines) {
      const names = typeof topics === 'string' ? [topics] : topics;
      await withScratch(async (dir) => {
        const file = path.join(dir, 'lines.txt');
        fs.writeFileSync(file, lines.join('\n') + '\n');
        const args = ['produce-lines', '--topics', names.join(','), '--file', file];
        const { lines: out, result } = await run(target, args, 120_000);
        assertSucceeded(`StreamsDriver produce-lines ${names.join(',')}`, result);
        const count = Number(single(out, 'produced', 'produce-lines')['count']);
        if (count !== lines.length) throw new Error(`produced ${count} of ${lines.length} lines`);
      });
    },

    async wordCount(target, o) {
      const timeoutMs = o.timeoutMs ?? 180_000;
      return withScratch(async (stateDir) => {
        const args = ['wordcount', '--application-id', o.applicationId, '--input', o.input];
        args.push('--output', o.output, '--state-dir', stateDir);
        args.push('--protocol', o.protocol, '--guarantee', o.guarantee);
        args.push('--commit-interval-ms', String(o.commitIntervalMs ?? 200));
        args.push('--min-lines', String(o.minLines ?? 0), '--min-words', String(o.minWords ?? 0));
        args.push('--quiet-ms', String(o.quietMs ?? 3000), '--timeout-ms', String(timeoutMs));
        // Room to start the JVM and to close the app cleanly (which commits) after the deadline.
        const { lines, result } = await run(target, args, timeoutMs + 90_000);
        assertSucceeded(`StreamsDriver wordcount ${o.applicationId}`, result);
        const done = single(lines, 'done', 'wordcount');
        return resultOf(done, done['timedOut'] === true);
      });
    },

    async readCounts(target, topic) {
      return (await readCountsOf(target, [topic]))[topic]!;
    },

    readCountsOf,

    async startInstance(o) {
      const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-streams-apps-'));
      const appsFile = path.join(scratch, 'apps.tsv');
      const rows = o.apps.map((app) => {
        if (app.target.sasl) throw new Error(`${app.applicationId}: an instance's apps connect without SASL`);
        return [app.applicationId, app.target.bootstrap, app.input, app.output, app.protocol, app.guarantee];
      });
      fs.writeFileSync(appsFile, rows.map((row) => row.join('\t')).join('\n') + '\n');
      const args = ['wordcount-apps', '--apps-file', appsFile, '--state-dir', o.stateDir];
      args.push('--commit-interval-ms', String(o.commitIntervalMs ?? 200));
      args.push('--timeout-ms', String(o.timeoutMs ?? 900_000));
      if (o.sigkillAfter !== undefined) args.push('--sigkill-after', String(o.sigkillAfter));
      if (o.sessionTimeoutMs !== undefined) args.push('--session-timeout-ms', String(o.sessionTimeoutMs));
      // Each app has its own bootstrap (in the file); the process's own is the first app's.
      const argv = await programArgv(bedClasspath, STREAMS_DRIVER, o.apps[0]!.target, args);
      // After the bed's flags: the last -Xmx wins.
      argv.splice(argv.indexOf('-cp'), 0, INSTANCE_HEAP);
      // Killed with the test's process if that dies first (run.ts does the same for every client).
      const child = fs.existsSync(SETPRIV)
        ? spawn(SETPRIV, ['--pdeathsig', 'SIGKILL', '--', 'java', ...argv], {
            stdio: ['pipe', 'pipe', 'pipe'],
          })
        : spawn('java', argv, { stdio: ['pipe', 'pipe', 'pipe'] });
      const lines: Record<string, unknown>[] = [];
      let rest = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => {
        rest += d.toString();
        const parts = rest.split('\n');
        rest = parts.pop()!;
        for (const part of parts) {
          if (!part.trim().startsWith('{')) continue;
          try {
            lines.push(JSON.parse(part) as Record<string, unknown>);
          } catch {
            // a log line that happens to start with '{'
          }
        }
      });
      child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
      child.stdin.on('error', () => {});
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once('close', (code, signal) => {
          fs.rmSync(scratch, { recursive: true, force: true });
          resolve({ code, signal });
        }),
      );
      const explain = () =>
        `instance of ${o.apps.map((a) => a.applicationId).join(', ')}: lines:\n` +
        `${lines.map((l) => JSON.stringify(l)).join('\n')}\nstderr (tail):\n${stderr.slice(-4000)}`;
      const ofApp = (type: string, applicationId: string) =>
        lines.filter((l) => l['type'] === type && l['app'] === applicationId);
      return {
        lines,
        exited,
        state: (applicationId) => ofApp('state', applicationId).at(-1)?.['state'] as string | undefined,
        deaths: (applicationId) => ofApp('thread-died', applicationId).map((l) => String(l['error'])),
        async stop() {
          child.stdin.end();
          const { code } = await exited;
          const done = lines.find((l) => l['type'] === 'done');
          if (code !== 0 || !done)
            throw new Error(`instance ended with ${code}, no clean close\n${explain()}`);
          const timedOut = done['timedOut'] === true;
          const apps = done['apps'] as Record<string, unknown>[];
          return Object.fromEntries(apps.map((app) => [String(app['app']), resultOf(app, timedOut)]));
        },
        kill() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        },
        explain,
      };
    },
  };
}
