// The authorizer's verdicts belong to a client connection (one principal each): when the
// connection closes they go with it, so clients that reconnect often do not fill the cache
// (found by the long fuzz run: the heap left after full GCs crept up with every connection).
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';
import { RawClient } from '../harness/raw-client.js';
import { commitOnce, fetchOnce, sleep } from '../reliability/commit-checker.js';

describe('authorization verdicts per connection', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  let store: OffsetStore;
  let proxy: OffsetProxy;
  const topic = uniqueName('authz-cache');

  beforeAll(async () => {
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
    store = await openStore('memory://');
    proxy = await startOffsetProxy(brokerBootstrap, store);
  });
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
  });

  test('are cached while the connection is open and dropped when it closes', async () => {
    const verdicts = () => proxy.offsets.service.cachedVerdicts;
    expect(verdicts()).toBe(0);
    const kept = await RawClient.connect(proxy.bootstrap);
    const group = uniqueName('authz-g');
    expect(await commitOnce(kept, group, topic, 2, 5n)).toEqual([0, 0]);
    const afterOne = verdicts();
    // The group's READ verdict and the topic's.
    expect(afterOne).toBeGreaterThanOrEqual(2);
    for (let i = 0; i < 20; i++) {
      const c = await RawClient.connect(proxy.bootstrap);
      expect(await commitOnce(c, uniqueName('authz-g'), topic, 2, 1n)).toEqual([0, 0]);
      expect((await fetchOnce(c, group, topic, 2)).errorCode).toBe(0);
      c.close();
    }
    const deadline = Date.now() + 5_000;
    while (verdicts() !== afterOne && Date.now() < deadline) await sleep(20);
    // Only the connection still open keeps its verdicts; a second commit on it probes nothing.
    expect(verdicts()).toBe(afterOne);
    expect(await commitOnce(kept, group, topic, 2, 6n)).toEqual([0, 0]);
    expect(verdicts()).toBe(afterOne);
    kept.close();
    while (verdicts() !== 0 && Date.now() < deadline + 5_000) await sleep(20);
    expect(verdicts()).toBe(0);
  });
});
