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

/** One instance of a word-count app that several run together (`startInstance`). */
export interface InstanceOptions {
  applicationId: string;
  input: string;
  output: string;
  protocol: StreamsProtocol;
  guarantee: ProcessingGuarantee;
  /** The instance's state directory: a restarted instance gets its predecessor's, as on one host. */
  stateDir: string;
  /** The process SIGKILLs itself once it has processed this many records (lines plus words). */
  sigkillAfter?: number;
  /** Sets the group's `streams.session.timeout.ms` first (the bed's broker allows 5 s and more). */
  sessionTimeoutMs?: number;
  commitIntervalMs?: number;
  timeoutMs?: number;
}

export interface StreamsInstance {
  /** Its JSON lines so far (state changes, `sigkill`, `thread-died`, `done`). */
  readonly lines: Record<string, unknown>[];
  /** How the process ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The last state KafkaStreams reported. */
  state(): string | undefined;
  /** Closes its stdin (the app then closes cleanly, which commits) and returns its `done` line. */
  stop(): Promise<WordCountResult>;
  /** SIGKILLs it if it still runs (clean-up; a test's crash is the instance's own `sigkillAfter`). */
  kill(): void;
  /** Its lines and the end of its stderr, for a failure's message. */
  explain(): string;
}

const SETPRIV = '/usr/bin/setpriv';

function resultOf(done: Record<string, unknown>): WordCountResult {
  return {
    lines: Number(done['lines']),
    words: Number(done['words']),
    threadDeaths: Number(done['threadDeaths']),
    deaths: done['deaths'] as string[],
    state: String(done['state']),
    timedOut: done['timedOut'] === true,
  };
}

export interface JavaStreamsClient {
  /** Produces each line as one record (key: its line number). */
  produceLines(target: ClientTarget, topic: string, lines: string[]): Promise<void>;
  wordCount(target: ClientTarget, opts: WordCountOptions): Promise<WordCountResult>;
  /** The last count of each word in `topic` (read_committed, from the start to its end). */
  readCounts(target: ClientTarget, topic: string): Promise<Record<string, number>>;
  /** Starts an instance that runs until stopped (or its own SIGKILL), its lines read as they come. */
  startInstance(target: ClientTarget, opts: InstanceOptions): Promise<StreamsInstance>;
}

export async function javaStreamsClient(bedClasspath: string): Promise<JavaStreamsClient> {
  const run = await programRunner(bedClasspath, STREAMS_DRIVER);
  return {
    async produceLines(target, topic, lines) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-streams-input-'));
      try {
        const file = path.join(dir, 'lines.txt');
        fs.writeFileSync(file, lines.join('\n') + '\n');
        const { lines: out, result } = await run(target, ['produce-lines', '--topic', topic, '--file', file]);
        assertSucceeded(`StreamsDriver produce-lines ${topic}`, result);
        const count = Number(single(out, 'produced', 'produce-lines')['count']);
        if (count !== lines.length) throw new Error(`produced ${count} of ${lines.length} lines`);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },

    async wordCount(target, o) {
      const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-streams-state-'));
      const timeoutMs = o.timeoutMs ?? 180_000;
      const args = ['wordcount', '--application-id', o.applicationId, '--input', o.input];
      args.push('--output', o.output, '--state-dir', stateDir);
      args.push('--protocol', o.protocol, '--guarantee', o.guarantee);
      args.push('--commit-interval-ms', String(o.commitIntervalMs ?? 200));
      args.push('--min-lines', String(o.minLines ?? 0), '--min-words', String(o.minWords ?? 0));
      args.push('--quiet-ms', String(o.quietMs ?? 3000), '--timeout-ms', String(timeoutMs));
      try {
        // Room to start the JVM and to close the app cleanly (which commits) after the deadline.
        const { lines, result } = await run(target, args, timeoutMs + 90_000);
        assertSucceeded(`StreamsDriver wordcount ${o.applicationId}`, result);
        return resultOf(single(lines, 'done', 'wordcount'));
      } finally {
        fs.rmSync(stateDir, { recursive: true, force: true });
      }
    },

    async readCounts(target, topic) {
      const { lines, result } = await run(target, ['read-counts', '--topic', topic], 120_000);
      assertSucceeded(`StreamsDriver read-counts ${topic}`, result);
      const line = single(lines, 'counts', 'read-counts');
      if (line['timedOut'] === true) throw new Error(`read-counts ${topic}: did not reach the end in time`);
      return line['counts'] as Record<string, number>;
    },

    async startInstance(target, o) {
      const args = ['wordcount', '--application-id', o.applicationId, '--input', o.input];
      args.push('--output', o.output, '--state-dir', o.stateDir, '--until-stdin-closed');
      args.push('--protocol', o.protocol, '--guarantee', o.guarantee);
      args.push('--commit-interval-ms', String(o.commitIntervalMs ?? 200));
      args.push('--timeout-ms', String(o.timeoutMs ?? 600_000));
      if (o.sigkillAfter !== undefined) args.push('--sigkill-after', String(o.sigkillAfter));
      if (o.sessionTimeoutMs !== undefined) args.push('--session-timeout-ms', String(o.sessionTimeoutMs));
      const argv = await programArgv(bedClasspath, STREAMS_DRIVER, target, args);
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
        child.once('close', (code, signal) => resolve({ code, signal })),
      );
      const explain = () =>
        `${o.applicationId} instance lines:\n${lines.map((l) => JSON.stringify(l)).join('\n')}\n` +
        `stderr (tail):\n${stderr.slice(-4000)}`;
      return {
        lines,
        exited,
        state: () => lines.filter((l) => l['type'] === 'state').at(-1)?.['state'] as string | undefined,
        async stop() {
          child.stdin.end();
          const { code } = await exited;
          const done = lines.find((l) => l['type'] === 'done');
          if (code !== 0 || !done)
            throw new Error(`instance ended with ${code}, no clean close\n${explain()}`);
          return resultOf(done);
        },
        kill() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        },
        explain,
      };
    },
  };
}
