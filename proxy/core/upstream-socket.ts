/** How the relay and the proxy's own client dial a broker: plain TCP, or TLS with these settings. */
import net from 'node:net';
import tls from 'node:tls';
import type { HostPort } from './broker-map.js';
import { connectWithReusedReads } from './reused-reads.js';

export interface UpstreamTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized: boolean;
  servername?: string;
}

/**
 * Connects to a broker. `reuseReadBuffer`: the connection's reads go into one buffer used again
 * while the reader does not keep its bytes (reused-reads.ts), for connections that relay; TLS
 * connections read as Node does.
 */
export function connectUpstream(
  target: HostPort,
  tlsOptions: UpstreamTls | null,
  opts: { reuseReadBuffer?: boolean } = {},
): net.Socket {
  if (tlsOptions) {
    return tls.connect({
      host: target.host,
      port: target.port,
      ca: tlsOptions.ca,
      cert: tlsOptions.cert,
      key: tlsOptions.key,
      rejectUnauthorized: tlsOptions.rejectUnauthorized,
      servername: tlsOptions.servername ?? (net.isIP(target.host) ? undefined : target.host),
    });
  }
  if (!opts.reuseReadBuffer) return net.connect({ host: target.host, port: target.port });
  return connectWithReusedReads({ host: target.host, port: target.port });
}
