// The built CLI as a child process whose output a test watches as it comes (startup errors,
// store-health lines, shutdown), and a one-shot OffsetCommit for tests that only need its answer.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiKey } from '../../protocol/messages/index.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { commitBody } from '../reliability/commit-checker.js';
import { RawClient } from './raw-client.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI_BIN = path.join(repo, 'bin/kafka-offset-proxy.js');

export interface CliProcess {
  child: ChildProcess;
  output(): string;
  /** Resolves when the output matches `pattern`; rejects after `timeoutMs` or when the process exits first. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Exit code (null when killed by a signal) once the process has ended. */
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Runs `kafka-offset-proxy <args>` with the environment cleaned of the developer's KOP_* variables. */
export function startCli(args: string[], env: NodeJS.ProcessEnv = {}, cwd = repo): CliProcess {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KOP_')));
  const child = spawn(process.execPath, [CLI_BIN, ...args], {
    env: { ...base, ...env },
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let done = false;
  void exited.then(() => (done = true));
  return {
    child,
    output: () => out,
    exited,
    async waitFor(pattern, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (!pattern.test(out)) {
        if (done) throw new Error(`exited before ${pattern}:\n${out}`);
        if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms:\n${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop(signal = 'SIGTERM') {
      if (!done) child.kill(signal);
      return exited;
    },
  };
}

let correlation = 1;

/** One OffsetCommit v8 (no member, generation -1) of one partition; the partition's error code. */
export async function commitOnce(
  bootstrap: string,
  group: string,
  topic: string,
  offset: bigint,
  partition = 0,
): Promise<number> {
  const client = await RawClient.connect(bootstrap);
  try {
    const body = commitBody(group, topic, partition + 1, offset) as OffsetCommitRequest;
    // Only the partition asked for.
    body.topics[0]!.partitions = body.topics[0]!.partitions.slice(partition);
    const r = await client.request<OffsetCommitResponse>(ApiKey.OffsetCommit, 8, correlation++, body);
    return r.topics[0]!.partitions[0]!.errorCode;
  } finally {
    client.close();
  }
}
