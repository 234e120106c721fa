// Nothing left behind: components started by a Node process die with it, however it ends, and
// the scratch directories of the tests (a proxy's data directory) go with them.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { isAlive, reapLeftovers } from '../bed/process.js';
import scratchCheck from '../bed/scratch-check.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import { SCRATCH_RUN_ENV, scratchDir } from '../harness/scratch.js';

const FIXTURE = fileURLToPath(new URL('../bed/fixtures/hold-components.ts', import.meta.url));

let child: ChildProcess | undefined;
let started: number[] = [];

/** Starts the fixture in a child Node process and returns the pids of the components it started. */
async function holdComponents(components: string, env: NodeJS.ProcessEnv = {}): Promise<number[]> {
  child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, components], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const pids = await new Promise<number[]>((resolve, reject) => {
    let stdout = '';
    child!.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve((JSON.parse(line) as { pids: number[] }).pids);
    });
    child!.once('exit', (code) =>
      reject(new Error(`fixture exited with ${code} before printing pids:\n${stderr}`)),
    );
  });
  started = pids;
  return pids;
}

async function waitForExit(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  await new Promise((resolve) => proc.once('exit', resolve));
}

async function allGone(pids: number[], timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const alive = pids.filter((pid) => isAlive(pid));
    if (alive.length === 0 || Date.now() > deadline) return alive;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

afterEach(() => {
  // Whatever the outcome, leave nothing running.
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  }
  child = undefined;
  started = [];
});

describe('bed: no process left behind', () => {
  it('SIGKILL of the owning Node process kills Kafka, Redis and ZooKeeper (pdeathsig)', async () => {
    const pids = await holdComponents('kafka,redis,zk');
    expect(pids).toHaveLength(3);
    expect(pids.every((pid) => isAlive(pid))).toBe(true);
    child!.kill('SIGKILL');
    await waitForExit(child!);
    expect(await allGone(pids, 10_000)).toEqual([]);
  });

  it('SIGINT of the owning Node process kills its components (signal handler)', async () => {
    const pids = await holdComponents('redis,zk');
    expect(pids.every((pid) => isAlive(pid))).toBe(true);
    child!.kill('SIGINT');
    await waitForExit(child!);
    expect(child!.signalCode).toBe('SIGINT');
    expect(await allGone(pids, 10_000)).toEqual([]);
  });

  it('the next run reaps components of a killed run that escaped pdeathsig (pid files)', async () => {
    const pids = await holdComponents('redis,zk', { KOP_BED_NO_PDEATHSIG: '1' });
    child!.kill('SIGKILL');
    await waitForExit(child!);
    // Without pdeathsig nothing killed them: they are orphans now.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(pids.filter((pid) => isAlive(pid))).toEqual(pids);
    const reaped = reapLeftovers();
    expect([...reaped].sort()).toEqual([...pids].sort());
    expect(await allGone(pids, 10_000)).toEqual([]);
  });
});

describe('bed: no scratch directory left behind', () => {
  it("a proxy's own data directory is removed when it stops, and when it is SIGKILLed", async () => {
    await ensureBuilt();
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      const proxy = await spawnProxy(['--bootstrap-server', inject('kafkaBootstrap')]);
      expect(proxy.dataDir).toMatch(/kop-cli-data-run/);
      expect(existsSync(proxy.dataDir!)).toBe(true);
      await proxy.stop(signal);
      expect(existsSync(proxy.dataDir!), signal).toBe(false);
    }
  });

  it('the end of a run fails naming a scratch directory that was left (and removes it)', () => {
    const run = process.env[SCRATCH_RUN_ENV];
    process.env[SCRATCH_RUN_ENV] = `check${process.pid}`;
    try {
      const teardown = scratchCheck();
      const left = scratchDir('kop-cli-data');
      expect(() => teardown()).toThrow(/left 1 scratch directories .*kop-cli-data-runcheck/);
      expect(existsSync(left)).toBe(false);
      expect(() => teardown()).not.toThrow();
    } finally {
      process.env[SCRATCH_RUN_ENV] = run;
    }
  });
});
