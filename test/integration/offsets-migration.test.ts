// Moving groups onto the proxy and back: `--fallback upstream` copies a group's broker offsets into
// the store on first use, and the `offsets` CLI exports and imports offsets (JSON lines) between
// the cluster and a store, with compare-and-set for operators and clear errors on bad input.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { createTopics, fetchCommittedOffsets, kafkajsClient } from '../bed/clients/kafkajs.js';
import { expectExactlyRecords, uniqueName } from '../bed/clients/scenarios.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import { ensureBuilt } from '../harness/proxy.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function cli(args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [path.join(repo, 'bin/kafka-offset-proxy.js'), ...args],
      { timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (input !== undefined) child.stdin!.end(input);
    else child.stdin!.end();
  });
}

describe('migration onto the proxy', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-migration-'));
    await ensureBuilt();
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** A group that consumed `consumed` of `total` records directly at the broker. */
  async function groupAtBroker(total: number, consumed: number) {
    const topic = uniqueName('migrate');
    const group = `${topic}-g`;
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 3 }]);
    await kafkajsClient.produce({ bootstrap: brokerBootstrap }, { topic, count: total });
    const first = await kafkajsClient.consume(
      { bootstrap: brokerBootstrap },
      { topic, group, max: consumed },
    );
    expect(first.committed.reduce((s, o) => s + o.offset, 0)).toBe(consumed);
    return { topic, group, first };
  }

  test('--fallback upstream: a group with offsets at the broker resumes through the proxy without reprocessing', async () => {
    const { topic, group, first } = await groupAtBroker(900, 300);
    const store = new EmbeddedStore({ dataDir: path.join(dir, 'fallback') });
    const proxy = await startOffsetProxy(brokerBootstrap, store, ['--fallback', 'upstream']);
    try {
      const second = await kafkajsClient.consume({ bootstrap: proxy.bootstrap }, { topic, group, max: 600 });
      expect(second.timedOut).toBe(false);
      expectExactlyRecords([...first.records, ...second.records], 0, 900);
      const stored = await store.fetch(group, null);
      expect(stored.reduce((s, o) => s + Number(o.offset), 0)).toBe(900);
      // The broker still has the position the group had when it moved.
      const atBroker = await fetchCommittedOffsets({ bootstrap: brokerBootstrap }, group, topic);
      expect(atBroker.reduce((s, o) => s + o.offset, 0)).toBe(300);
    } finally {
      await proxy.stop();
      await store.close();
    }
  });

  test('without a fallback the same move would start the group over (the test above can fail)', async () => {
    const { topic, group } = await groupAtBroker(90, 30);
    const store = new EmbeddedStore({ dataDir: path.join(dir, 'no-fallback') });
    const proxy = await startOffsetProxy(brokerBootstrap, store);
    try {
      const second = await kafkajsClient.consume({ bootstrap: proxy.bootstrap }, { topic, group, max: 90 });
      expectExactlyRecords(second.records, 0, 90);
    } finally {
      await proxy.stop();
      await store.close();
    }
  });

  test('--mirror-commits: the broker gets a copy of every accepted commit, so leaving the proxy is instant', async () => {
    const topic = uniqueName('mirror');
    const group = `${topic}-g`;
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
    const store = new EmbeddedStore({ dataDir: path.join(dir, 'mirror') });
    const proxy = await startOffsetProxy(brokerBootstrap, store, ['--mirror-commits']);
    try {
      await kafkajsClient.produce({ bootstrap: proxy.bootstrap }, { topic, count: 200 });
      const first = await kafkajsClient.consume({ bootstrap: proxy.bootstrap }, { topic, group, max: 150 });
      const deadline = Date.now() + 15_000;
      let atBroker = await fetchCommittedOffsets({ bootstrap: brokerBootstrap }, group, topic);
      while (atBroker.reduce((s, o) => s + o.offset, 0) !== 150 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        atBroker = await fetchCommittedOffsets({ bootstrap: brokerBootstrap }, group, topic);
      }
      expect(atBroker).toEqual(first.committed);
      // Back to the broker directly: the group resumes where it was on the proxy.
      const second = await kafkajsClient.consume({ bootstrap: brokerBootstrap }, { topic, group, max: 50 });
      expectExactlyRecords([...first.records, ...second.records], 0, 200);
    } finally {
      await proxy.stop();
      await store.close();
    }
  });

  test('offsets export --from cluster, import into the store, export again: the same file', async () => {
    const { topic, group, first } = await groupAtBroker(300, 120);
    const dataDir = path.join(dir, 'cli-store');
    const fromCluster = path.join(dir, 'from-cluster.jsonl');
    const a = path.join(dir, 'a.jsonl');
    const b = path.join(dir, 'b.jsonl');
    const exported = await cli([
      'offsets',
      'export',
      '--from',
      'cluster',
      '--bootstrap-server',
      brokerBootstrap,
      '--group',
      group,
      '--file',
      fromCluster,
    ]);
    expect(exported.code, exported.stderr).toBe(0);
    const lines = readFileSync(fromCluster, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { offset: string; topic: string });
    expect(lines.every((l) => l.topic === topic)).toBe(true);
    expect(lines.reduce((s, l) => s + Number(l.offset), 0)).toBe(120);

    expect((await cli(['offsets', 'import', '--data-dir', dataDir, '--file', fromCluster])).code).toBe(0);
    expect((await cli(['offsets', 'export', '--data-dir', dataDir, '--file', a])).code).toBe(0);
    expect((await cli(['offsets', 'delete', '--data-dir', dataDir, '--group', group])).code).toBe(0);
    expect((await cli(['offsets', 'get', '--data-dir', dataDir, '--group', group])).stdout).toBe('');
    expect((await cli(['offsets', 'import', '--data-dir', dataDir], readFileSync(a, 'utf8'))).code).toBe(0);
    expect((await cli(['offsets', 'export', '--data-dir', dataDir, '--file', b])).code).toBe(0);
    expect(readFileSync(b, 'utf8')).toBe(readFileSync(a, 'utf8'));

    // The imported store serves the group through the proxy: it resumes where it was at the broker.
    const store = new EmbeddedStore({ dataDir });
    const proxy = await startOffsetProxy(brokerBootstrap, store);
    try {
      const second = await kafkajsClient.consume({ bootstrap: proxy.bootstrap }, { topic, group, max: 180 });
      expectExactlyRecords([...first.records, ...second.records], 0, 300);
    } finally {
      await proxy.stop();
      await store.close();
    }
  });

  test('offsets set with --expected is a compare-and-set; bad input is named and refused', async () => {
    const dataDir = path.join(dir, 'cli-cas');
    const base = [
      'offsets',
      'set',
      '--data-dir',
      dataDir,
      '--group',
      'g1',
      '--topic',
      't',
      '--partition',
      '0',
    ];
    expect((await cli([...base, '--offset', '10', '--expected', '-1'])).code).toBe(0);
    const conflict = await cli([...base, '--offset', '20', '--expected', '5']);
    expect(conflict.code).toBe(3);
    expect(conflict.stderr).toMatch(/expected offset 5, but it is 10/);
    expect((await cli([...base, '--offset', '20', '--expected', '10'])).code).toBe(0);
    const got = await cli(['offsets', 'get', '--data-dir', dataDir, '--group', 'g1']);
    expect(JSON.parse(got.stdout.trim())).toMatchObject({
      group: 'g1',
      topic: 't',
      partition: 0,
      offset: '20',
    });

    const bad = await cli([...base, '--offset', 'abc']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/--offset="abc"/);
    expect((await cli(['offsets', 'frobnicate'])).code).toBe(2);
    expect((await cli(['offsets', 'import', '--data-dir', dataDir], '{"group":"g"}\n')).stderr).toMatch(
      /line 1/,
    );
  });
});
