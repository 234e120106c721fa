// The offset service end to end on the embedded store: unchanged clients commit and fetch through
// the proxy, the offsets live in the store, and the broker holds none for the group.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { fetchCommittedOffsets, kafkajsClient } from '../bed/clients/kafkajs.js';
import { commitStopResume } from '../bed/clients/scenarios.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';

describe('offsets on the embedded store, single broker', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-embedded-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(brokerBootstrap, store);
  });
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('kafkajs commits go to the store, not to the broker, and a new consumer resumes there', async () => {
    const report = await commitStopResume(kafkajsClient, { bootstrap: proxy.bootstrap });
    const stored = await store.fetch(report.group, null);
    expect(stored.length).toBeGreaterThan(0);
    const total = stored.reduce((sum, o) => sum + Number(o.offset), 0);
    expect(total).toBe(1010); // 1,000 records then 10 more, all consumed and committed
    const atBroker = await fetchCommittedOffsets({ bootstrap: brokerBootstrap }, report.group, report.topic);
    expect(atBroker.filter((c) => c.offset >= 0)).toEqual([]);
  });
});
