// Runs a client program (the Java driver, kcat, the Python driver, Kafka's tools) to completion and
// captures its output. Clients are short-lived, but a test that dies must not leave one behind:
// like the bed's components they run under `setpriv --pdeathsig SIGKILL` where available.

import { spawn } from 'node:child_process';
import fs from 'node:fs';

const SETPRIV = '/usr/bin/setpriv';
const usePdeathsig = process.env['KOP_BED_NO_PDEATHSIG'] !== '1' && fs.existsSync(SETPRIV);

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Wall time in milliseconds. */
  elapsedMs: number;
}

export interface RunOptions {
  /** Sent on stdin, which is then closed. */
  input?: string;
  /** SIGTERM after this long (then SIGKILL 5 s later). The result then has `signal` set. */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export function runProgram(command: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const [cmd, argv] = usePdeathsig
    ? [SETPRIV, ['--pdeathsig', 'SIGKILL', '--', command, ...args]]
    : [command, args];
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, {
      env: opts.env ?? process.env,
      cwd: opts.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    let killTimer: NodeJS.Timeout | undefined;
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            child.kill('SIGTERM');
            killTimer = setTimeout(() => child.kill('SIGKILL'), 5_000);
          }, opts.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      reject(new Error(`could not run ${command}: ${error.message}`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      resolve({
        code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        elapsedMs: Date.now() - started,
      });
    });
    // A client that exits without reading its input must not crash the test with EPIPE.
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
  });
}

/** The lines of `text` that are JSON objects; other lines (stray log output) are ignored. */
export function jsonLines(text: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed.startsWith('{')) continue;
    try {
      out.push(JSON.parse(trimmed) as Record<string, unknown>);
    } catch {
      // a log line that happens to start with '{'
    }
  }
  return out;
}

/**
 * Calls `onLine` with each JSON object line of a live child's `stream` as it comes (a line split
 * across chunks waits for its end), with the time it was read; other lines are ignored as by
 * jsonLines.
 */
export function followJsonLines(
  stream: NodeJS.ReadableStream,
  onLine: (line: Record<string, unknown>, readAt: number) => void,
): void {
  let rest = '';
  stream.on('data', (d: Buffer) => {
    rest += d.toString();
    const cut = rest.lastIndexOf('\n');
    if (cut < 0) return;
    const readAt = Date.now();
    for (const line of jsonLines(rest.slice(0, cut))) onLine(line, readAt);
    rest = rest.slice(cut + 1);
  });
}

/** Last `n` lines of a text, for error messages. */
export function tail(text: string, n = 30): string {
  return text.trimEnd().split('\n').slice(-n).join('\n');
}

/** Throws a readable error unless the program exited with status 0. */
export function assertSucceeded(what: string, result: RunResult): void {
  if (result.code === 0) return;
  const why = result.signal ? `killed by ${result.signal} (timeout?)` : `exit code ${result.code}`;
  throw new Error(
    `${what} failed: ${why}\n--- stdout (tail)\n${tail(result.stdout)}\n--- stderr (tail)\n${tail(result.stderr)}`,
  );
}
