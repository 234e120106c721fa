import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { PartitionOffset } from '../../../backends/store.js';
import { ApiKey } from '../../../protocol/messages/index.js';
import type { ListOffsetsRequest } from '../../../protocol/messages/list-offsets-request.js';
import type { ListOffsetsResponse } from '../../../protocol/messages/list-offsets-response.js';
import type { MetadataResponse } from '../../../protocol/messages/metadata-response.js';
import { MemoryData, MemoryStore } from '../../../backends/memory-store.js';
import { silentLogger } from '../../common/log.js';
import { computeLag, currentOffsetSums, lagSums, partitionKey } from './compute-lag.js';
import { GroupFilter } from './group-filter.js';
import { LagCollector } from './lag-collector.js';
import { OlderTopicsHidden } from '../../offsets/older-topics-hidden.js';
import type { LogEndSource } from './log-end-offsets.js';
import { fetchLogEndOffsets } from './log-end-offsets.js';

const offset = (topic: string, partition: number, value: bigint, commitTimestamp = 0n): PartitionOffset => ({
  topic,
  partition,
  offset: value,
  leaderEpoch: -1,
  metadata: '',
  commitTimestamp,
  expireTimestamp: -1n,
});

describe('computeLag', () => {
  it('subtracts the committed offset from the log end, per partition, and sums per group', () => {
    const rows = computeLag(
      new Map([
        ['g1', [offset('t', 0, 10n), offset('t', 1, 5n)]],
        ['g2', [offset('t', 0, 12n), offset('gone', 0, 3n), offset('t', 1, -1n)]],
      ]),
      new Map([
        [partitionKey('t', 0), 12n],
        [partitionKey('t', 1), 9n],
      ]),
    );
    expect(rows.map((r) => [r.group, r.topic, r.partition, r.committed, r.logEnd, r.lag])).toEqual([
      ['g1', 't', 0, 10n, 12n, 2n],
      ['g1', 't', 1, 5n, 9n, 4n],
      ['g2', 't', 0, 12n, 12n, 0n],
      ['g2', 'gone', 0, 3n, undefined, undefined],
    ]);
    expect(lagSums(rows)).toEqual([
      { group: 'g1', topic: 't', sum: 6n },
      { group: 'g2', topic: 't', sum: 0n },
    ]);
  });

  it('gives the uncommitted partitions of a consumed topic -1, as the Kafka exporter does', () => {
    const rows = computeLag(
      new Map([
        ['g', [offset('t', 1, 5n), offset('u', 0, -1n)]],
        // NUL in a group name stays in the group: sums are kept per group and topic, not by a joined key.
        ['g\u0000t', [offset('t', 0, 2n)]],
      ]),
      new Map([[partitionKey('t', 1), 9n]]),
      new Map([
        ['t', [0, 1, 2]],
        ['u', [0]],
      ]),
    );
    expect(rows.map((r) => [r.group, r.topic, r.partition, r.committed, r.lag, r.uncommitted])).toEqual([
      ['g', 't', 1, 5n, 4n, false],
      ['g', 't', 0, -1n, -1n, true],
      ['g', 't', 2, -1n, -1n, true],
      // u: no committed offset at all, so not a consumed topic.
      ['g\u0000t', 't', 0, 2n, undefined, false],
      ['g\u0000t', 't', 1, -1n, -1n, true],
      ['g\u0000t', 't', 2, -1n, -1n, true],
    ]);
    expect(lagSums(rows)).toEqual([{ group: 'g', topic: 't', sum: 4n }]);
    expect(currentOffsetSums(rows)).toEqual([
      { group: 'g', topic: 't', sum: 3n },
      { group: 'g\u0000t', topic: 't', sum: 0n },
    ]);
  });

  it('reports a committed offset beyond the log end as negative lag, as kafka-consumer-groups does', () => {
    const [row] = computeLag(new Map([['g', [offset('t', 0, 20n)]]]), new Map([[partitionKey('t', 0), 15n]]));
    expect(row?.lag).toBe(-5n);
  });
});

describe('GroupFilter', () => {
  it('applies include, then exclude, then the maximum in name order', () => {
    const f = new GroupFilter({ include: ['app-*', 'billing'], exclude: ['app-test-*'], maxGroups: 2 });
    expect(f.select(['zeta', 'app-b', 'app-test-1', 'billing', 'app-a'])).toEqual({
      selected: ['app-a', 'app-b'],
      truncated: 1,
    });
    expect(new GroupFilter({ include: [], exclude: [], maxGroups: 10 }).select(['b', 'a'])).toEqual({
      selected: ['a', 'b'],
      truncated: 0,
    });
  });
});

/** A fake cluster: topic → partition → [leader, logEnd]; records the ListOffsets requests. */
function fakeCluster(layout: Record<string, Record<number, [leader: number, logEnd: bigint]>>) {
  const requests: { target: number | 'any'; body: ListOffsetsRequest }[] = [];
  const source: LogEndSource & { requests: typeof requests; down: boolean } = {
    requests,
    down: false,
    async metadata(topics) {
      if (source.down) throw new Error('no broker reachable');
      return {
        topics: (topics ?? []).map((name) => {
          const parts = layout[name];
          return {
            errorCode: parts ? 0 : 3,
            name,
            partitions: Object.entries(parts ?? {}).map(([p, [leader]]) => ({
              errorCode: 0,
              partitionIndex: Number(p),
              leaderId: leader,
            })),
          };
        }),
      } as unknown as MetadataResponse;
    },
    async request(target, apiKey, req) {
      expect(apiKey).toBe(ApiKey.ListOffsets);
      requests.push({ target, body: req });
      const response: ListOffsetsResponse = {
        throttleTimeMs: 0,
        topics: req.topics.map((t) => ({
          name: t.name,
          partitions: t.partitions.map((p) => ({
            partitionIndex: p.partitionIndex,
            errorCode: 0,
            oldStyleOffsets: [],
            timestamp: -1n,
            offset: layout[t.name]![p.partitionIndex]![1],
            leaderEpoch: 0,
          })),
        })),
      };
      return { version: 7, body: response };
    },
  };
  return source;
}

describe('fetchLogEndOffsets', () => {
  it('asks each leader once for its partitions, latest offset, as a consumer', async () => {
    const cluster = fakeCluster({ t: { 0: [1, 100n], 1: [2, 200n], 2: [1, 300n] }, u: { 0: [2, 7n] } });
    const result = await fetchLogEndOffsets(cluster, [
      { topic: 't', partition: 0 },
      { topic: 't', partition: 1 },
      { topic: 't', partition: 2 },
      { topic: 'u', partition: 0 },
      { topic: 'missing', partition: 0 },
    ]);
    expect(result.offsets).toEqual(
      new Map([
        [partitionKey('t', 0), 100n],
        [partitionKey('t', 2), 300n],
        [partitionKey('t', 1), 200n],
        [partitionKey('u', 0), 7n],
      ]),
    );
    expect(result.missing.map((m) => m.topic)).toEqual(['missing']);
    expect(cluster.requests.map((r) => r.target).sort()).toEqual([1, 2]);
    for (const { body } of cluster.requests) {
      expect(body.replicaId).toBe(-1);
      for (const t of body.topics) for (const p of t.partitions) expect(p.timestamp).toBe(-1n);
    }
    const toLeader1 = cluster.requests.find((r) => r.target === 1)!.body;
    expect(toLeader1.topics.map((t) => [t.name, t.partitions.map((p) => p.partitionIndex)])).toEqual([
      ['t', [0, 2]],
    ]);
  });
});

async function seriesOf(registry: Registry, name: string): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const out: Record<string, number> = {};
  for (const v of (await metric.get()).values) {
    out[Object.values(v.labels).join('/')] = v.value;
  }
  return out;
}

describe('LagCollector', () => {
  function setup() {
    const groups = new Map<string, PartitionOffset[]>([
      ['orders', [offset('t', 0, 90n, 1_000n), offset('t', 1, 200n, 4_000n)]],
      ['audit', [offset('t', 0, 100n, 2_000n)]],
      ['tmp-1', [offset('t', 0, 1n, 2_000n)]],
    ]);
    let storeDown = false;
    const store = {
      async listGroups() {
        if (storeDown) throw new Error('store down');
        return [...groups.keys()];
      },
      async fetch(group: string) {
        return groups.get(group) ?? [];
      },
    };
    const cluster = fakeCluster({ t: { 0: [1, 100n], 1: [1, 250n] } });
    const registry = new Registry();
    let now = 10_000;
    const collector = new LagCollector({
      store,
      cluster,
      registry,
      log: silentLogger,
      intervalMs: 60_000,
      include: [],
      exclude: ['tmp-*'],
      maxGroups: 100,
      now: () => now,
    });
    return {
      groups,
      registry,
      collector,
      cluster,
      setStoreDown: (v: boolean) => (storeDown = v),
      setNow: (t: number) => (now = t),
    };
  }

  it('exports current offset, lag, sums, log end and commit age under the Kafka exporter names', async () => {
    const { registry, collector } = setup();
    expect(await collector.refresh()).toBe(true);
    // audit has not committed t/1: -1 there, as the Kafka exporter shows it.
    expect(await seriesOf(registry, 'kafka_consumergroup_current_offset')).toEqual({
      'orders/t/0': 90,
      'orders/t/1': 200,
      'audit/t/0': 100,
      'audit/t/1': -1,
    });
    expect(await seriesOf(registry, 'kafka_consumergroup_lag')).toEqual({
      'orders/t/0': 10,
      'orders/t/1': 50,
      'audit/t/0': 0,
      'audit/t/1': -1,
    });
    expect(await seriesOf(registry, 'kafka_consumergroup_lag_sum')).toEqual({ 'orders/t': 60, 'audit/t': 0 });
    expect(await seriesOf(registry, 'kafka_consumergroup_current_offset_sum')).toEqual({
      'orders/t': 290,
      'audit/t': 99,
    });
    expect(await seriesOf(registry, 'kafka_topic_partition_current_offset')).toEqual({
      't/0': 100,
      't/1': 250,
    });
    expect(await seriesOf(registry, 'kop_consumergroup_last_commit_age_seconds')).toEqual({
      'orders/t/0': 9,
      'orders/t/1': 6,
      'audit/t/0': 8,
    });
  });

  it('reads the store as clients see it: a re-created topic’s older offsets are no offset', async () => {
    const { groups, registry, collector } = setup();
    const raw = new MemoryStore(new MemoryData());
    for (const [group, offsets] of groups) {
      const outcome = await raw.commit({ group, requestId: group, writes: offsets });
      expect(outcome.status).toBe('ok');
    }
    // t re-created at 3000: orders' t/0 (1000) and audit's t/0 (2000) were the older topic's.
    const hiddenBefore = (topics: readonly string[]) =>
      Promise.resolve(new Map(topics.includes('t') ? [['t', 3_000n]] : []));
    const seen = new Registry();
    const current = new LagCollector({
      store: new OlderTopicsHidden(raw, hiddenBefore),
      cluster: fakeCluster({ t: { 0: [1, 100n], 1: [1, 250n] } }),
      registry: seen,
      log: silentLogger,
      intervalMs: 60_000,
      include: [],
      exclude: ['tmp-*'],
      maxGroups: 100,
      now: () => 10_000,
    });
    expect(await current.refresh()).toBe(true);
    expect(await seriesOf(seen, 'kafka_consumergroup_current_offset')).toEqual({
      'orders/t/0': -1,
      'orders/t/1': 200,
    });
    expect(await seriesOf(seen, 'kop_consumergroup_last_commit_age_seconds')).toEqual({
      'orders/t/1': 6,
    });
    // The same rows without the decorator: the older offsets count (what lag showed before).
    expect(await collector.refresh()).toBe(true);
    expect((await seriesOf(registry, 'kafka_consumergroup_current_offset'))['orders/t/0']).toBe(90);
  });

  it('lets the commit age grow between refreshes', async () => {
    const { registry, collector, setNow } = setup();
    await collector.refresh();
    setNow(20_000);
    expect((await seriesOf(registry, 'kop_consumergroup_last_commit_age_seconds'))['audit/t/0']).toBe(18);
  });

  it('removes the series of groups and partitions that disappeared', async () => {
    const { registry, collector, groups } = setup();
    await collector.refresh();
    groups.delete('audit');
    groups.set('orders', [offset('t', 1, 240n, 4_000n)]);
    await collector.refresh();
    expect(await seriesOf(registry, 'kafka_consumergroup_lag')).toEqual({
      'orders/t/1': 10,
      'orders/t/0': -1,
    });
    expect(await seriesOf(registry, 'kafka_consumergroup_lag_sum')).toEqual({ 'orders/t': 10 });
    expect(Object.keys(await seriesOf(registry, 'kop_consumergroup_last_commit_age_seconds'))).toEqual([
      'orders/t/1',
    ]);
  });

  it('keeps the last series and counts an error when a refresh fails', async () => {
    const { registry, collector, setStoreDown, cluster } = setup();
    await collector.refresh();
    setStoreDown(true);
    expect(await collector.refresh()).toBe(false);
    expect(await seriesOf(registry, 'kafka_consumergroup_lag_sum')).toEqual({ 'orders/t': 60, 'audit/t': 0 });
    expect(await seriesOf(registry, 'kop_lag_refresh_errors_total')).toEqual({ '': 1 });
    setStoreDown(false);
    cluster.down = true;
    expect(await collector.refresh()).toBe(false);
    expect(await seriesOf(registry, 'kop_lag_refresh_errors_total')).toEqual({ '': 2 });
  });

  it('bounds the number of exported groups', async () => {
    const registry = new Registry();
    const bounded = new LagCollector({
      store: { listGroups: async () => ['c', 'a', 'b'], fetch: async () => [offset('t', 0, 1n)] },
      cluster: fakeCluster({ t: { 0: [1, 100n] } }),
      registry,
      log: silentLogger,
      intervalMs: 60_000,
      include: [],
      exclude: [],
      maxGroups: 2,
    });
    await bounded.refresh();
    expect(await seriesOf(registry, 'kafka_consumergroup_lag_sum')).toEqual({ 'a/t': 99, 'b/t': 99 });
    expect(await seriesOf(registry, 'kop_lag_groups_truncated')).toEqual({ '': 1 });
  });

  it('refreshes on its interval until stopped', async () => {
    const registry = new Registry();
    const collector = new LagCollector({
      store: { listGroups: async () => ['g'], fetch: async () => [offset('t', 0, 1n)] },
      cluster: fakeCluster({ t: { 0: [1, 100n] } }),
      registry,
      log: silentLogger,
      intervalMs: 10,
      include: [],
      exclude: [],
      maxGroups: 10,
    });
    const refreshes = async (): Promise<number> => {
      const values = (await registry.getSingleMetric('kop_lag_refresh_duration_seconds')!.get()).values;
      return values.find(
        (v) => (v as { metricName?: string }).metricName === 'kop_lag_refresh_duration_seconds_count',
      )!.value;
    };
    collector.start();
    await new Promise((r) => setTimeout(r, 150));
    await collector.stop();
    const atStop = await refreshes();
    expect(atStop).toBeGreaterThan(2);
    await new Promise((r) => setTimeout(r, 50));
    expect(await refreshes()).toBe(atStop);
  });

  it('exports the member counts the broker reports', async () => {
    const registry = new Registry();
    const asked: string[][] = [];
    const collector = new LagCollector({
      store: { listGroups: async () => ['a', 'b'], fetch: async () => [offset('t', 0, 1n)] },
      cluster: fakeCluster({ t: { 0: [1, 100n] } }),
      members: async (groups) => {
        asked.push(groups);
        return new Map([
          ['a', 3],
          ['b', 0],
        ]);
      },
      registry,
      log: silentLogger,
      intervalMs: 60_000,
      include: [],
      exclude: [],
      maxGroups: 10,
    });
    await collector.refresh();
    expect(asked).toEqual([['a', 'b']]);
    expect(await seriesOf(registry, 'kafka_consumergroup_members')).toEqual({ a: 3, b: 0 });
  });

  it('with a lease, exactly one of two proxies on a shared store exports; the other takes over', async () => {
    const data = new MemoryData();
    const make = (holder: string) => {
      const registry = new Registry();
      const collector = new LagCollector({
        store: { listGroups: async () => ['g'], fetch: async () => [offset('t', 0, 1n)] },
        cluster: fakeCluster({ t: { 0: [1, 100n] } }),
        lease: { store: new MemoryStore(data), holder, ttlMs: 200 },
        registry,
        log: silentLogger,
        intervalMs: 60_000,
        include: [],
        exclude: [],
        maxGroups: 10,
      });
      return { registry, collector };
    };
    const [a, b] = [make('a'), make('b')];
    await a.collector.refresh();
    await b.collector.refresh();
    expect(await seriesOf(a.registry, 'kafka_consumergroup_lag_sum')).toEqual({ 'g/t': 99 });
    expect(await seriesOf(b.registry, 'kafka_consumergroup_lag_sum')).toEqual({});
    expect(await seriesOf(a.registry, 'kop_lag_exporter')).toEqual({ '': 1 });
    expect(await seriesOf(b.registry, 'kop_lag_exporter')).toEqual({ '': 0 });
    // a stops: it releases the lease and b exports from its next refresh.
    await a.collector.stop();
    await b.collector.refresh();
    expect(await seriesOf(b.registry, 'kafka_consumergroup_lag_sum')).toEqual({ 'g/t': 99 });
    // b dies (no release): after the TTL, a new proxy c takes over.
    const c = make('c');
    await c.collector.refresh();
    expect(await seriesOf(c.registry, 'kop_lag_exporter')).toEqual({ '': 0 });
    await new Promise((r) => setTimeout(r, 300));
    await c.collector.refresh();
    expect(await seriesOf(c.registry, 'kop_lag_exporter')).toEqual({ '': 1 });
    expect(await seriesOf(c.registry, 'kafka_consumergroup_lag_sum')).toEqual({ 'g/t': 99 });
  });
});
