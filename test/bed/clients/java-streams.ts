// Kafka Streams with the official library: a word-count app, through
// test/bed/java/StreamsDriver.java run as a child process, against the bed's Kafka version.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assertSucceeded } from './run.js';
import { programRunner, single, STREAMS_DRIVER } from './java.js';
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

export interface JavaStreamsClient {
  /** Produces each line as one record (key: its line number). */
  produceLines(target: ClientTarget, topic: string, lines: string[]): Promise<void>;
  wordCount(target: ClientTarget, opts: WordCountOptions): Promise<WordCountResult>;
  /** The last count of each word in `topic` (read_committed, from the start to its end). */
  readCounts(target: ClientTarget, topic: string): Promise<Record<string, number>>;
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
        const done = single(lines, 'done', 'wordcount');
        return {
          lines: Number(done['lines']),
          words: Number(done['words']),
          threadDeaths: Number(done['threadDeaths']),
          deaths: done['deaths'] as string[],
          state: String(done['state']),
          timedOut: done['timedOut'] === true,
        };
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
  };
}
