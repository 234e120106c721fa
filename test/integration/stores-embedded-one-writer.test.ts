// One embedded directory, one writer, with real processes: a second proxy on the directory of a
// running one exits 2 naming the directory and the first proxy's pid; a writing `offsets`
// command is refused (exit 3) while reads go on; once the first proxy is SIGKILLed, the next one
// takes the directory over.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, test } from 'vitest';
import { CLI_BIN, startCli } from '../harness/cli-process.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';

let dir: string;
const running: ProxyProcess[] = [];

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kop-one-writer-'));
  await ensureBuilt();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop('SIGKILL')));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function offsets(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KOP_')));
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_BIN, 'offsets', ...args],
      { timeout: 60_000, env },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

describe('embedded store: one writer per data directory', () => {
  const bootstrap = inject('kafkaBootstrap');

  test('a second proxy is refused naming the first; a writing CLI too, reads go on', async () => {
    const dataDir = path.join(dir, 'shared');
    const first = await spawnProxy(['--bootstrap-server', bootstrap, '--data-dir', dataDir]);
    running.push(first);

    const second = startCli([
      '--bootstrap-server',
      bootstrap,
      '--listen',
      '127.0.0.1:0',
      '--data-dir',
      dataDir,
    ]);
    expect(await second.exited).toBe(2);
    expect(second.output()).toContain(
      `data directory ${dataDir} is held by proxy (pid ${first.child.pid} on ${os.hostname()}`,
    );

    const set = [
      'set',
      '--data-dir',
      dataDir,
      '--group',
      'g',
      '--topic',
      't',
      '--partition',
      '0',
      '--offset',
      '1',
    ];
    const refused = await offsets(set);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(`is held by proxy (pid ${first.child.pid}`);
    expect(refused.stderr).toContain('admin API');
    // Reads do not hold the directory: they run beside the proxy.
    const listed = await offsets(['groups', '--data-dir', dataDir]);
    expect(listed.code).toBe(0);
    expect(listed.stderr).toContain(`store: embedded ${dataDir}`);

    // The proxy dies without a word: its socket file stays, and is taken over.
    await first.stop('SIGKILL');
    expect(existsSync(path.join(dataDir, 'holder.sock'))).toBe(true);
    expect((await offsets(set)).code).toBe(0);
    const next = await spawnProxy(['--bootstrap-server', bootstrap, '--data-dir', dataDir]);
    running.push(next);
    expect((await offsets(set)).stderr).toContain(`is held by proxy (pid ${next.child.pid}`);
    // A stopped proxy gives the directory back.
    expect(await next.stop()).toBe(0);
    expect(existsSync(path.join(dataDir, 'holder.sock'))).toBe(false);
  });
});
