import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../../backends/memory-store.js';
import type { OffsetStore } from '../../../backends/store.js';
import { ApiKey } from '../../../protocol/messages/index.js';
import { createProxyMetrics, EVENT_LOOP_DELAY_RESOLUTION_MS } from './proxy-metrics.js';

/** The value of one sample in the registry, or undefined when the series does not exist. */
async function sample(
  metrics: ReturnType<typeof createProxyMetrics>,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const all = await metrics.registry.getMetricsAsJSON();
  for (const m of all) {
    for (const v of m.values as {
      metricName?: string;
      labels: Record<string, string | number>;
      value: number;
    }[]) {
      const metricName = v.metricName ?? m.name;
      if (metricName !== name) continue;
      if (Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want)) return v.value;
    }
  }
  return undefined;
}

describe('observer metrics', () => {
  it('counts responses by API name, version and who answered, and observes latency', async () => {
    const m = createProxyMetrics({ processMetrics: false });
    m.observer.responded(ApiKey.OffsetCommit, 8, 'proxy', 0.002);
    m.observer.responded(ApiKey.OffsetCommit, 8, 'proxy', 0.004);
    m.observer.responded(ApiKey.OffsetCommit, 9, 'proxy', 0.004);
    m.observer.responded(ApiKey.Fetch, 12, 'broker', 0.3);
    expect(
      await sample(m, 'kop_requests_total', { api: 'OffsetCommit', version: '8', answered_by: 'proxy' }),
    ).toBe(2);
    expect(
      await sample(m, 'kop_requests_total', { api: 'OffsetCommit', version: '9', answered_by: 'proxy' }),
    ).toBe(1);
    expect(
      await sample(m, 'kop_requests_total', { api: 'Fetch', version: '12', answered_by: 'broker' }),
    ).toBe(1);
    expect(await sample(m, 'kop_requests_total', { api: 'Fetch', answered_by: 'proxy' })).toBeUndefined();
    expect(
      await sample(m, 'kop_request_duration_seconds_count', { api: 'OffsetCommit', answered_by: 'proxy' }),
    ).toBe(3);
    expect(
      await sample(m, 'kop_request_duration_seconds_sum', { api: 'OffsetCommit', answered_by: 'proxy' }),
    ).toBeCloseTo(0.01);
    expect(
      await sample(m, 'kop_request_duration_seconds_bucket', {
        api: 'Fetch',
        answered_by: 'broker',
        le: '0.25',
      }),
    ).toBe(0);
    expect(
      await sample(m, 'kop_request_duration_seconds_bucket', {
        api: 'Fetch',
        answered_by: 'broker',
        le: '0.5',
      }),
    ).toBe(1);
  });

  it('does not tell a version 0 from another version when versions are off', async () => {
    const m = createProxyMetrics({ processMetrics: false, apiVersions: false });
    m.observer.responded(ApiKey.Metadata, 1, 'broker', 0.001);
    m.observer.responded(ApiKey.Metadata, 12, 'broker', 0.001);
    expect(
      await sample(m, 'kop_requests_total', { api: 'Metadata', version: '', answered_by: 'broker' }),
    ).toBe(2);
  });

  it('names unknown API keys without failing', async () => {
    const m = createProxyMetrics({ processMetrics: false });
    m.observer.responded(9999, 0, 'broker', 0.001);
    expect(await sample(m, 'kop_requests_total', { api: 'unknown_9999' })).toBe(1);
  });

  it('counts bytes by direction, connections, connect failures and rejected frames', async () => {
    const m = createProxyMetrics({ processMetrics: false });
    m.observer.bytes('client_in', 100);
    m.observer.bytes('client_in', 5);
    m.observer.bytes('broker_out', 7);
    m.observer.connectionOpened(null);
    m.observer.connectionOpened(1);
    m.observer.connectionOpened(2);
    m.observer.connectionClosed(null);
    // Broker connections are opened when a client first needs one: not every client has one.
    m.observer.brokerConnectionOpened(1);
    m.observer.brokerConnectionOpened(null);
    m.observer.brokerConnectionClosed(null);
    m.observer.upstreamConnectFailed(2);
    m.observer.frameRejected('too_large');
    expect(await sample(m, 'kop_bytes_total', { direction: 'client_in' })).toBe(105);
    expect(await sample(m, 'kop_bytes_total', { direction: 'broker_out' })).toBe(7);
    expect(await sample(m, 'kop_bytes_total', { direction: 'client_out' })).toBe(0);
    expect(await sample(m, 'kop_connections_active', { side: 'client' })).toBe(2);
    expect(await sample(m, 'kop_connections_active', { side: 'broker' })).toBe(1);
    expect(await sample(m, 'kop_upstream_connect_failures_total')).toBe(1);
    expect(await sample(m, 'kop_frames_rejected_total', { cause: 'too_large' })).toBe(1);
    expect(await sample(m, 'kop_frames_rejected_total', { cause: 'malformed' })).toBe(0);
  });

  it("reads the proxy's request and response buffers and refused connections at scrape time", async () => {
    const m = createProxyMetrics({ processMetrics: false });
    expect(await sample(m, 'kop_request_buffer_bytes')).toBe(0);
    expect(await sample(m, 'kop_response_buffer_bytes')).toBe(0);
    expect(await sample(m, 'kop_connections_refused_total')).toBe(0);
    let flushed = 0;
    const state = {
      bufferedRequestBytes: 4096,
      mutedConnections: 2,
      bufferedResponseBytes: 8192,
      refusedConnections: 7,
      nativeConnections: 3,
      nativeHandovers: { toNative: 5, toJavaScript: 2 },
      flushNativeFigures: () => {
        flushed++;
        // What the native path hands over at the scrape is in the same scrape's counters.
        m.observer.responded(0, 9, 'broker', 0.001);
      },
    };
    m.watchProxy(state);
    expect(await sample(m, 'kop_native_relay_connections')).toBe(3);
    expect(flushed).toBe(1);
    expect(
      await sample(m, 'kop_requests_total', { api: 'Produce', version: '9', answered_by: 'broker' }),
    ).toBe(2);
    expect(await sample(m, 'kop_native_relay_handovers_total', { to: 'native' })).toBe(5);
    expect(await sample(m, 'kop_native_relay_handovers_total', { to: 'javascript' })).toBe(2);
    expect(await sample(m, 'kop_request_buffer_bytes')).toBe(4096);
    expect(await sample(m, 'kop_request_buffer_muted_connections')).toBe(2);
    expect(await sample(m, 'kop_response_buffer_bytes')).toBe(8192);
    expect(await sample(m, 'kop_connections_refused_total')).toBe(7);
    Object.assign(state, {
      bufferedRequestBytes: 0,
      mutedConnections: 0,
      bufferedResponseBytes: 0,
      refusedConnections: 9,
    });
    expect(await sample(m, 'kop_request_buffer_bytes')).toBe(0);
    expect(await sample(m, 'kop_request_buffer_muted_connections')).toBe(0);
    expect(await sample(m, 'kop_response_buffer_bytes')).toBe(0);
    expect(await sample(m, 'kop_connections_refused_total')).toBe(9);
  });

  it('includes the default process metrics unless turned off', async () => {
    const text = await createProxyMetrics().registry.metrics();
    expect(text).toContain('process_cpu_user_seconds_total');
    expect(text).toContain('nodejs_eventloop_lag_seconds');
    expect(await createProxyMetrics({ processMetrics: false }).registry.metrics()).not.toContain(
      'process_cpu',
    );
  });

  it('shows an event loop stall at its length at the coarser delay resolution', async () => {
    const m = createProxyMetrics();
    // A scrape resets the histogram: what follows is measured afresh.
    await m.registry.metrics();
    await new Promise((r) => setTimeout(r, 3 * EVENT_LOOP_DELAY_RESOLUTION_MS));
    const until = Date.now() + 300;
    while (Date.now() < until) {
      // Blocks the event loop, as a long synchronous task would.
    }
    await new Promise((r) => setTimeout(r, 3 * EVENT_LOOP_DELAY_RESOLUTION_MS));
    const max = await sample(m, 'nodejs_eventloop_lag_max_seconds');
    // The sample due during the stall waited for it whole (less up to one resolution).
    expect(max).toBeGreaterThanOrEqual(0.3 - EVENT_LOOP_DELAY_RESOLUTION_MS / 1000);
    expect(max).toBeLessThan(10);
  });
});

describe('commit metrics', () => {
  it('counts partitions accepted and refused, by reason, and mirrored commits', async () => {
    const m = createProxyMetrics({ processMetrics: false });
    m.offsets.commitAccepted('g', 3);
    m.offsets.commitAccepted('g', 2);
    m.offsets.commitRefused('g', 'fence', 4);
    m.offsets.commitRefused('h', 'store_down', 1);
    m.offsets.commitRefused('h', 'unauthorized', 1);
    m.offsets.mirrored(true);
    m.offsets.mirrored(false);
    m.offsets.mirrored(false);
    expect(await sample(m, 'kop_commits_total', { result: 'accepted' })).toBe(5);
    expect(await sample(m, 'kop_commits_total', { result: 'refused' })).toBe(6);
    expect(await sample(m, 'kop_commit_refusals_total', { reason: 'fence' })).toBe(4);
    expect(await sample(m, 'kop_commit_refusals_total', { reason: 'store_down' })).toBe(1);
    expect(await sample(m, 'kop_commit_refusals_total', { reason: 'unauthorized' })).toBe(1);
    expect(await sample(m, 'kop_commit_refusals_total', { reason: 'cas' })).toBe(0);
    expect(await sample(m, 'kop_mirrored_commits_total', { result: 'ok' })).toBe(1);
    expect(await sample(m, 'kop_mirrored_commits_total', { result: 'failed' })).toBe(2);
  });

  it('counts superseded partitions from 0 (a commit read before the one stored: docs/design.md)', async () => {
    const m = createProxyMetrics({ processMetrics: false });
    expect(await sample(m, 'kop_commits_superseded_total', {})).toBe(0);
    m.offsets.commitSuperseded?.('g', 3);
    expect(await sample(m, 'kop_commits_superseded_total', {})).toBe(3);
  });
});

describe('measured store', () => {
  it('passes every operation through and times it by store kind and operation', async () => {
    const m = createProxyMetrics({ processMetrics: false });
    const store = m.measureStore(new MemoryStore());
    expect(store.kind).toBe('memory');
    const outcome = await store.commit({
      group: 'g',
      requestId: 'r1',
      writes: [
        {
          topic: 't',
          partition: 0,
          offset: 42n,
          leaderEpoch: -1,
          metadata: '',
          commitTimestamp: 1n,
          expireTimestamp: -1n,
        },
      ],
    });
    expect(outcome).toEqual({ status: 'ok' });
    expect((await store.fetch('g', null)).map((o) => o.offset)).toEqual([42n]);
    expect(await store.listGroups()).toEqual(['g']);
    await store.ping();
    expect(
      await sample(m, 'kop_store_operation_duration_seconds_count', { store: 'memory', operation: 'commit' }),
    ).toBe(1);
    expect(
      await sample(m, 'kop_store_operation_duration_seconds_count', { store: 'memory', operation: 'fetch' }),
    ).toBe(1);
    expect(
      await sample(m, 'kop_store_operation_duration_seconds_count', { store: 'memory', operation: 'ping' }),
    ).toBe(1);
    expect(await sample(m, 'kop_store_errors_total', { store: 'memory', operation: 'commit' })).toBe(0);
  });

  it('counts a rejected operation as an error and rethrows it', async () => {
    const m = createProxyMetrics({ processMetrics: false });
    const failing = new MemoryStore();
    const broken: OffsetStore = Object.assign(Object.create(failing) as OffsetStore, {
      kind: 'redis',
      fetch: () => Promise.reject(new Error('connection lost')),
    });
    const store = m.measureStore(broken);
    await expect(store.fetch('g', null)).rejects.toThrow('connection lost');
    await expect(store.fetch('g', null)).rejects.toThrow('connection lost');
    expect(await sample(m, 'kop_store_errors_total', { store: 'redis', operation: 'fetch' })).toBe(2);
    expect(
      await sample(m, 'kop_store_operation_duration_seconds_count', { store: 'redis', operation: 'fetch' }),
    ).toBe(2);
    expect(await sample(m, 'kop_store_errors_total', { store: 'redis', operation: 'commit' })).toBe(0);
  });
});
