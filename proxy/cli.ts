/** Command-line entry point: `kafka-offset-proxy [options]`. */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { describeStoreTarget } from '../backends/open-store.js';
import { redactUrl } from '../backends/redact-url.js';
import type { OffsetStore } from '../backends/store.js';
import type { HostPort } from './core/broker-map.js';
import { ConfigError, describeOption, envName, loadConfig, OPTIONS, shownValue, usage } from './config.js';
import { DataLossWatch } from './data-loss-watch.js';
import type { ProxyConfig } from './config.js';
import type { OpsHttpServer } from './ops/http/http-server.js';
import type { LagCollector } from './ops/lag/lag-collector.js';
import { createLogger, defaultLogFormat } from './logger.js';
import type { LevelSetting } from './logger.js';
import { ConfigReloader } from './reload.js';
import { exitProcess, handleSignals } from './signals.js';
import type { SignalActions } from './signals.js';
import { routeConsoleToLog, routeCStderrToLog } from './console-to-log.js';
import { RefusalLog } from './offsets/refusal-log.js';
import { InternalGroupsHidden } from '../backends/internal-groups.js';
import { createOffsetService, openOffsetStore, storeEndpoints } from './offsets/setup.js';
import { StoreCircuit, storeReadiness } from './offsets/store-circuit.js';
import { StoreHealth } from './offsets/store-health.js';
import { bindProblem, ListenError } from './core/broker-listeners.js';
import { KafkaProxy } from './core/server.js';
import { loadNativeRelay } from './core/native-relay.js';
import { readBrokerTls } from './broker-tls.js';
import { checkStartup } from './startup-checks.js';
import type { StartupNotes } from './startup-checks.js';
import { productVersion } from './common/version.js';
import type { ProxyOptions } from './core/proxy-options.js';

export async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'offsets') {
    const { offsetsMain } = await import('./offsets-cli.js');
    process.exitCode = await offsetsMain(argv.slice(1));
    return;
  }
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(usage());
    return;
  }
  if (argv.includes('--version')) {
    console.log(`kafka-offset-proxy ${productVersion()}`);
    return;
  }
  let config: ProxyConfig;
  let notes: StartupNotes;
  try {
    config = loadConfig(argv);
    notes = await checkStartup(config);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`kafka-offset-proxy: ${err.message}`);
      process.exitCode = 2;
      return;
    }
    throw err;
  }
  // The environment as the start read it: SIGHUP reads the configuration again with it.
  const envAtStart = { ...process.env };
  const logLevel: LevelSetting = { level: config.logLevel };
  const log = createLogger(
    logLevel,
    { service: 'kafka-offset-proxy' },
    undefined,
    config.logFormat ?? defaultLogFormat(),
  );
  // From here on, what libraries print with console.error/warn, and what C code (LMDB) prints to
  // the C library's stderr stream, is a JSON line of the log too.
  const cStderrRouted =
    (config.logFormat ?? defaultLogFormat()) === 'json' &&
    routeCStderrToLog(loadNativeRelay().binding, 'kafka-offset-proxy');
  routeConsoleToLog(log.child({ component: 'library' }), process.stderr, cStderrRouted);
  log.info('starting', startupSummary(config));
  // From here on no signal ends the process unannounced (proxy/signals.ts); stop and reload are
  // filled in once there is something to drain and to reload.
  const signalActions: SignalActions = {};
  handleSignals(log, signalActions);
  for (const w of notes.warnings) log.warn(w.event, w.fields);
  const options = proxyOptions(config, log);
  // Metrics are collected only when something can scrape them (--http). Without it, neither
  // prom-client nor the HTTP modules are loaded: a process that never serves them does not hold
  // their code and objects.
  const metrics = config.http
    ? (await import('./ops/metrics/proxy-metrics.js')).createProxyMetrics({
        apiVersions: config.metricsApiVersions,
        build: { version: productVersion(), store: config.storeTarget.kind },
      })
    : null;
  const storeOption = config.given.has('store') ? 'store' : 'data-dir';
  let rawStore: OffsetStore;
  try {
    rawStore = await openOffsetStore(config, log);
  } catch (err) {
    // The checks passed, yet the store refused (an LMDB file of another format, say).
    const shown = shownValue(storeOption, config.given.get(storeOption) ?? config.dataDir);
    process.stderr.write(
      `kafka-offset-proxy: ${new ConfigError(storeOption, shown, `cannot open the store: ${(err as Error).message}`).message}\n`,
    );
    process.exit(2);
  }
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
  let circuit: StoreCircuit | null = null;
  const health = new StoreHealth(rawStore, {
    target: describeStoreTarget(config.storeTarget),
    endpoints: storeEndpoints(config.storeTarget),
    log: log.child({ component: 'store' }),
    onDown: (why) => circuit?.trip(why),
  });
  // Once the store fails, offset requests are answered at once instead of each waiting for its
  // deadline (heartbeat answers queue behind them on the client's connection).
  circuit = new StoreCircuit(health, {
    log: log.child({ component: 'store' }),
    probeHolder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
  });
  const failing = circuit;
  // Logs "offset store open", or that it does not answer; does not hold the start up.
  void health.check();
  metrics?.watchStore({
    get up() {
      return health.up;
    },
    get circuitOpen() {
      return failing.isOpen;
    },
  });
  // Lag, the admin API and the offset service never see the proxy's own records (internal-groups.ts).
  const store = InternalGroupsHidden.over(metrics ? metrics.measureStore(circuit) : circuit);
  const dataLoss = new DataLossWatch({
    store: rawStore,
    log: log.child({ component: 'store' }),
    onLost: () => metrics?.storeDataLost.labels(rawStore.kind).set(1),
  });
  if (dataLoss.active) metrics?.storeDataLost.labels(rawStore.kind).set(0);
  dataLoss.start();
  const refusals = new RefusalLog(
    metrics?.offsets,
    log.child({ component: 'offsets' }),
    () => health.problem ?? failing.problem,
  );
  const offsets = createOffsetService(config, store, options.brokerTls ?? null, log, refusals);

  const shownOption = (option: string): string =>
    shownValue(option, config.given.get(option) ?? OPTIONS.find((o) => o.name === option)?.default ?? '');
  /** A listener that cannot be bound at start: one line naming the option, exit code 2. */
  const cannotBind = async (line: string): Promise<never> => {
    log.error('cannot start', { error: line });
    process.stderr.write(`kafka-offset-proxy: ${line}\n`);
    await Promise.race([
      offsets.close().catch(() => undefined),
      new Promise((r) => setTimeout(r, 1000).unref()),
    ]);
    process.exit(2);
  };

  const proxy = new KafkaProxy({
    ...options,
    bindFailure: config.bindFailure,
    extension: offsets.service,
    discoverBrokers: async () =>
      (await offsets.cluster.metadata([])).brokers.map((b) => ({
        nodeId: b.nodeId,
        address: { host: b.host, port: b.port },
      })),
    ...(metrics ? { observer: metrics.observer } : {}),
  });
  metrics?.watchProxy(proxy);
  log.info(
    'native relay',
    proxy.nativeRelayEnabled
      ? { used: true, addon: loadNativeRelay().why }
      : { used: false, why: nativeRelayOff(config) },
  );
  let lag: LagCollector | null = null;
  let http: OpsHttpServer | null = null;
  /** --admin-http: the admin routes' own endpoint (null: they are on `http`). */
  let adminHttp: OpsHttpServer | null = null;
  // Handled before clients can connect (the bootstrap listener opens early in proxy.start): a signal
  // during the rest of the start (broker listeners, the HTTP endpoint, the lag collector) shuts
  // down as gracefully as later. A second signal is proxy/signals.ts's: it ends the process at once.
  let stopping = false;
  const shutdown = (signal: string): void => {
    stopping = true;
    const deadlineMs = config.shutdownTimeoutMs;
    log.info('shutting down', { signal, deadlineMs });
    let pending = 'in-flight client requests';
    // The process ends within the deadline whatever hangs: a store call that never returns, a
    // broker that never answers. Acknowledged commits are in the store already.
    setTimeout(() => {
      log.error('shutdown deadline passed: exiting', { pending, deadlineMs });
      exitProcess(1);
    }, deadlineMs);
    dataLoss.stop();
    proxy
      .stop()
      .then(() => {
        pending = 'the lag collector and the HTTP endpoint';
        return Promise.all([lag?.stop(), http?.close(), adminHttp?.close()]);
      })
      .then(() => {
        pending = 'closing the offset store';
        refusals.flushAll();
        return offsets.close();
      })
      .then(
        () => exitProcess(0),
        (err: unknown) => {
          log.error('shutdown failed', { error: err });
          exitProcess(1);
        },
      );
  };
  signalActions.stop = shutdown;
  try {
    await proxy.start();
  } catch (err) {
    if (!(err instanceof ListenError)) throw err;
    return cannotBind(listenFailureLine(err, shownOption(err.option)));
  }
  if (stopping) return;

  if (config.http && metrics) {
    const [
      { LagCollector },
      { OpsHttpServer },
      { registerOpsRoutes },
      { auditDenied, registerOffsetsAdminRoutes },
      { AdminAudit },
      { adminChangesCounter, cliChangesCounter },
    ] = await Promise.all([
      import('./ops/lag/lag-collector.js'),
      import('./ops/http/http-server.js'),
      import('./ops/http/ops-routes.js'),
      import('./ops/admin/http-routes.js'),
      import('./ops/admin/audit.js'),
      import('./ops/admin/audit-metrics.js'),
    ]);
    if (stopping) return;
    if (config.lag.intervalMs > 0) {
      lag = new LagCollector({
        // A re-created topic's older offsets are no offset there, as at the broker.
        store: offsets.current,
        cluster: offsets.cluster,
        members: (groups) => offsets.lookups.memberCounts(groups),
        // One proxy per shared store exports lag series; a dead one's lease lapses after 3 intervals.
        lease: {
          store,
          holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
          ttlMs: Math.max(3 * config.lag.intervalMs, 3_000),
        },
        registry: metrics.registry,
        log: log.child({ component: 'lag' }),
        intervalMs: config.lag.intervalMs,
        include: config.lag.include,
        exclude: config.lag.exclude,
        maxGroups: config.lag.maxGroups,
      });
    }
    const audit = new AdminAudit(log.child({ component: 'audit' }), adminChangesCounter(metrics.registry));
    // The offsets CLI's changes, which it counts in the store (a process that ends at once).
    const counted = rawStore;
    if (counted.readCounts) cliChangesCounter(metrics.registry, () => counted.readCounts!());
    http = new OpsHttpServer({
      token: config.httpToken,
      log: log.child({ component: 'http' }),
      onDenied: auditDenied(audit),
    });
    registerOpsRoutes(http, {
      registry: metrics.registry,
      log: log.child({ component: 'readiness' }),
      readiness: {
        store: () => storeReadiness(failing, () => store.ping()),
        broker: async () => {
          await offsets.cluster.metadata([]);
        },
        listeners: async () => {
          // The ports of every broker the cluster has now: a proxy that started before the
          // cluster opens them here (a discovery failure is the broker check's to report).
          await proxy.refreshBrokers().catch(() => undefined);
          const problems = proxy.listenerProblems();
          if (problems.length > 0) throw new Error(problems.join('; '));
        },
        ...(dataLoss.active ? { storeData: () => dataLoss.check() } : {}),
      },
    });
    // With --admin-http the admin API (its writes above all) has its own address, so the probes
    // and /metrics can be exposed where the offsets must not be changed.
    if (config.adminHttp) {
      adminHttp = new OpsHttpServer({
        token: config.httpToken,
        log: log.child({ component: 'admin-http' }),
        onDenied: auditDenied(audit),
      });
    }
    registerOffsetsAdminRoutes(adminHttp ?? http, offsets.current, {
      groupIsEmptyAtBroker: (g) => offsets.lookups.groupIsEmpty(g),
      audit,
    });
    const bindOrExit = async (option: 'http' | 'admin-http', server: OpsHttpServer, at: HostPort) => {
      try {
        return await server.listen(at);
      } catch (err) {
        await proxy.stop();
        await http?.close();
        return cannotBind(
          new ConfigError(option, shownOption(option), `cannot be bound: ${bindProblem(err)}`).message,
        );
      }
    };
    const bound = await bindOrExit('http', http, config.http);
    const adminBound =
      adminHttp && config.adminHttp ? await bindOrExit('admin-http', adminHttp, config.adminHttp) : undefined;
    if (stopping) return;
    lag?.start();
    log.info('http listening', {
      host: bound.host,
      port: bound.port,
      token: config.httpToken !== undefined,
      // What an operator must know at a glance: can offsets be changed over HTTP at all.
      adminWrites: adminHttp
        ? 'on admin-http only'
        : config.httpToken !== undefined
          ? 'token required'
          : 'disabled (no --http-token)',
    });
    if (adminBound) {
      log.info('admin http listening', {
        host: adminBound.host,
        port: adminBound.port,
        adminWrites: config.httpToken !== undefined ? 'token required' : 'disabled (no --http-token)',
      });
    }
  }
  const reloader = new ConfigReloader(config, {
    argv,
    env: envAtStart,
    logLevel,
    setHttpToken:
      http === null
        ? null
        : (token) => {
            http?.setToken(token);
            adminHttp?.setToken(token);
          },
    replaceClientTls: config.clientTls ? (tls) => proxy.replaceClientTls(tls) : null,
  });
  signalActions.reload = () => reloader.reload();
}

/** The line a listener that cannot be bound at start is reported with; `shown` is its option's value. */
export function listenFailureLine(err: ListenError, shown: string): string {
  const hint =
    err.nodeId === null
      ? ''
      : `; free the port, ${err.option === 'broker-port' ? 'map' : `map broker ${err.nodeId}`} to another port ` +
        `with --broker-port ${err.nodeId}=<port>, or start anyway with --bind-failure unready`;
  return new ConfigError(err.option, shown, err.message + hint).message;
}

/**
 * How long a shutdown waits for in-flight requests: the shutdown deadline less a reserve for
 * closing the store and the cluster connections (up to 1 s, a quarter of short deadlines).
 */
export function drainBudgetMs(shutdownTimeoutMs: number): number {
  return shutdownTimeoutMs - Math.min(1000, Math.floor(shutdownTimeoutMs / 4));
}

/** Why connections are not relayed natively (the start log says so). */
function nativeRelayOff(config: ProxyConfig): string {
  if (config.nativeRelay === 'off') return '--native-relay off';
  if (config.clientTls || config.brokerTls) return 'TLS connections are relayed in JavaScript';
  return `the addon is ${loadNativeRelay().why}`;
}

/** The relay's options from the configuration; the caller adds how brokers are discovered. */
export function proxyOptions(
  config: ProxyConfig,
  log: ReturnType<typeof createLogger>,
): Omit<ProxyOptions, 'discoverBrokers'> {
  const read = (file: string | undefined): Buffer | undefined =>
    file === undefined ? undefined : readFileSync(file);
  return {
    bootstrapServers: config.bootstrapServers,
    listen: config.listen,
    advertisedHost: config.advertisedHost,
    brokerPorts: config.brokerPorts,
    maxFrameSize: config.maxFrameSize,
    maxInFlight: config.maxInFlight,
    nativeRelay: config.nativeRelay !== 'off',
    nativeRelayAfter: config.nativeRelayAfter,
    maxConnections: config.maxConnections,
    maxBufferedRequestBytes: config.maxBufferedRequestBytes,
    maxBufferedResponseBytes: config.maxBufferedResponseBytes,
    idleTimeoutMs: config.idleTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    tlsHandshakeTimeoutMs: config.clientTlsHandshakeTimeoutMs,
    shutdownTimeoutMs: drainBudgetMs(config.shutdownTimeoutMs),
    clientTls: config.clientTls
      ? {
          cert: read(config.clientTls.cert)!,
          key: read(config.clientTls.key)!,
          ca: read(config.clientTls.ca),
          requireClientCert: config.clientTls.requireCert,
        }
      : null,
    brokerTls: readBrokerTls(config.brokerTls),
    log,
  };
}

// ---- startup log: the version, the store and every option that was given, secrets removed
// (tokens and passwords as ***, store URLs redacted); every other option has its default.

export { redactUrl };

export function startupSummary(config: ProxyConfig): Record<string, unknown> {
  const given = Object.fromEntries([...config.given].map(([name, value]) => [name, shownValue(name, value)]));
  return {
    version: productVersion(),
    node: process.version,
    offsetStore:
      config.storeTarget.kind === 'memory'
        ? 'memory'
        : `${config.storeTarget.kind} ${describeStoreTarget(config.storeTarget)}`,
    ...given,
  };
}

/**
 * The options table of docs/configuration.md, generated from OPTIONS (proxy/cli.test.ts fails
 * when the document differs, and rewrites it with KOP_UPDATE_DOCS=1).
 */
export function optionsMarkdown(): string {
  const cell = (s: string): string => s.replace(/\|/g, '\\|');
  const rows = OPTIONS.map((o) => {
    const def = o.default !== undefined ? `\`${o.default}\`` : '';
    return `| \`--${o.name}\` | \`${envName(o.name)}\` | ${def} | ${cell(describeOption(o, (v) => `\`${v}\``))} |`;
  });
  return ['| Flag | Environment | Default | Description |', '| --- | --- | --- | --- |', ...rows].join('\n');
}
