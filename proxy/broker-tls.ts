/** The broker TLS settings of the configuration as the upstream sockets take them (files read). */
import { readFileSync } from 'node:fs';
import type { ProxyConfig } from './config.js';
import type { UpstreamTls } from './core/upstream-socket.js';

/** Reads the PEM files --broker-tls-* name; null without --broker-tls. The proxy and the offsets CLI share it. */
export function readBrokerTls(tls: ProxyConfig['brokerTls']): UpstreamTls | null {
  if (!tls) return null;
  const read = (file: string | undefined): Buffer | undefined =>
    file === undefined ? undefined : readFileSync(file);
  return { ca: read(tls.ca), cert: read(tls.cert), key: read(tls.key), rejectUnauthorized: !tls.insecure };
}
