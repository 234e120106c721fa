// The admin HTTP API for offsets on the real CLI: read a group's offsets, set one with an expected
// value (compare-and-set), delete; behind the bearer token; the same semantics as the offsets CLI.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { freePort } from '../bed/ports.js';
import { createTopics, kafkajsClient } from '../bed/clients/kafkajs.js';
import { expectExactlyRecords, uniqueName } from '../bed/clients/scenarios.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';

const TOKEN = randomBytes(18).toString('hex');

describe('admin HTTP API for offsets', () => {
  const kafka = inject('kafkaBootstrap');
  const topic = uniqueName('admin-http');
  const group = `${topic}-g`;
  let proxy: ProxyProcess;
  let base: string;

  const call = async (method: string, path: string, body?: unknown, token: string | null = TOKEN) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : null };
  };

  beforeAll(async () => {
    await ensureBuilt();
    await createTopics({ bootstrap: kafka }, [{ topic, partitions: 2 }]);
    const httpPort = await freePort();
    base = `http://127.0.0.1:${httpPort}`;
    proxy = await spawnProxy([
      '--bootstrap-server',
      kafka,
      '--http',
      `127.0.0.1:${httpPort}`,
      '--http-token',
      TOKEN,
    ]);
  });
  afterAll(async () => {
    await proxy?.stop();
  });

  test('read, compare-and-set, delete; the group resumes from what the operator set', async () => {
    await kafkajsClient.produce({ bootstrap: proxy.bootstrap }, { topic, count: 100 });
    const first = await kafkajsClient.consume({ bootstrap: proxy.bootstrap }, { topic, group, max: 40 });
    expect((await call('GET', `/admin/groups/${group}/offsets`, undefined, null)).status).toBe(401);

    const listed = await call('GET', '/admin/groups');
    expect(listed.json!['groups']).toContain(group);
    const read = await call('GET', `/admin/groups/${group}/offsets`);
    expect(read.status).toBe(200);
    const offsets = read.json!['offsets'] as { topic: string; partition: number; offset: string }[];
    expect(offsets.map((o) => [o.partition, Number(o.offset)])).toEqual(
      first.committed.map((c) => [c.partition, c.offset]),
    );

    // Compare-and-set with a stale expectation: 409, nothing changes.
    // The first batch may have come from one partition only: take whichever has a commit.
    const p0 = offsets[0]!;
    const stale = await call('PUT', `/admin/groups/${group}/offsets/${topic}/${p0.partition}`, {
      offset: '0',
      expected: String(Number(p0.offset) + 1),
    });
    expect(stale.status).toBe(409);
    expect(
      ((await call('GET', `/admin/groups/${group}/offsets`)).json!['offsets'] as typeof offsets)[0]!.offset,
    ).toBe(p0.offset);
    // With the right expectation: every committed partition back to 0.
    for (const o of offsets) {
      const ok = await call('PUT', `/admin/groups/${group}/offsets/${topic}/${o.partition}`, {
        offset: '0',
        expected: o.offset,
      });
      expect(ok.status).toBe(200);
    }
    const again = await kafkajsClient.consume({ bootstrap: proxy.bootstrap }, { topic, group, max: 100 });
    expectExactlyRecords(again.records, 0, 100);

    expect((await call('DELETE', `/admin/groups/${group}/offsets/${topic}/0`)).status).toBe(204);
    const remaining = (await call('GET', `/admin/groups/${group}/offsets`)).json![
      'offsets'
    ] as typeof offsets;
    expect(remaining.map((o) => o.partition)).toEqual([1]);
    expect((await call('DELETE', `/admin/groups/${group}`)).status).toBe(204);
    expect((await call('GET', `/admin/groups/${group}/offsets`)).json!['offsets']).toEqual([]);
  });

  test('bad input is refused with 400 and a message naming it', async () => {
    const bad = await call('PUT', `/admin/groups/g/offsets/t/0`, { offset: 'abc' });
    expect(bad.status).toBe(400);
    expect(String(bad.json!['error'])).toMatch(/offset/);
    expect((await call('PUT', `/admin/groups/g/offsets/t/-1`, { offset: '1' })).status).toBe(400);
    expect((await call('PUT', `/admin/groups/g/offsets/t/0`, { offset: '1', expected: '-2' })).status).toBe(
      400,
    );
  });
});
