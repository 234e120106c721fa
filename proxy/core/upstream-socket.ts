/** How the relay and the proxy's own client dial a broker: plain TCP, or TLS with these settings. */
import net from 'node:net';
import tls from 'node:tls';
import type { HostPort } from './broker-map.js';

export interface UpstreamTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized: boolean;
  servername?: string;
}

export function connectUpstream(target: HostPort, tlsOptions: UpstreamTls | null): net.Socket {
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
  return net.connect({ host: target.host, port: target.port });
}
