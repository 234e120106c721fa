/** Command-line entry point: `kafka-offset-proxy [options]`. */
import { readFileSync } from 'node:fs';
import { ConfigError, envName, loadConfig, OPTIONS, usage } from './config.js';
import type { ProxyConfig } from './config.js';
import { registerOffsetsAdminRoutes } from './admin/http-routes.js';
import { OpsHttpServer } from './http/http-server.js';
import { registerOpsRoutes } from './http/ops-routes.js';
import { LagCollector } from './lag/lag-collector.js';
import { createLogger } from './logger.js';
import { createProxyMetrics } from './metrics/proxy-metrics.js';
import { createOffsetService, openOffsetStore } from './offsets/setup.js';
import { KafkaProxy } from './server.js';
import type { ProxyOptions } from './server.js';

export async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'offsets') {
    const { offsetsMain } = await import('./admin/offsets-cli.js');
    process.exitCode = await offsetsMain(argv.slice(1));
    return;
  }
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(usage());
    return;
  }
  let config: ProxyConfig;
  try {
    config = loadConfig(argv);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`kafka-offset-proxy: ${err.message}`);
      process.exitCode = 2;
      return;
    }
    throw err;
  }
  const log = createLogger(config.logLevel, { service: 'kafka-offset-proxy' });
  log.info('starting', { config: startupSummary(config) });
  const options = proxyOptions(config, log);
  // Metrics are collected only when something can scrape them (--http).
  const metrics = config.http ? createProxyMetrics({ apiVersions: config.metricsApiVersions }) : null;
  const rawStore = await openOffsetStore(config, log);
  process.on('uncaughtException', (err) => {
    if (rawStore.recoverFromFault?.(err)) {
      log.error('store client fault: client replaced', { store: rawStore.kind, error: err });
      return;
    }
    // Anything else leaves the process in an unknown state: stop, and let the supervisor restart
    // it (acknowledged commits are in the store).
    log.error('uncaught exception', { error: err, stack: err instanceof Error ? err.stack : undefined });
    process.exit(70);
  });
  const store = metrics ? metrics.measureStore(rawStore) : rawStore;
  log.info('offset store open', { store: store.kind });
  const offsets = createOffsetService(config, store, options.brokerTls ?? null, log, metrics?.offsets);
  const proxy = new KafkaProxy({
    ...options,
    extension: offsets.service,
    discoverBrokers: async () =>
      (await offsets.cluster.metadata([])).brokers.map((b) => ({
        nodeId: b.nodeId,
        address: { host: b.host, port: b.port },
      })),
    ...(metrics ? { observer: metrics.observer } : {}),
  });
  metrics?.watchProxy(proxy);
  await proxy.start();

  let lag: LagCollector | null = null;
  let http: OpsHttpServer | null = null;
  if (config.http && metrics) {
    if (config.lag.intervalMs > 0) {
      lag = new LagCollector({
        store,
        cluster: offsets.cluster,
        registry: metrics.registry,
        log: log.child({ component: 'lag' }),
        intervalMs: config.lag.intervalMs,
        include: config.lag.include,
        exclude: config.lag.exclude,
        maxGroups: config.lag.maxGroups,
      });
      lag.start();
    }
    http = new OpsHttpServer({ token: config.httpToken, log: log.child({ component: 'http' }) });
    registerOpsRoutes(http, {
      registry: metrics.registry,
      readiness: {
        store: () => store.ping(),
        broker: async () => {
          await offsets.cluster.metadata([]);
        },
      },
    });
    registerOffsetsAdminRoutes(http, store, { groupIsEmptyAtBroker: (g) => offsets.lookups.groupIsEmpty(g) });
    const bound = await http.listen(config.http);
    log.info('http listening', { host: bound.host, port: bound.port, token: config.httpToken !== undefined });
  }

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    proxy
      .stop()
      .then(() => Promise.all([lag?.stop(), http?.close()]))
      .then(() => offsets.close())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          log.error('shutdown failed', { error: err });
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

export function proxyOptions(config: ProxyConfig, log: ReturnType<typeof createLogger>): ProxyOptions {
  const read = (file: string | undefined): Buffer | undefined =>
    file === undefined ? undefined : readFileSync(file);
  return {
    bootstrapServers: config.bootstrapServers,
    listen: config.listen,
    advertisedHost: config.advertisedHost,
    brokerPorts: config.brokerPorts,
    maxFrameSize: config.maxFrameSize,
    maxInFlight: config.maxInFlight,
    maxConnections: config.maxConnections,
    maxBufferedRequestBytes: config.maxBufferedRequestBytes,
    idleTimeoutMs: config.idleTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    clientTls: config.clientTls
      ? {
          cert: read(config.clientTls.cert)!,
          key: read(config.clientTls.key)!,
          ca: read(config.clientTls.ca),
          requireClientCert: config.clientTls.requireCert,
        }
      : null,
    brokerTls: config.brokerTls
      ? {
          ca: read(config.brokerTls.ca),
          cert: read(config.brokerTls.cert),
          key: read(config.brokerTls.key),
          rejectUnauthorized: !config.brokerTls.insecure,
        }
      : null,
    log,
  };
}

// ---- startup log: the effective configuration, with secrets removed (the HTTP token, passwords
// inside store URLs). TLS files are logged by path, never read here.

const hostPort = (h: { host: string; port: number }): string => `${h.host}:${h.port}`;

/** Replaces the password of `scheme://user:password@host` (and of every host of a list) with ***. */
export function redactUrl(url: string): string {
  return url.replace(
    /(\/\/|,)([^:@/,]*):([^@/,]*)@/g,
    (_m, lead: string, user: string) => `${lead}${user}:***@`,
  );
}

export function startupSummary(config: ProxyConfig): Record<string, unknown> {
  return {
    bootstrapServers: config.bootstrapServers.map(hostPort),
    listen: hostPort(config.listen),
    advertisedHost: config.advertisedHost ?? null,
    brokerPorts: Object.fromEntries(config.brokerPorts),
    store: config.store === undefined ? `embedded:${config.dataDir}` : redactUrl(config.store),
    http: config.http ? hostPort(config.http) : null,
    httpToken: config.httpToken === undefined ? 'unset' : 'set',
    lag: config.lag,
    metricsApiVersions: config.metricsApiVersions,
    maxFrameSize: config.maxFrameSize,
    maxInFlight: config.maxInFlight,
    maxConnections: config.maxConnections,
    maxBufferedRequestBytes: config.maxBufferedRequestBytes,
    idleTimeoutMs: config.idleTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    storeTimeoutMs: config.storeTimeoutMs,
    clientTls: config.clientTls ?? null,
    brokerTls: config.brokerTls ?? null,
    commitGuard: config.commitGuard,
    commitGuardGroups: config.commitGuardGroups,
    unknownTopics: config.unknownTopics,
    fallback: config.fallback,
    mirrorCommits: config.mirrorCommits,
    authorize: config.authorize,
    clusterSasl: config.clusterSasl
      ? { mechanism: config.clusterSasl.mechanism, username: config.clusterSasl.username, password: 'set' }
      : null,
    logLevel: config.logLevel,
  };
}

/**
 * The options table of docs/configuration.md, generated from OPTIONS (proxy/cli.test.ts fails
 * when the document differs, and rewrites it with KOP_UPDATE_DOCS=1).
 */
export function optionsMarkdown(): string {
  const cell = (s: string): string => s.replace(/\|/g, '\\|');
  const rows = OPTIONS.map((o) => {
    const values = o.values ? ` One of: ${o.values.map((v) => `\`${v}\``).join(', ')}.` : '';
    const def = o.default !== undefined ? `\`${o.default}\`` : '';
    return `| \`--${o.name}\` | \`${envName(o.name)}\` | ${def} | ${cell(o.help)}${values} |`;
  });
  return ['| Flag | Environment | Default | Description |', '| --- | --- | --- | --- |', ...rows].join('\n');
}
