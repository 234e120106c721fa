/**
 * Libraries that print with console.error / console.warn (lmdb-js prints a failed write
 * transaction's error with its stack, several lines, on every failed commit of a full disk) would
 * put unstructured lines into the proxy's one-JSON-object-per-line log on stderr. Once the logger
 * exists, those two calls are routed through it: one line each, the text in `text`, an Error's
 * stack in `stack`.
 *
 * LMDB's C library also writes "Write error: <reason> position <n>, size <n>", without a newline,
 * with fprintf(stderr), just before lmdb-js prints the JavaScript error: no JavaScript can
 * intercept it. routeCStderrToLog has the native addon turn every write of the C stderr stream
 * into a JSON line of its own (native/c-stderr.c). Where it cannot (no addon built, not Linux),
 * the line written for that JavaScript error starts with a newline, so the fragment at least
 * stands on a line of its own instead of spoiling the JSON line after it.
 */
import { format } from 'node:util';
import type { Logger } from './common/log.js';

/** What lmdb-js prints after a failed write (its errors name the MDB_ code or come from lmdb's files). */
const LMDB_TEXT = /\bMDB_|lmdb[\\/]/;

export function routeConsoleToLog(
  log: Logger,
  stderr: { write(s: string): unknown } = process.stderr,
  /** The C stderr stream writes JSON lines (routeCStderrToLog): LMDB's fragment needs no newline. */
  cStderrRouted = false,
): void {
  const route =
    (level: 'warn' | 'error') =>
    (...args: unknown[]): void => {
      const error = args.find((a): a is Error => a instanceof Error);
      const text = format(...args.map((a) => (a instanceof Error ? a.message : a)));
      const fields: Record<string, unknown> = { text };
      if (error?.stack) fields['stack'] = error.stack;
      if (!cStderrRouted && LMDB_TEXT.test(error?.stack ?? text)) stderr.write('\n');
      log[level]('library output', fields);
    };
  console.error = route('error');
  console.warn = route('warn');
}

/**
 * What C code prints with fprintf(stderr) becomes JSON lines of the log with these fields (`source`
 * tells them from console output), through the native addon; false where that is not possible.
 */
export function routeCStderrToLog(
  binding: { routeCStderr?(fields: string): boolean } | null,
  service: string,
): boolean {
  if (typeof binding?.routeCStderr !== 'function') return false;
  const fields = {
    level: 'error',
    event: 'library output',
    service,
    component: 'library',
    source: 'C stderr',
  };
  return binding.routeCStderr(`${JSON.stringify(fields).slice(1, -1)},`);
}
