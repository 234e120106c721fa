// A modern librdkafka for the bed: python confluent-kafka 2.16.2 (librdkafka 2.16.0), which speaks
// KIP-848's consumer group protocol (group.protocol=consumer). Debian's python3-confluent-kafka 1.7
// (librdkafka 2.0.2, python.ts) stays the bed's "oldest librdkafka"; this one is an extra client.
// It lives in a venv under the bed's cache directory, made once (`npm run bed:prefetch` makes it up
// front, like the Maven artifacts) from the pinned, hash-checked requirements file beside this one:
// pip installs only the wheel whose sha256 is listed there. The venv's directory is named after the
// requirements' hash, so editing the pin makes a new one.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { bedCacheDir } from '../kafka.js';
import { runToCompletion } from '../process.js';
import { runProgram } from './run.js';

/** The interpreter the venv is made from: Debian's (python3-venv), the one CI has. */
const BASE_PYTHON = '/usr/bin/python3';
const REQUIREMENTS = fileURLToPath(new URL('./confluent-kafka-modern.txt', import.meta.url));
/** What `import confluent_kafka` must report, checked before the venv is used. */
export const MODERN_CONFLUENT_KAFKA = { version: '2.16.2', librdkafka: '2.16.0' };

let memo: Promise<string> | undefined;

/** The venv's python, with confluent-kafka 2.16.2; makes the venv on first use. */
export function modernPython(): Promise<string> {
  memo ??= ensureVenv();
  memo.catch(() => (memo = undefined));
  return memo;
}

async function versions(python: string): Promise<string | undefined> {
  const probe = await runProgram(
    python,
    // version() is a string in confluent-kafka 2.x (a tuple in 1.x); libversion() a tuple.
    ['-c', 'import confluent_kafka as c; print(c.version(), c.libversion()[0])'],
    { timeoutMs: 60_000 },
  ).catch(() => undefined);
  return probe?.code === 0 ? probe.stdout.trim() : undefined;
}

async function ensureVenv(): Promise<string> {
  const requirements = fs.readFileSync(REQUIREMENTS);
  const hash = createHash('sha256').update(requirements).digest('hex').slice(0, 12);
  const cacheDir = bedCacheDir();
  const venv = path.join(cacheDir, `python-confluent-kafka-${MODERN_CONFLUENT_KAFKA.version}-${hash}`);
  const python = path.join(venv, 'bin', 'python');
  const expected = `${MODERN_CONFLUENT_KAFKA.version} ${MODERN_CONFLUENT_KAFKA.librdkafka}`;
  if ((await versions(python)) === expected) return python;

  // Built beside the final place and renamed into it: a concurrent run (another test file, another
  // checkout sharing the cache) sees either no venv or a whole one. A venv's python finds its
  // packages through the pyvenv.cfg next to its bin/, so the rename keeps it working.
  fs.mkdirSync(cacheDir, { recursive: true });
  const tmp = `${venv}.${process.pid}.tmp`;
  fs.rmSync(tmp, { recursive: true, force: true });
  const logFile = path.join(cacheDir, 'pip-confluent-kafka-modern.log');
  fs.writeFileSync(logFile, '');
  try {
    await runToCompletion({
      name: `${BASE_PYTHON} -m venv (needs Debian's python3-venv)`,
      command: BASE_PYTHON,
      args: ['-m', 'venv', tmp],
      logFile,
      timeoutMs: 5 * 60_000,
    });
    await runToCompletion({
      name: `pip install confluent-kafka ${MODERN_CONFLUENT_KAFKA.version} (--require-hashes)`,
      command: path.join(tmp, 'bin', 'python'),
      args: [
        '-m',
        'pip',
        'install',
        '--no-input',
        '--disable-pip-version-check',
        '--no-deps',
        '--only-binary=:all:',
        '--require-hashes',
        '-r',
        REQUIREMENTS,
      ],
      logFile,
      timeoutMs: 10 * 60_000,
    });
    const got = await versions(path.join(tmp, 'bin', 'python'));
    if (got !== expected) {
      throw new Error(
        `the venv's confluent-kafka reports "${got ?? 'nothing'}", not "${expected}"; see ${logFile}`,
      );
    }
    // Another run may have put its own into place meanwhile: keep that one; else replace whatever
    // is there (a venv that failed the check above, half made by a killed run).
    if ((await versions(python)) !== expected) {
      fs.rmSync(venv, { recursive: true, force: true });
      fs.renameSync(tmp, venv);
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return python;
}
