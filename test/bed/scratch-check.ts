// vitest globalSetup of both projects: names the run for test/harness/scratch.ts, and at the end
// fails the run when a scratch directory of it is left in the temp folder (a clean-clone CI run
// once left 49 kop-cli-data-* directories). What is found is removed, then reported.
import { readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runTag, SCRATCH_RUN_ENV } from '../harness/scratch.js';

export default function setup(): () => void {
  // Inherited by the worker processes, which vitest starts after the global setups.
  const run = process.env[SCRATCH_RUN_ENV] ?? String(process.pid);
  process.env[SCRATCH_RUN_ENV] = run;
  return () => {
    const tmp = os.tmpdir();
    const left = readdirSync(tmp).filter((name) => name.startsWith('kop-') && name.includes(runTag(run)));
    for (const name of left) rmSync(path.join(tmp, name), { recursive: true, force: true });
    if (left.length > 0) {
      throw new Error(
        `the tests left ${left.length} scratch directories in ${tmp} (removed now): ${left.join(', ')}`,
      );
    }
  };
}
