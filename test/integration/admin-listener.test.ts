// --admin-http: the offsets admin API on its own address. On the built CLI against a real broker,
// a proxy with --http, --admin-http and a token serves /admin only on the admin address (404 on
// --http, so exposing the probes and /metrics never exposes the writes) and the probes and
// /metrics only on --http; the admin address keeps the token rules (401 without it), its changes
// are audited and counted in the one /metrics. A second proxy whose admin address is taken exits 2
// naming admin-http.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { freePort } from '../bed/ports.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { httpCall } from '../harness/http-call.js';

const TOKEN = randomBytes(24).toString('hex');
const brokerBootstrap = inject('kafkaBootstrap');

describe('--admin-http: the admin API on its own address', () => {
  let proxy: ProxyProcess | undefined;
  let httpPort: number;
  let adminPort: number;
  beforeAll(async () => {
    await ensureBuilt();
    [httpPort, adminPort] = [await freePort(), await freePort()];
    proxy = await spawnProxy([
      '--bootstrap-server',
      brokerBootstrap,
      '--store',
      'memory://',
      '--http',
      `127.0.0.1:${httpPort}`,
      '--admin-http',
      `127.0.0.1:${adminPort}`,
      '--http-token',
      TOKEN,
      '--log-format',
      'json',
    ]);
  }, 240_000);
  afterAll(async () => {
    await proxy?.stop();
  });

  test('admin routes only on --admin-http, probes and /metrics only on --http', async () => {
    const topic = uniqueName('admin-listener');
    const group = `${topic}-g`;
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const put = `/admin/groups/${group}/offsets/${topic}/0`;
    const read = `/admin/groups/${group}/offsets`;

    // --http: no admin route at all, with the token or without.
    expect((await httpCall(httpPort, 'PUT', put, { body: { offset: '5' }, token: TOKEN })).status).toBe(404);
    expect((await httpCall(httpPort, 'DELETE', `/admin/groups/${group}`, { token: TOKEN })).status).toBe(404);
    expect((await httpCall(httpPort, 'GET', read, { token: TOKEN })).status).toBe(404);
    expect((await httpCall(httpPort, 'GET', '/healthz')).status).toBe(200);
    expect((await httpCall(httpPort, 'GET', '/readyz')).status).toBe(200);

    // --admin-http: the token rules of the admin API, and nothing else.
    expect((await httpCall(adminPort, 'PUT', put, { body: { offset: '5' } })).status).toBe(401);
    const ok = await httpCall(adminPort, 'PUT', put, { body: { offset: '5' }, token: TOKEN });
    expect(ok.status, ok.text).toBe(200);
    const back = await httpCall(adminPort, 'GET', read, { token: TOKEN });
    expect(JSON.parse(back.text).offsets.map((o: { offset: string }) => o.offset)).toEqual(['5']);
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      expect((await httpCall(adminPort, 'GET', path, { token: TOKEN })).status, path).toBe(404);
    }

    // One registry: the admin address's change and refusal are counted on --http's /metrics.
    const metrics = await httpCall(httpPort, 'GET', '/metrics', { token: TOKEN });
    expect(metrics.status).toBe(200);
    expect(metrics.text).toMatch(/^kop_admin_changes_total\{route="set",result="ok"\} 1$/m);
    expect(metrics.text).toMatch(/^kop_admin_changes_total\{route="set",result="unauthorized"\} 1$/m);
    const audit = proxy!
      .output()
      .split('\n')
      .filter((l) => l.includes('"event":"admin change"') && l.includes(group))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(audit.map((l) => [l['route'], l['result']])).toEqual([
      ['set', 'unauthorized'],
      ['set', 'ok'],
    ]);
    expect(proxy!.output()).toMatch(/"event":"http listening".*"adminWrites":"on admin-http only"/);
    expect(proxy!.output()).toMatch(
      new RegExp(`"event":"admin http listening".*"port":${adminPort}.*"adminWrites":"token required"`),
    );
  });

  test('an admin address that cannot be bound ends the start with exit 2 naming admin-http', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const other = await spawnProxy([
        '--bootstrap-server',
        brokerBootstrap,
        '--store',
        'memory://',
        '--http',
        `127.0.0.1:${await freePort()}`,
        '--admin-http',
        `127.0.0.1:${port}`,
      ]).catch((e: unknown) => String(e));
      // It exits before or after its Kafka listener logged "listening" (that one opens first).
      let output: string;
      if (typeof other === 'string') output = other;
      else {
        if (other.child.exitCode === null) await new Promise((r) => other.child.once('exit', r));
        output = `proxy exited with ${other.child.exitCode}:\n${other.output()}`;
      }
      expect(output).toMatch(/proxy exited with 2/);
      expect(output).toMatch(/admin-http.*cannot be bound/);
    } finally {
      taken.close();
    }
  });
});
