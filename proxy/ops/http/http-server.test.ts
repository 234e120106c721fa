import { Registry, Counter } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { HttpError, OpsHttpServer } from './http-server.js';
import type { DeniedRequest } from './http-server.js';
import { registerOpsRoutes } from './ops-routes.js';
import type { ReadinessChecks } from './ops-routes.js';

const TOKEN = 'server-test-5c0e8a91f2d4';
const auth = { Authorization: `Bearer ${TOKEN}` };

const servers: OpsHttpServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(
  token: string | undefined,
  readiness: ReadinessChecks = { store: async () => {}, broker: async () => {} },
  onDenied?: (d: DeniedRequest) => void,
): Promise<{ server: OpsHttpServer; url: string; registry: Registry }> {
  const server = new OpsHttpServer({ token, ...(onDenied ? { onDenied } : {}) });
  servers.push(server);
  const registry = new Registry();
  new Counter({ name: 'kop_test_total', help: 'test', registers: [registry] }).inc(3);
  registerOpsRoutes(server, { registry, readiness, checkTimeoutMs: 200 });
  const bound = await server.listen({ host: '127.0.0.1', port: 0 });
  return { server, url: `http://127.0.0.1:${bound.port}`, registry };
}

describe('OpsHttpServer', () => {
  it('serves /metrics in the Prometheus text format', async () => {
    const { url } = await start(undefined);
    const res = await fetch(`${url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(await res.text()).toContain('kop_test_total 3');
  });

  it('requires the bearer token for /metrics and registered routes, but not for the probes', async () => {
    const { server, url } = await start('s3cret');
    server.addRoute('GET', '/admin/ping', () => ({ status: 200, json: { pong: true } }));
    expect((await fetch(`${url}/metrics`)).status).toBe(401);
    expect((await fetch(`${url}/metrics`, { headers: { Authorization: 'Bearer wrong!' } })).status).toBe(401);
    expect((await fetch(`${url}/metrics`, { headers: { Authorization: 'Basic czNjcmV0' } })).status).toBe(
      401,
    );
    const ok = await fetch(`${url}/metrics`, { headers: { Authorization: 'Bearer s3cret' } });
    expect(ok.status).toBe(200);
    expect((await fetch(`${url}/admin/ping`)).status).toBe(401);
    const admin = await fetch(`${url}/admin/ping`, { headers: { Authorization: 'bearer s3cret' } });
    expect(await admin.json()).toEqual({ pong: true });
    const unauthorized = await fetch(`${url}/admin/ping`);
    expect(unauthorized.headers.get('www-authenticate')).toContain('Bearer');
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
  });

  it('answers /readyz 503 naming the failing check, and 200 when all pass', async () => {
    let storeUp = false;
    const { url } = await start(undefined, {
      store: async () => {
        if (!storeUp) throw new Error('redis: connection refused');
      },
      broker: () => new Promise(() => {}),
    });
    const down = await fetch(`${url}/readyz`);
    expect(down.status).toBe(503);
    const body = (await down.json()) as {
      status: string;
      checks: Record<string, { ok: boolean; error?: string }>;
    };
    expect(body.status).toBe('not ready');
    expect(body.checks['store']).toMatchObject({ ok: false, error: 'redis: connection refused' });
    expect(body.checks['broker']).toMatchObject({ ok: false, error: 'no answer within 200 ms' });

    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'ok' });

    storeUp = true;
    const { url: url2 } = await start(undefined, { store: async () => {}, broker: async () => {} });
    const up = await fetch(`${url2}/readyz`);
    expect(up.status).toBe(200);
    expect(await up.json()).toMatchObject({
      status: 'ready',
      checks: { store: { ok: true }, broker: { ok: true } },
    });
  });

  it('routes by method and path with :params, JSON bodies and HttpError statuses', async () => {
    const { server, url } = await start(TOKEN);
    server.addRoute('POST', '/admin/groups/:group/offsets', async (req) => {
      const body = (await req.json()) as { offset?: number } | undefined;
      if (body?.offset === undefined) throw new HttpError(400, 'offset missing');
      return {
        status: 200,
        json: { group: req.params['group'], offset: BigInt(body.offset) + 1n, dry: req.query.get('dry') },
      };
    });
    server.addRoute('GET', '/admin/boom', () => {
      throw new Error('secret detail');
    });
    expect(() => server.addRoute('POST', '/admin/groups/:group/offsets', () => ({ status: 200 }))).toThrow(
      'already registered',
    );

    const res = await fetch(`${url}/admin/groups/my%2Fgroup/offsets?dry=1`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ offset: 41 }),
    });
    expect(await res.json()).toEqual({ group: 'my/group', offset: 42, dry: '1' });
    const bad = await fetch(`${url}/admin/groups/g/offsets`, { method: 'POST', headers: auth, body: '{}' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'offset missing' });
    const notJson = await fetch(`${url}/admin/groups/g/offsets`, {
      method: 'POST',
      headers: auth,
      body: '{nope',
    });
    expect(notJson.status).toBe(400);
    expect((await fetch(`${url}/admin/groups/g/offsets`, { headers: auth })).status).toBe(405);
    expect((await fetch(`${url}/nothing`, { headers: auth })).status).toBe(404);
    const boom = await fetch(`${url}/admin/boom`, { headers: auth });
    expect(boom.status).toBe(500);
    expect(await boom.text()).not.toContain('secret detail');
  });

  it('without a token: writes are refused with 403 before their handler runs, reads and probes are served', async () => {
    const denied: DeniedRequest[] = [];
    const { server, url } = await start(undefined, undefined, (d) => denied.push(d));
    let writes = 0;
    for (const method of ['PUT', 'POST', 'DELETE', 'PATCH'] as const) {
      server.addRoute(method, '/admin/groups/:group', () => ({ status: 200, json: { written: ++writes } }), {
        name: 'change',
      });
    }
    server.addRoute('GET', '/admin/groups/:group', () => ({ status: 200, json: { read: true } }));
    for (const method of ['PUT', 'POST', 'DELETE', 'PATCH']) {
      // A token the proxy does not have changes nothing either.
      const res = await fetch(`${url}/admin/groups/g`, { method, headers: auth, body: '{}' });
      expect(res.status, method).toBe(403);
      expect(((await res.json()) as { error: string }).error).toMatch(/no --http-token/);
    }
    expect(writes).toBe(0);
    expect(denied.map((d) => [d.route, d.method, d.params['group'], d.status])).toEqual([
      ['change', 'PUT', 'g', 403],
      ['change', 'POST', 'g', 403],
      ['change', 'DELETE', 'g', 403],
      ['change', 'PATCH', 'g', 403],
    ]);
    expect(denied[0]!.remote).toMatch(/^127\.0\.0\.1:\d+$/);
    expect((await fetch(`${url}/admin/groups/g`)).status).toBe(200);
    expect((await fetch(`${url}/metrics`)).status).toBe(200);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
  });

  it('with a token: a write with it reaches its handler, which learns the caller and the token name', async () => {
    const denied: DeniedRequest[] = [];
    const { server, url } = await start(TOKEN, undefined, (d) => denied.push(d));
    server.addRoute(
      'PUT',
      '/admin/x',
      (req) => ({ status: 200, json: { remote: req.remote, who: req.credential } }),
      {
        name: 'x',
      },
    );
    expect((await fetch(`${url}/admin/x`, { method: 'PUT' })).status).toBe(401);
    expect(
      (await fetch(`${url}/admin/x`, { method: 'PUT', headers: { Authorization: 'Bearer nope' } })).status,
    ).toBe(401);
    expect(denied.map((d) => d.status)).toEqual([401, 401]);
    const ok = await fetch(`${url}/admin/x`, { method: 'PUT', headers: auth });
    expect(ok.status).toBe(200);
    const body = (await ok.json()) as { remote: string; who: string };
    expect(body.who).toBe('http-token');
    expect(body.remote).toMatch(/^127\.0\.0\.1:\d+$/);
  });
});
