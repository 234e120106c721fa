/** Builds the offset service from the configuration: the store, the cluster client, the guards. */
import type { OffsetStore } from '../../backends/store.js';
import { BrokerMap } from '../broker-map.js';
import { ClusterClient } from '../cluster-client.js';
import type { ProxyConfig } from '../config.js';
import type { Logger } from '../logger.js';
import type { UpstreamTls } from '../upstream-request.js';
import { BrokerAuthorizer } from './authorizer.js';
import { BrokerLookups } from './broker-lookups.js';
import { GuardPolicy } from './guard-policy.js';
import { OffsetService } from './service.js';
import type { OffsetServiceMetrics } from './service.js';

export interface OffsetServiceHandle {
  service: OffsetService;
  store: OffsetStore;
  cluster: ClusterClient;
  lookups: BrokerLookups;
  close(): Promise<void>;
}

export async function openOffsetStore(config: ProxyConfig, log?: Logger): Promise<OffsetStore> {
  const { openStore } = await import('../../backends/open-store.js');
  return openStore(config.store, {
    dataDir: config.dataDir,
    operationTimeoutMs: config.storeTimeoutMs,
    ...(log
      ? { notice: (message: string, fields: Record<string, unknown>) => log.info(message, fields) }
      : {}),
  });
}

export function createOffsetService(
  config: ProxyConfig,
  store: OffsetStore,
  brokerTls: UpstreamTls | null,
  log: Logger,
  metrics?: OffsetServiceMetrics,
): OffsetServiceHandle {
  const cluster = new ClusterClient({
    bootstrapServers: config.bootstrapServers,
    brokers: new BrokerMap(0),
    tls: brokerTls,
    timeoutMs: config.requestTimeoutMs,
    sasl: config.clusterSasl ?? null,
    log: log.child({ component: 'cluster-client' }),
  });
  const lookups = new BrokerLookups(cluster);
  const service = new OffsetService({
    store,
    guards: new GuardPolicy(config.commitGuard, config.commitGuardGroups),
    unknownTopics: config.unknownTopics,
    fallbackUpstream: config.fallback === 'upstream',
    mirrorCommits: config.mirrorCommits,
    lookups,
    authorizer: config.authorize === 'broker' ? new BrokerAuthorizer() : null,
    log: log.child({ component: 'offsets' }),
    ...(metrics ? { metrics } : {}),
  });
  return {
    service,
    store,
    cluster,
    lookups,
    close: async () => {
      cluster.close();
      await store.close();
    },
  };
}
