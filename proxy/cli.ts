/** Command-line entry point: `kafka-offset-proxy [options]`. */
import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig, usage } from './config.js';
import type { ProxyConfig } from './config.js';
import { createLogger } from './logger.js';
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
  const options = proxyOptions(config, log);
  const store = await openOffsetStore(config);
  log.info('offset store open', { store: store.kind });
  const offsets = createOffsetService(config, store, options.brokerTls ?? null, log);
  const proxy = new KafkaProxy({ ...options, extension: offsets.service });
  await proxy.start();

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    proxy
      .stop()
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
