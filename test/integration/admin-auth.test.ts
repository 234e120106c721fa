// No offset changes without authentication, on the built CLI against a real broker: a proxy
// started with --http and no token refuses every admin write (403, the store unchanged) while its
// probes, /metrics and reads answer; a proxy with a token refuses writes without it (401) and takes
// them with it. Each attempt and each change leaves one audit line in the proxy's log and a count in
// kop_admin_changes_total. The offsets CLI's changes (another process) are counted in the store they
// share, and every proxy on it exports them as kop_admin_cli_changes_total.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { freePort } from '../bed/ports.js';
import { createTopics, kafkajsClient } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { httpCall } from '../harness/http-call.js';
import type { HttpAnswer } from '../harness/http-call.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import { until } from '../reliability/fault-helpers.js';
import type { ProxyProcess } from '../harness/proxy.js';

const TOKEN = randomBytes(24).toString('hex');

interface Started {
  proxy: ProxyProcess;
  call(method: string, path: string, opts?: { body?: unknown; token?: string }): Promise<HttpAnswer>;
}

async function start(args: string[], store = 'memory://'): Promise<Started> {
  const httpPort = await freePort();
  const proxy = await spawnProxy([
    '--bootstrap-server',
    inject('kafkaBootstrap'),
    '--store',
    store,
    '--http',
    `127.0.0.1:${httpPort}`,
    '--log-format',
    'json',
    ...args,
  ]);
  const call = (method: string, path: string, opts: { body?: unknown; token?: string } = {}) =>
    httpCall(httpPort, method, path, opts);
  return { proxy, call };
}

/** The proxy's audit lines (JSON log lines with event "admin change"). */
function auditLines(proxy: ProxyProcess): Record<string, unknown>[] {
  return proxy
    .output()
    .split('\n')
    .filter((l) => l.includes('"event":"admin change"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The value of kop_admin_changes_total{route, result} in a /metrics text (0 when absent). */
function changes(metrics: string, route: string, result: string): number {
  const m = new RegExp(`^kop_admin_changes_total\\{route="${route}",result="${result}"\\} (\\d+)$`, 'm').exec(
    metrics,
  );
  return m ? Number(m[1]) : 0;
}

/** The value of kop_admin_cli_changes_total{route, result} in a /metrics text (0 when absent). */
function cliChanges(metrics: string, route: string, result: string): number {
  const m = new RegExp(
    `^kop_admin_cli_changes_total\\{route="${route}",result="${result}"\\} (\\d+)$`,
    'm',
  ).exec(metrics);
  return m ? Number(m[1]) : 0;
}

/** Runs the built `offsets` CLI; resolves with its exit code and stderr. */
async function offsetsCli(args: string[]): Promise<{ code: number; stderr: string }> {
  const bin = path.resolve('bin/kafka-offset-proxy.js');
  try {
    const { stderr } = await promisify(execFile)(process.execPath, [bin, 'offsets', ...args], {
      timeout: 60_000,
    });
    return { code: 0, stderr };
  } catch (err) {
    const e = err as { code?: number; stderr?: string };
    return { code: e.code ?? -1, stderr: e.stderr ?? String(err) };
  }
}

/** A group with committed offsets on a fresh topic, committed by kafkajs through the proxy. */
async function committedGroup(s: Started, prefix: string) {
  const topic = uniqueName(prefix);
  const group = `${topic}-g`;
  await createTopics({ bootstrap: inject('kafkaBootstrap') }, [{ topic, partitions: 1 }]);
  await kafkajsClient.produce({ bootstrap: s.proxy.bootstrap }, { topic, count: 30 });
  await kafkajsClient.consume({ bootstrap: s.proxy.bootstrap }, { topic, group, max: 30 });
  const read = await s.call('GET', `/admin/groups/${group}/offsets`, { token: TOKEN });
  expect(read.status, read.text).toBe(200);
  const offsets = JSON.parse(read.text).offsets as { partition: number; offset: string }[];
  expect(offsets.map((o) => [o.partition, o.offset])).toEqual([[0, '30']]);
  return { topic, group, offsets: read.text };
}

describe('admin API authentication', () => {
  beforeAll(async () => {
    await ensureBuilt();
  }, 180_000);

  describe('a proxy with --http and no token', () => {
    let s: Started;
    beforeAll(async () => {
      s = await start([]);
    });
    afterAll(async () => {
      await s?.proxy.stop();
    });

    test('refuses every write with 403 and changes nothing; probes, metrics and reads answer', async () => {
      const { topic, group, offsets } = await committedGroup(s, 'admin-auth-open');
      const writes: [string, string, unknown?][] = [
        ['PUT', `/admin/groups/${group}/offsets/${topic}/0`, { offset: '0', force: true }],
        ['DELETE', `/admin/groups/${group}/offsets/${topic}/0?force=true`],
        ['DELETE', `/admin/groups/${group}?force=true`],
      ];
      for (const [method, path, body] of writes) {
        // With a made-up token too: no token is configured, so none opens writes.
        for (const token of [undefined, TOKEN]) {
          const r = await s.call(method, path, { body, ...(token ? { token } : {}) });
          expect(r.status, `${method} ${path}`).toBe(403);
          expect(JSON.parse(r.text).error).toMatch(
            /admin writes are disabled: this proxy has no --http-token/,
          );
        }
      }
      expect((await s.call('GET', `/admin/groups/${group}/offsets`)).text).toBe(offsets);
      expect((await s.call('GET', '/healthz')).status).toBe(200);
      expect((await s.call('GET', '/readyz')).status).toBe(200);
      const metrics = await s.call('GET', '/metrics');
      expect(metrics.status).toBe(200);
      expect(changes(metrics.text, 'set', 'forbidden')).toBe(2);
      expect(changes(metrics.text, 'delete', 'forbidden')).toBe(2);
      expect(changes(metrics.text, 'delete_group', 'forbidden')).toBe(2);
      expect(changes(metrics.text, 'set', 'ok')).toBe(0);

      const refused = auditLines(s.proxy).filter((l) => l['group'] === group);
      expect(refused).toHaveLength(6);
      for (const line of refused) {
        expect(line).toMatchObject({ level: 'warn', result: 'forbidden', who: 'anonymous', new: null });
        expect(line['remote']).toMatch(/^127\.0\.0\.1:\d+$/);
      }
      expect(s.proxy.output()).toMatch(
        /"event":"http listening".*"adminWrites":"disabled \(no --http-token\)"/,
      );
    });
  });

  describe('a proxy with a token', () => {
    let s: Started;
    beforeAll(async () => {
      s = await start(['--http-token', TOKEN]);
    });
    afterAll(async () => {
      await s?.proxy.stop();
    });

    test('refuses writes without the token (401), takes them with it, and audits both', async () => {
      const { topic, group, offsets } = await committedGroup(s, 'admin-auth-token');
      const put = `/admin/groups/${group}/offsets/${topic}/0`;
      expect((await s.call('PUT', put, { body: { offset: '7' } })).status).toBe(401);
      expect((await s.call('PUT', put, { body: { offset: '7' }, token: `${TOKEN}x` })).status).toBe(401);
      expect((await s.call('DELETE', `/admin/groups/${group}`)).status).toBe(401);
      expect((await s.call('GET', `/admin/groups/${group}/offsets`)).status).toBe(401);
      expect((await s.call('GET', '/metrics')).status).toBe(401);
      expect((await s.call('GET', `/admin/groups/${group}/offsets`, { token: TOKEN })).text).toBe(offsets);

      const ok = await s.call('PUT', put, { body: { offset: '7' }, token: TOKEN });
      expect(ok.status, ok.text).toBe(200);
      expect(JSON.parse(ok.text).offsets.map((o: { offset: string }) => o.offset)).toEqual(['7']);
      const deleted = await s.call('DELETE', `${put}`, { token: TOKEN });
      expect(deleted.status, deleted.text).toBe(204);
      const after = await s.call('GET', `/admin/groups/${group}/offsets`, { token: TOKEN });
      expect(JSON.parse(after.text).offsets).toEqual([]);

      const lines = auditLines(s.proxy).filter((l) => l['group'] === group);
      expect(lines.map((l) => [l['route'], l['result'], l['who']])).toEqual([
        ['set', 'unauthorized', 'anonymous'],
        ['set', 'unauthorized', 'anonymous'],
        ['delete_group', 'unauthorized', 'anonymous'],
        ['set', 'ok', 'http-token'],
        ['delete', 'ok', 'http-token'],
      ]);
      expect(lines[3]).toMatchObject({
        level: 'info',
        topic,
        partition: 0,
        old: '30',
        new: '7',
        force: false,
        dryRun: false,
      });
      expect(lines[3]!['remote']).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(lines[4]).toMatchObject({ old: '7', new: null });
      // The token never reaches the log.
      expect(s.proxy.output()).not.toContain(TOKEN);

      const metrics = (await s.call('GET', '/metrics', { token: TOKEN })).text;
      expect(changes(metrics, 'set', 'unauthorized')).toBe(2);
      expect(changes(metrics, 'delete_group', 'unauthorized')).toBe(1);
      expect(changes(metrics, 'set', 'ok')).toBe(1);
      expect(changes(metrics, 'delete', 'ok')).toBe(1);
    });
  });

  describe('a proxy on the store the offsets CLI changes', () => {
    // A key prefix of its own: the counts are the store's, shared by everything on it.
    const store = `${inject('redisUrl')}?prefix=${uniqueName('kop-audit')}`;
    let s: Started;
    beforeAll(async () => {
      s = await start(['--http-token', TOKEN], store);
    });
    afterAll(async () => {
      await s?.proxy.stop();
    });

    test("exports the CLI's changes, counted in the store, as kop_admin_cli_changes_total", async () => {
      const set = ['--store', store, '--group', 'g', '--topic', 't', '--partition', '0'];
      const scrape = async () => (await s.call('GET', '/metrics', { token: TOKEN })).text;
      await until(() => s.proxy.output().includes('"http listening"'), 'the HTTP API', 30_000);
      expect(cliChanges(await scrape(), 'set', 'ok')).toBe(0);

      expect(await offsetsCli(['set', ...set, '--offset', '5'])).toMatchObject({ code: 0 });
      expect(await offsetsCli(['set', ...set, '--offset', '6'])).toMatchObject({ code: 0 });
      expect(await offsetsCli(['set', ...set, '--offset', '1', '--dry-run'])).toMatchObject({ code: 0 });
      const bad = await offsetsCli(['set', ...set, '--offset', '9', '--expected', '1']);
      expect(bad.code, bad.stderr).toBe(3);
      expect(await offsetsCli(['delete', '--store', store, '--group', 'g'])).toMatchObject({ code: 0 });

      const metrics = await scrape();
      expect(cliChanges(metrics, 'set', 'ok')).toBe(2);
      // A dry run changes nothing: audited in the CLI's output, not counted.
      expect(cliChanges(metrics, 'set', 'dry_run')).toBe(0);
      expect(cliChanges(metrics, 'set', 'refused')).toBe(1);
      expect(cliChanges(metrics, 'delete_group', 'ok')).toBe(1);
      // Not the HTTP API's: those stay where they were.
      expect(changes(metrics, 'set', 'ok')).toBe(0);
      expect(metrics).toMatch(/^# TYPE kop_admin_cli_changes_total counter$/m);
    });
  });
});
