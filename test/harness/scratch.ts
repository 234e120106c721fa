// Scratch directories of tests in the temp folder: each named after the test run, removed by the
// test that made it and, whatever happens to the test (a failure, a timeout), when its process
// exits. test/bed/scratch-check.ts fails the run when one is left all the same.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Set by scratch-check.ts (vitest globalSetup) for the workers: the run's id. Not a KOP_ variable: the proxies the tests start inherit the environment. */
export const SCRATCH_RUN_ENV = 'KAFKA_OFFSET_PROXY_TEST_RUN';

/** The part of a scratch directory's name that says which run made it. */
export function runTag(run: string): string {
  return `-run${run}-`;
}

const made = new Set<string>();
process.on('exit', () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A new directory `<tmp>/<prefix>run<id>-XXXXXX` (prefix like "kop-cli-data"). */
export function scratchDir(prefix: string): string {
  const run = process.env[SCRATCH_RUN_ENV] ?? String(process.pid);
  const dir = mkdtempSync(path.join(os.tmpdir(), `${prefix}${runTag(run)}`));
  made.add(dir);
  return dir;
}

export function removeScratch(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  made.delete(dir);
}
