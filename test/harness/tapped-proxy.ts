// The proxy with the offset service (in-process, startOffsetProxy) behind a RequestTap: clients
// bootstrap at 127.0.0.2, where the tap listens on the proxy's bootstrap and broker ports, and the
// proxy advertises 127.0.0.2, so every connection a client opens to the proxy passes the tap.
import type { OffsetStore } from '../../backends/store.js';
import type { OffsetServiceMetrics } from '../../proxy/offsets/service.js';
import { startOffsetProxy, type OffsetProxy } from './offset-proxy.js';
import { RequestTap } from './request-tap.js';

/** The broker ports after the proxy's bootstrap port that the tap covers (node ids 0-7). */
const BROKER_PORTS_TAPPED = 8;
const TAPPED_HOST = '127.0.0.2';

export interface TappedProxy {
  proxy: OffsetProxy;
  tap: RequestTap;
  /** Where clients bootstrap: the tap in front of the proxy. */
  bootstrap: string;
  /** Whether `host:port` is an address of the tapped proxy (bootstrap or broker port). */
  isProxyAddress(host: string, port: number): boolean;
  stop(): Promise<void>;
}

/** `metrics` sees every commit the offset service accepts or refuses (startOffsetProxy). */
export async function startTappedProxy(
  brokerBootstrap: string,
  store: OffsetStore,
  metrics?: OffsetServiceMetrics,
): Promise<TappedProxy> {
  const proxy = await startOffsetProxy(brokerBootstrap, store, [], metrics, {
    advertisedHost: TAPPED_HOST,
  });
  const tap = new RequestTap();
  try {
    for (let port = proxy.port; port <= proxy.port + BROKER_PORTS_TAPPED; port++)
      await tap.listen({ host: TAPPED_HOST, port }, { host: '127.0.0.1', port });
  } catch (err) {
    await tap.close();
    await proxy.stop();
    throw err;
  }
  return {
    proxy,
    tap,
    bootstrap: `${TAPPED_HOST}:${proxy.port}`,
    isProxyAddress: (host, port) =>
      host === TAPPED_HOST && port >= proxy.port && port <= proxy.port + BROKER_PORTS_TAPPED,
    stop: async () => {
      await tap.close();
      await proxy.stop();
    },
  };
}
