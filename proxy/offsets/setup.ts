/** Builds the offset service from the configuration: the store, the cluster client, the guards. */
import type { StoreTarget } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { BrokerMap } from '../core/broker-map.js';
import type { HostPort } from '../core/broker-map.js';
import { ClusterClient } from '../client/cluster-client.js';
import type { SaslCredentials } from '../client/sasl-client.js';
import type { Logger } from '../common/log.js';
import type { UpstreamTls } from '../core/upstream-socket.js';
import { BrokerAuthorizer } from './authorizer.js';
import { BrokerLookups } from './broker-lookups.js';
import { StoreGroupIndex } from './store-groups.js';
import { GuardPolicy } from './guard-policy.js';
import type { CommitGuardMode, GroupOverride } from './guard-policy.js';
import { OffsetService } from './service.js';
import { TopicIds } from './topic-ids.js';
import type { TopicIdsOptions } from './topic-ids.js';
import { TopicIncarnations } from './topic-incarnations.js';
import { OlderTopicsHidden } from './older-topics-hidden.js';
import { InternalGroupsHidden } from '../../backends/internal-groups.js';
import type { OffsetServiceMetrics, OffsetServiceOptions } from './service.js';

/**
 * The settings the offset service is built from, by the names of the process's configuration
 * (config.ts's ProxyConfig has them all), so this layer does not depend on the CLI's.
 */
export interface OffsetServiceConfig {
  bootstrapServers: HostPort[];
  storeTarget: StoreTarget;
  storeTimeoutMs: number;
  requestTimeoutMs: number;
  clusterSasl: SaslCredentials | undefined;
  commitGuard: CommitGuardMode;
  commitGuardGroups: GroupOverride[];
  unknownTopics: OffsetServiceOptions['unknownTopics'];
  unknownTopicsGroups: NonNullable<OffsetServiceOptions['unknownTopicsGroups']>;
  fallback: 'none' | 'upstream';
  mirrorCommits: boolean;
  authorize: 'broker' | 'off';
}

export interface OffsetServiceHandle {
  service: OffsetService;
  store: OffsetStore;
  /**
   * The store as clients see it, for every reader of offsets (the admin API, lag): a re-created
   * topic's older offsets hidden, compare-and-set against what a read shows (older-topics-hidden.ts).
   */
  current: OffsetStore;
  cluster: ClusterClient;
  lookups: BrokerLookups;
  /** Which topic of a name stored offsets belong to (topic-incarnations.ts). */
  incarnations: TopicIncarnations;
  close(): Promise<void>;
}

export async function openOffsetStore(
  config: Pick<OffsetServiceConfig, 'storeTarget' | 'storeTimeoutMs'>,
  log?: Logger,
): Promise<OffsetStore> {
  const { openStoreTarget } = await import('../../backends/open-store.js');
  return openStoreTarget(config.storeTarget, {
    operationTimeoutMs: config.storeTimeoutMs,
    // One proxy per embedded data directory: a second one is refused naming the first.
    holder: 'proxy',
    ...(log
      ? { notice: (message: string, fields: Record<string, unknown>) => log.info(message, fields) }
      : {}),
  });
}

/** The TCP endpoints of a networked store (probed to tell why it does not answer); none for local ones. */
export function storeEndpoints(target: StoreTarget): { host: string; port: number }[] {
  if (target.kind === 'redis') return target.redis.endpoints;
  if (target.kind === 'zookeeper')
    return target.zookeeper.connectString.split(',').map((hp) => {
      const colon = hp.lastIndexOf(':');
      return { host: hp.slice(0, colon), port: Number(hp.slice(colon + 1)) };
    });
  return [];
}

/**
 * The proxy's own client of the cluster (TLS, SASL, deadline as configured); the offsets CLI
 * reaches the cluster through the same one.
 */
export function createClusterClient(
  config: Pick<OffsetServiceConfig, 'bootstrapServers' | 'requestTimeoutMs' | 'clusterSasl'>,
  brokerTls: UpstreamTls | null,
  log: Logger,
): ClusterClient {
  return new ClusterClient({
    bootstrapServers: config.bootstrapServers,
    brokers: new BrokerMap(0),
    tls: brokerTls,
    timeoutMs: config.requestTimeoutMs,
    sasl: config.clusterSasl ?? null,
    log: log.child({ component: 'cluster-client' }),
  });
}

/** The cluster's topics and their ids, from Metadata for all topics (one request per refresh). */
export function clusterTopicIds(cluster: ClusterClient, opts: TopicIdsOptions = {}): TopicIds {
  return new TopicIds(
    () =>
      cluster
        .within('looking up topic ids', () => cluster.metadata(null))
        .then((md) =>
          md.topics.flatMap((t) =>
            t.name !== null && t.errorCode === 0 ? [{ name: t.name, id: t.topicId }] : [],
          ),
        ),
    opts,
  );
}

/**
 * A store as the offsets CLI reads it: older topics' offsets hidden as the proxies recorded them,
 * and, with a cluster, re-creations they have not recorded yet worked out as a restarted proxy
 * would (records are read, never written: a read must not write to a store a proxy may hold).
 */
export function cliCurrentStore(
  store: InternalGroupsHidden,
  cluster: ClusterClient | null,
  /** How long the cluster's topics are waited for (a command can wait; a client's request cannot). */
  waitMs: number,
): OffsetStore {
  const topicIds = cluster
    ? clusterTopicIds(cluster, { staleWaitMs: waitMs })
    : new TopicIds(() => Promise.reject(new Error('no cluster')));
  const incarnations = new TopicIncarnations(store.withInternalGroups, topicIds, { record: false });
  return OlderTopicsHidden.over(store, (topics) => incarnations.hiddenBefore(topics));
}

export function createOffsetService(
  config: OffsetServiceConfig,
  rawStore: OffsetStore,
  brokerTls: UpstreamTls | null,
  log: Logger,
  metrics?: OffsetServiceMetrics,
): OffsetServiceHandle {
  const cluster = createClusterClient(config, brokerTls, log);
  const lookups = new BrokerLookups(cluster);
  // Clients and tools never see the proxy's own records (internal-groups.ts).
  const visible = InternalGroupsHidden.over(rawStore);
  const store: OffsetStore = visible;
  const topicIds = clusterTopicIds(cluster);
  const incarnations = new TopicIncarnations(visible.withInternalGroups, topicIds, {
    log: log.child({ component: 'offsets' }),
  });
  const current = OlderTopicsHidden.over(visible, (topics) => incarnations.hiddenBefore(topics));
  const service = new OffsetService({
    store: current,
    guards: new GuardPolicy(config.commitGuard, config.commitGuardGroups),
    unknownTopics: config.unknownTopics,
    unknownTopicsGroups: config.unknownTopicsGroups,
    fallbackUpstream: config.fallback === 'upstream',
    mirrorCommits: config.mirrorCommits,
    lookups,
    authorizer: config.authorize === 'broker' ? new BrokerAuthorizer() : null,
    groups: new StoreGroupIndex(current, cluster),
    topicIds,
    incarnations,
    log: log.child({ component: 'offsets' }),
    ...(metrics ? { metrics } : {}),
  });
  return {
    service,
    store,
    current,
    cluster,
    lookups,
    incarnations,
    close: async () => {
      topicIds.close();
      cluster.close();
      await store.close();
    },
  };
}
