// Connection limits: a connection storm beyond --max-connections is refused at accept, and idle
// connections are closed after --idle-timeout-ms (never one with a request in flight).
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { ApiKey } from '../../protocol/messages/index.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import { startProxy } from '../harness/proxy.js';
import type { RunningProxy } from '../harness/proxy.js';
import { RawClient, metadataRequestBody } from '../harness/raw-client.js';

describe('connection limits', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  let proxy: RunningProxy;

  beforeAll(async () => {
    proxy = await startProxy(brokerBootstrap, { maxConnections: 3, idleTimeoutMs: 800 });
  });
  afterAll(async () => {
    await proxy?.stop();
  });

  const metadata = (c: RawClient, id: number) =>
    c.request<MetadataResponse>(ApiKey.Metadata, 9, id, metadataRequestBody());

  test('beyond max-connections new connections are closed; the first ones keep working', async () => {
    const clients = await Promise.all([1, 2, 3].map(() => RawClient.connect(proxy.bootstrap)));
    try {
      // Make sure all three are paired with the broker before the fourth arrives.
      await Promise.all(clients.map((c, i) => metadata(c, i + 1)));
      const extra = await RawClient.connect(proxy.bootstrap);
      expect(await extra.closesWithin(2000)).toBe(true);
      for (const [i, c] of clients.entries())
        expect((await metadata(c, 10 + i)).brokers.length).toBeGreaterThan(0);
    } finally {
      for (const c of clients) c.close();
    }
    // Room again once they are gone.
    await new Promise((r) => setTimeout(r, 200));
    const later = await RawClient.connect(proxy.bootstrap);
    try {
      expect((await metadata(later, 99)).brokers.length).toBeGreaterThan(0);
    } finally {
      later.close();
    }
  });

  test('an idle connection is closed after idle-timeout-ms, a busy one is not', async () => {
    const idle = await RawClient.connect(proxy.bootstrap);
    const busy = await RawClient.connect(proxy.bootstrap);
    try {
      await metadata(idle, 1);
      const started = Date.now();
      // The busy connection sends a request every 300 ms, less than the 800 ms timeout.
      let closedIdle = false;
      for (let i = 0; i < 8; i++) {
        await metadata(busy, 100 + i);
        await new Promise((r) => setTimeout(r, 300));
        closedIdle ||= idle.hasClosed;
      }
      expect(closedIdle || (await idle.closesWithin(1000))).toBe(true);
      expect(Date.now() - started).toBeGreaterThan(800);
      expect(busy.hasClosed).toBe(false);
    } finally {
      idle.close();
      busy.close();
    }
  });
});
