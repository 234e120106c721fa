// Starts the proxy with the offset service on a given store, in-process, for integration tests.
import { parseHostPortList } from '../../proxy/core/broker-map.js';
import type { ProxyConfig } from '../../proxy/config.js';
import { loadConfig } from '../../proxy/config.js';
import { createLogger, silentLogger } from '../../proxy/logger.js';
import { createOffsetService } from '../../proxy/offsets/setup.js';
import type { OffsetServiceHandle } from '../../proxy/offsets/setup.js';
import type { OffsetServiceMetrics } from '../../proxy/offsets/service.js';
import type { OffsetStore } from '../../backends/store.js';
import type { ProxyOptions } from '../../proxy/core/proxy-options.js';
import { startProxy } from './proxy.js';
import type { RunningProxy } from './proxy.js';

export interface OffsetProxy extends RunningProxy {
  offsets: OffsetServiceHandle;
  store: OffsetStore;
}

/**
 * `flags` are the CLI's options (e.g. ['--commit-guard', 'cas']); the store is given directly so a
 * test can read it. The store is not closed by stop(): the test owns it. `metrics` sees every commit
 * the offset service accepts or refuses, as the proxy's /metrics counters do. `proxyOptions`
 * go to the proxy itself (e.g. the host it advertises, for a tap in front of it).
 */
export async function startOffsetProxy(
  brokerBootstrap: string,
  store: OffsetStore,
  flags: string[] = [],
  metrics?: OffsetServiceMetrics,
  proxyOptions: Pick<Partial<ProxyOptions>, 'advertisedHost'> = {},
): Promise<OffsetProxy> {
  const config: ProxyConfig = loadConfig(['--bootstrap-server', brokerBootstrap, ...flags], {});
  const log = process.env['KOP_TEST_LOG'] ? createLogger('debug') : silentLogger;
  const offsets = createOffsetService(config, store, null, log, metrics);
  const running = await startProxy(brokerBootstrap, {
    bootstrapServers: parseHostPortList(brokerBootstrap),
    extension: offsets.service,
    log,
    ...proxyOptions,
  });
  return {
    ...running,
    offsets,
    store,
    stop: async () => {
      await running.stop();
      offsets.cluster.close();
    },
  };
}

/** Partition offsets the offset service accepted and refused, by group (its `commits` counters). */
export interface CommitCounts {
  accepted: Map<string, number>;
  refused: Map<string, number>;
  /** Partitions refused, by group and reason ("fence", "store_down", ...: the metrics' label). */
  refusedFor: Map<string, Record<string, number>>;
  metrics: OffsetServiceMetrics;
}

export function commitCounts(): CommitCounts {
  const accepted = new Map<string, number>();
  const refused = new Map<string, number>();
  const refusedFor = new Map<string, Record<string, number>>();
  const add = (counts: Map<string, number>, group: string, n: number) =>
    counts.set(group, (counts.get(group) ?? 0) + n);
  return {
    accepted,
    refused,
    refusedFor,
    metrics: {
      commitAccepted: (group, n) => add(accepted, group, n),
      commitRefused: (group, reason, n) => {
        add(refused, group, n);
        const reasons = refusedFor.get(group) ?? {};
        reasons[reason] = (reasons[reason] ?? 0) + n;
        refusedFor.set(group, reasons);
      },
      mirrored: () => undefined,
    },
  };
}
