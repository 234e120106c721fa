// The admin HTTP API on a group with live members: 409 with a JSON error, "force" to override.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemoryStore } from '../../../backends/memory-store.js';
import { OpsHttpServer } from '../http/http-server.js';
import type { AdminRoutesOptions } from './http-routes.js';
import { registerOffsetsAdminRoutes } from './http-routes.js';
import { getOffsets, setOffset } from './offsets-admin.js';

const TOKEN = 'routes-test-9b3e71c4d2a8';
const auth = { authorization: `Bearer ${TOKEN}` };

const servers: OpsHttpServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A store where group `g` has t-0 at 10 and a live member, behind the routes. */
async function start(options: AdminRoutesOptions = {}) {
  const store = new MemoryStore();
  await setOffset(store, { group: 'g', topic: 't', partition: 0, offset: 10n });
  await store.updateGroup('g', { kind: 'joined', generationId: 1, memberId: 'm', groupInstanceId: null });
  const server = new OpsHttpServer({ token: TOKEN });
  servers.push(server);
  registerOffsetsAdminRoutes(server, store, options);
  const { port } = await server.listen({ host: '127.0.0.1', port: 0 });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      ...(body !== undefined
        ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...auth } }
        : { headers: auth }),
    });
    const text = await res.text();
    return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : null };
  };
  const stored = async () => (await getOffsets(store, 'g')).map((l) => l.offset);
  return { store, call, stored };
}

describe('admin HTTP routes and live members', () => {
  it('PUT answers 409 naming the group while it runs; "force": true writes', async () => {
    const { call, stored } = await start();
    const refused = await call('PUT', '/admin/groups/g/offsets/t/0', { offset: '0' });
    expect(refused.status).toBe(409);
    expect(refused.json!['error']).toMatch(/group g has live members.*"force": true/);
    expect(await stored()).toEqual(['10']);

    const forced = await call('PUT', '/admin/groups/g/offsets/t/0', { offset: '0', force: true });
    expect(forced.status).toBe(200);
    expect((forced.json!['offsets'] as { offset: string }[]).map((o) => o.offset)).toEqual(['0']);
    // Forced with a stale expectation: the compare-and-set still refuses.
    const stale = await call('PUT', '/admin/groups/g/offsets/t/0', {
      offset: '5',
      expected: '10',
      force: true,
    });
    expect(stale.status).toBe(409);
    expect(stale.json!['error']).toMatch(/expected offset 10, but it is 0/);
    expect((await call('PUT', '/admin/groups/g/offsets/t/0', { offset: '1', force: 'yes' })).status).toBe(
      400,
    );
  });

  it('asks the broker before refusing', async () => {
    const groupIsEmptyAtBroker = vi.fn(async () => true);
    const { call, stored, store } = await start({ groupIsEmptyAtBroker });
    expect((await call('PUT', '/admin/groups/g/offsets/t/0', { offset: '3' })).status).toBe(200);
    expect(groupIsEmptyAtBroker).toHaveBeenCalledExactlyOnceWith('g');
    expect(await stored()).toEqual(['3']);
    expect((await store.getGroup('g'))?.members).toEqual([]);
  });

  it('DELETE answers 409 while the group runs; ?force=true deletes', async () => {
    const { call, stored } = await start({ groupIsEmptyAtBroker: async () => false });
    expect((await call('DELETE', '/admin/groups/g/offsets/t/0')).status).toBe(409);
    expect((await call('DELETE', '/admin/groups/g')).status).toBe(409);
    expect(await stored()).toEqual(['10']);
    expect((await call('DELETE', '/admin/groups/g?force=maybe')).status).toBe(400);
    expect((await call('DELETE', '/admin/groups/g/offsets/t/0?force=true')).status).toBe(204);
    expect(await stored()).toEqual([]);
    expect((await call('DELETE', '/admin/groups/g?force=true')).status).toBe(204);
    expect((await call('GET', '/admin/groups')).json).toEqual({ groups: [] });
  });
});
