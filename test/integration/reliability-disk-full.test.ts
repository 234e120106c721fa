// Issue #20, disk full under the embedded store, through the CLI proxy on a small tmpfs: commits
// on a full disk get a retriable code (never a dropped connection or an exit), nothing answered
// with an error is there afterwards, commits succeed again by themselves once space is freed,
// and a start on a full disk stops at once with exit code 2 naming --data-dir and the cause.
// Needs root for `mount -t tmpfs` (CI runs as root): a failed mount fails the file, it does not
// skip it.
import { spawn } from 'node:child_process';
import { mkdirSync, statSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createTopics } from '../bed/clients/kafkajs.js';
import { freePort } from '../bed/ports.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { RawClient } from '../harness/raw-client.js';
import { SmallDisk } from '../harness/small-disk.js';
import { commitOnce, fetchOnce, sleep } from '../reliability/commit-checker.js';

const brokerBootstrap = inject('kafkaBootstrap');
const SIZE_MB = 8;
const PARTITIONS = 20;

let disk: SmallDisk;
let mountPoint: string;

beforeAll(() => {
  disk = SmallDisk.mount(SIZE_MB);
  mountPoint = disk.path;
});

afterAll(() => disk?.unmount());

async function commit(proxy: ProxyProcess, group: string, topic: string, offset: bigint): Promise<number[]> {
  const client = await RawClient.connect(proxy.bootstrap);
  try {
    return await commitOnce(client, group, topic, PARTITIONS, offset);
  } finally {
    client.close();
  }
}

async function committed(proxy: ProxyProcess, group: string, topic: string): Promise<bigint[]> {
  const client = await RawClient.connect(proxy.bootstrap);
  try {
    const { errorCode, offsets } = await fetchOnce(client, group, topic, PARTITIONS);
    expect(errorCode).toBe(0);
    return [...offsets.values()];
  } finally {
    client.close();
  }
}

describe('embedded store on a full disk (tmpfs)', () => {
  test('commits get retriable codes, the process stays up, and recovers when space returns', async () => {
    await ensureBuilt();
    const dataDir = join(mountPoint, 'running');
    const topic = uniqueName('disk-full');
    const group = `${topic}-g`;
    // Commits to a topic the cluster lacks are refused, as a broker refuses them.
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: PARTITIONS }]);
    const http = await freePort();
    const proxy = await spawnProxy([
      '--bootstrap-server',
      brokerBootstrap,
      '--data-dir',
      dataDir,
      '--store-timeout-ms',
      '1000',
      '--http',
      `127.0.0.1:${http}`,
    ]);
    try {
      expect(await commit(proxy, group, topic, 1n)).toEqual(Array(PARTITIONS).fill(0));
      disk.fill();
      const codes: number[] = [];
      // Commits of other groups too: each needs new pages (a new group record, new keys).
      for (let i = 2n; i <= 8n; i++) {
        codes.push(...(await commit(proxy, group, topic, i)));
        codes.push(...(await commit(proxy, `${group}-${i}`, topic, i)));
      }
      console.log(`[disk-full] codes on a full disk: ${JSON.stringify(countOf(codes))}`);
      expect(codes.every((c) => c === 7 || c === 14 || c === 15)).toBe(true);
      expect(codes.length).toBe(14 * PARTITIONS);
      // Reads still work, and nothing answered with an error was written.
      expect(await committed(proxy, group, topic)).toEqual(Array(PARTITIONS).fill(1n));
      expect(await committed(proxy, `${group}-2`, topic)).toEqual(Array(PARTITIONS).fill(-1n));
      await sleep(500);
      expect(proxy.child.exitCode).toBe(null);
      // Readiness says the store cannot write, in the store's words (pings still succeed).
      const ready = await fetch(`http://127.0.0.1:${http}/readyz`);
      const body = (await ready.json()) as { checks: { store: { ok: boolean; error?: string } } };
      expect(ready.status).toBe(503);
      expect(body.checks.store.error).toMatch(/no space left on device|MDB_|file system of .* is full/i);
      // The log stays one JSON object per line: lmdb-js's multi-line errors are routed through
      // it, and so is the C library's own "Write error: ..." (fprintf to C's stderr stream, no
      // newline: native/c-stderr.c makes each such write a JSON line).
      const lines = proxy
        .output()
        .split('\n')
        .filter((l) => l.trim() !== '');
      for (const line of lines) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
      expect(proxy.output()).toMatch(
        /"event":"library output".*"source":"C stderr","text":"Write error: No space left on device position \d+, size \d+"\}/,
      );
      expect(proxy.output()).toMatch(
        /"offset store failing: offset requests answered at once".*[Nn]o space left/,
      );

      disk.free();
      // Served again once the circuit's next probe writes (about a second).
      let codes9: number[] = [];
      for (let i = 0; i < 100; i++) {
        codes9 = await commit(proxy, group, topic, 9n);
        if (codes9.every((c) => c === 0)) break;
        await sleep(200);
      }
      expect(codes9).toEqual(Array(PARTITIONS).fill(0));
      expect((await fetch(`http://127.0.0.1:${http}/readyz`)).status).toBe(200);
      expect(await committed(proxy, group, topic)).toEqual(Array(PARTITIONS).fill(9n));
      expect(proxy.output()).not.toMatch(/uncaught exception|unhandled/i);
      expect(proxy.child.exitCode).toBe(null);
    } finally {
      await proxy.stop('SIGKILL');
      disk.free();
    }
    // What was acknowledged is durable: a new process on the same directory reads it.
    const again = await spawnProxy(['--bootstrap-server', brokerBootstrap, '--data-dir', dataDir]);
    try {
      expect(await committed(again, group, topic)).toEqual(Array(PARTITIONS).fill(9n));
    } finally {
      await again.stop('SIGKILL');
    }
  });

  test('a start on a full disk exits with code 2, naming --data-dir and the cause', async () => {
    await ensureBuilt();
    const existing = join(mountPoint, 'existing');
    // One directory the store used before the disk filled, and new ones.
    const before = await spawnProxy(['--bootstrap-server', brokerBootstrap, '--data-dir', existing]);
    await before.stop('SIGKILL');
    const filler = disk.fill();
    try {
      // Quite full, and nearly full: with a few pages left a small write succeeds, and LMDB's
      // first touch of its lock file or data pages killed the process (SIGBUS) before.
      for (const left of [0, 32 * 1024]) {
        if (left > 0) truncateSync(filler, statSync(filler).size - left);
        const dirs = [
          existing,
          ...Array.from({ length: 5 }, (_, i) => join(mountPoint, `fresh-${left}-${i}`)),
        ];
        mkdirSync(dirs[1]!, { recursive: true });
        const runs = await Promise.all(dirs.map((dir) => startOnce(dir)));
        for (const [i, run] of runs.entries()) {
          const what = `${left} bytes left, ${dirs[i]}:\n${run.output}`;
          expect(run.code, what).toBe(2);
          expect(run.output, what).toContain('invalid configuration: data-dir=');
          expect(run.output, what).toContain(dirs[i]);
          expect(run.output, what).toMatch(/no space left on (the )?device/i);
        }
      }
    } finally {
      disk.free();
    }
    // With space back, the same directories open.
    const after = await spawnProxy(['--bootstrap-server', brokerBootstrap, '--data-dir', existing]);
    await after.stop('SIGKILL');
  });
});

function countOf(codes: number[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const c of codes) out[c] = (out[c] ?? 0) + 1;
  return out;
}

/** Runs the CLI until it exits (10 s at most, then SIGKILL: a hang fails the test). */
function startOnce(dataDir: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        'bin/kafka-offset-proxy.js',
        '--bootstrap-server',
        brokerBootstrap,
        '--listen',
        '127.0.0.1:0',
        '--data-dir',
        dataDir,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal === null ? null : -1), output: `${output}\n(signal ${signal})` });
    });
  });
}
