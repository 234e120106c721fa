// One writer per embedded data directory, between real processes: a child holds the directory,
// this process is refused naming it; SIGKILL of the holder leaves a socket file that is taken over.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DataDirHeldError, HOLDER_SOCKET, holdDataDir } from './data-dir-holder.js';

const root = mkdtempSync(join(tmpdir(), 'kop-holder-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const CHILD = `
const { holdDataDir } = await import(${JSON.stringify(resolve('backends/data-dir-holder.ts'))});
await holdDataDir(process.env.KOP_TEST_EMBEDDED_DIR, 'test holder');
process.stdout.write('held\\n');
setInterval(() => undefined, 60_000);
`;

let child: ChildProcess | undefined;
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
});

/** A child process holding `dir`; resolves once it does. */
async function childHolding(dir: string): Promise<ChildProcess> {
  child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD], {
    env: { ...process.env, KOP_TEST_EMBEDDED_DIR: dir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((ok, fail) => {
    child!.stdout!.on('data', (d: Buffer) => d.toString().includes('held') && ok());
    child!.once('exit', (code) => fail(new Error(`holder exited with ${code}: ${err}`)));
  });
  return child;
}

describe('data directory holder', () => {
  it('a second process is refused naming the directory and the holder; free again once released', async () => {
    const dir = join(root, 'two');
    mkdirSync(dir);
    const holder = await childHolding(dir);
    const refused = await holdDataDir(dir, 'proxy').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DataDirHeldError);
    expect((refused as Error).message).toMatch(
      new RegExp(`^data directory ${dir} is held by test holder \\(pid ${holder.pid} on .+, since `),
    );
    holder.kill('SIGTERM');
    await new Promise((r) => holder.once('exit', r));
    const hold = await holdDataDir(dir, 'proxy');
    await hold.release();
    expect(existsSync(join(dir, HOLDER_SOCKET))).toBe(false);
  });

  it('the socket file of a SIGKILLed holder is taken over; a live hold refuses in-process too', async () => {
    const dir = join(root, 'killed');
    mkdirSync(dir);
    const holder = await childHolding(dir);
    holder.kill('SIGKILL');
    await new Promise((r) => holder.once('exit', r));
    expect(existsSync(join(dir, HOLDER_SOCKET))).toBe(true);
    const hold = await holdDataDir(dir, 'proxy');
    try {
      await expect(holdDataDir(dir, 'offsets set')).rejects.toThrow(/is held by proxy \(pid /);
    } finally {
      await hold.release();
    }
  });

  it('a directory whose socket path is too long is held through an abstract socket', async () => {
    const dir = join(root, 'x'.repeat(120));
    mkdirSync(dir);
    const hold = await holdDataDir(dir, 'proxy');
    try {
      expect(hold.address).toMatch(/^@kafka-offset-proxy-data-dir:\d+:\d+$/);
      await expect(holdDataDir(dir, 'proxy')).rejects.toThrow(DataDirHeldError);
    } finally {
      await hold.release();
    }
  });
});
