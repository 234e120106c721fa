// Operator writes to a group whose consumers are running, end to end: a kafkajs group consumes
// through the proxy (embedded store), and the `offsets` CLI (the built bin, another process on the
// same store) and the admin HTTP API refuse to set or delete its offsets, as Kafka's
// kafka-consumer-groups refuses while a group is active; once the group stops they succeed, and
// --force / "force": true succeeds while it runs. A group the store still believes running but the
// broker does not know is written after the broker is asked.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { registerOffsetsAdminRoutes } from '../../proxy/ops/admin/http-routes.js';
import { getOffsets } from '../../proxy/ops/admin/offsets-admin.js';
import { OpsHttpServer } from '../../proxy/ops/http/http-server.js';
import { createTopics, kafkajsClient } from '../bed/clients/kafkajs.js';
import { expectExactlyRecords, uniqueName } from '../bed/clients/scenarios.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';
import { ensureBuilt } from '../harness/proxy.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const RECORDS = 20;
/** The admin routes' writes need a token (route-guard.ts). */
const TOKEN = 'fencing-7d2c91e4b05a3f68';

function cli(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(repo, 'bin/kafka-offset-proxy.js'), 'offsets', ...args],
      { timeout: 60_000, env: { ...process.env, KOP_BOOTSTRAP_SERVER: '' } },
      (err, _stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stderr });
      },
    ).stdin!.end();
  });
}

/** `offsets set` of partition 0 on the embedded store in `dir`. */
function setArgs(dir: string, group: string, topic: string, offset: number): string[] {
  return [
    'set',
    '--data-dir',
    dir,
    '--group',
    group,
    '--topic',
    topic,
    '--partition',
    '0',
    '--offset',
    String(offset),
  ];
}

describe('admin writes to a running group', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;
  let http: OpsHttpServer;
  let base: string;

  beforeAll(async () => {
    await ensureBuilt();
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-admin-fencing-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(brokerBootstrap, store);
    // As the proxy's CLI serves the routes: with the proxy's own broker lookups.
    http = new OpsHttpServer({ token: TOKEN });
    registerOffsetsAdminRoutes(http, store, {
      groupIsEmptyAtBroker: (g) => proxy.offsets.lookups.groupIsEmpty(g),
    });
    base = `http://127.0.0.1:${(await http.listen({ host: '127.0.0.1', port: 0 })).port}`;
  });
  afterAll(async () => {
    await http?.close();
    await proxy?.stop();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const stored = async (group: string): Promise<string | undefined> =>
    (await getOffsets(store, group)).find((l) => l.partition === 0)?.offset;

  /**
   * A kafkajs group that has consumed and committed all RECORDS of a fresh one-partition topic
   * through the proxy and keeps running, idle (it commits only what it consumes).
   */
  async function runningGroup(prefix: string) {
    const topic = uniqueName(prefix);
    const group = `${topic}-g`;
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic }]);
    await kafkajsClient.produce({ bootstrap: proxy.bootstrap }, { topic, count: RECORDS });
    const consumer = new Kafka({
      clientId: `${group}-c`,
      brokers: [proxy.bootstrap],
      logLevel: logLevel.NOTHING,
    }).consumer({ groupId: group, sessionTimeout: 10_000, rebalanceTimeout: 10_000, heartbeatInterval: 500 });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message, partition }) => {
        await consumer.commitOffsets([{ topic, partition, offset: String(BigInt(message.offset) + 1n) }]);
      },
    });
    const deadline = Date.now() + 30_000;
    while ((await stored(group)) !== String(RECORDS)) {
      if (Date.now() > deadline) throw new Error(`${group} did not commit ${RECORDS} within 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return { topic, group, stop: () => consumer.disconnect() };
  }

  test('offsets set and delete: refused while the group runs, --force writes, done once it stopped', async () => {
    const { topic, group, stop } = await runningGroup('admin-fencing-cli');
    const set = (offset: number, ...more: string[]) => cli([...setArgs(dir, group, topic, offset), ...more]);
    try {
      // The broker, asked, confirms the members: refused, with or without a compare-and-set.
      const refused = await set(5, '--bootstrap-server', brokerBootstrap);
      expect(refused.code, refused.stderr).toBe(3);
      expect(refused.stderr).toMatch(new RegExp(`group ${group} has live members.*--force`));
      expect((await set(5, '--bootstrap-server', brokerBootstrap, '--expected', String(RECORDS))).code).toBe(
        3,
      );
      const deleted = await cli([
        'delete',
        '--data-dir',
        dir,
        '--group',
        group,
        '--bootstrap-server',
        brokerBootstrap,
      ]);
      expect(deleted.code, deleted.stderr).toBe(3);
      expect(await stored(group)).toBe(String(RECORDS));

      const forced = await set(5, '--force');
      expect(forced.code, forced.stderr).toBe(0);
      expect(await stored(group)).toBe('5');
    } finally {
      await stop();
    }
    const after = await set(12, '--bootstrap-server', brokerBootstrap, '--expected', '5');
    expect(after.code, after.stderr).toBe(0);
    expect(await stored(group)).toBe('12');
    // The group resumes from what the operator set.
    const resumed = await kafkajsClient.consume({ bootstrap: proxy.bootstrap }, { topic, group, max: 8 });
    expectExactlyRecords(resumed.records, 12, RECORDS);
  });

  test('HTTP PUT: 409 while the group runs, "force": true writes, 200 once it stopped', async () => {
    const { topic, group, stop } = await runningGroup('admin-fencing-http');
    const put = async (body: Record<string, unknown>) => {
      const res = await fetch(`${base}/admin/groups/${group}/offsets/${topic}/0`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    try {
      const refused = await put({ offset: '3' });
      expect(refused.status).toBe(409);
      expect(refused.json['error']).toMatch(new RegExp(`group ${group} has live members.*"force": true`));
      expect(await stored(group)).toBe(String(RECORDS));
      expect((await put({ offset: '3', force: true })).status).toBe(200);
      expect(await stored(group)).toBe('3');
    } finally {
      await stop();
    }
    expect((await put({ offset: '9', expected: '3' })).status).toBe(200);
    expect(await stored(group)).toBe('9');
  });

  /** A group the store believes running (a member it saw join) that the broker has never seen. */
  async function ghostGroup(): Promise<string> {
    const group = uniqueName('admin-fencing-ghost');
    await store.updateGroup(group, {
      kind: 'joined',
      generationId: 4,
      memberId: 'gone',
      groupInstanceId: null,
    });
    await store.updateGroup(group, { kind: 'synced', generationId: 4, memberId: 'gone' });
    return group;
  }

  test('members the store still knows but the broker does not: written after asking the broker', async () => {
    const group = await ghostGroup();
    const args = setArgs(dir, group, 't', 1);
    const unasked = await cli(args);
    expect(unasked.code).toBe(3);
    expect(unasked.stderr).toMatch(/give --bootstrap-server/);
    const asked = await cli([...args, '--bootstrap-server', brokerBootstrap]);
    expect(asked.code, asked.stderr).toBe(0);
    expect(await stored(group)).toBe('1');
    expect((await store.getGroup(group))?.members).toEqual([]);

    // The HTTP API asks through the proxy's own lookups.
    const other = await ghostGroup();
    const res = await fetch(`${base}/admin/groups/${other}/offsets/t/0`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ offset: '4' }),
    });
    expect(res.status).toBe(200);
    expect(await stored(other)).toBe('4');
  });
});
