/**
 * Rewrites every broker address in a decoded response so that clients only ever learn proxy
 * addresses: Metadata, DescribeCluster, FindCoordinator (v0-3 single and v4+ batched) and the
 * KIP-951 NodeEndpoints of Produce, Fetch, ShareFetch and ShareAcknowledge responses.
 */
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { AnyResponse } from '../../protocol/messages/api-info.js';
import type { HostPort } from './broker-map.js';

/** Maps a real broker to the address a client must use for it, learning the broker on the way. */
export type ExposeBroker = (nodeId: number, upstream: HostPort) => HostPort;

interface NodeAddress {
  host: string;
  port: number;
}

function rewrite(node: NodeAddress, nodeId: number, expose: ExposeBroker): void {
  // Error answers carry node -1 and no usable address: leave them as the broker wrote them.
  if (nodeId < 0) return;
  const exposed = expose(nodeId, { host: node.host, port: node.port });
  node.host = exposed.host;
  node.port = exposed.port;
}

interface WithNodeId extends NodeAddress {
  nodeId: number;
}

function rewriteAll(nodes: readonly WithNodeId[], expose: ExposeBroker): void {
  for (const n of nodes) rewrite(n, n.nodeId, expose);
}

/**
 * Which responses carry broker addresses, by api key and version. A response that does not is
 * never decoded for rewriting.
 */
export function carriesBrokerAddresses(apiKey: number, apiVersion: number): boolean {
  switch (apiKey) {
    case ApiKey.Metadata:
    case ApiKey.FindCoordinator:
    case ApiKey.DescribeCluster:
    case ApiKey.ShareFetch:
    case ApiKey.ShareAcknowledge:
      return true;
    case ApiKey.Produce:
      return apiVersion >= 10;
    case ApiKey.Fetch:
      return apiVersion >= 16;
    default:
      return false;
  }
}

/** Rewrites the addresses in a decoded response in place. */
export function rewriteBrokerAddresses(response: AnyResponse, expose: ExposeBroker): void {
  switch (response.apiKey) {
    case ApiKey.Metadata:
      rewriteAll(response.body.brokers, expose);
      return;
    case ApiKey.DescribeCluster:
      for (const broker of response.body.brokers) rewrite(broker, broker.brokerId, expose);
      return;
    case ApiKey.FindCoordinator: {
      const b = response.body;
      if (b.coordinators.length > 0) {
        for (const c of b.coordinators) if (c.errorCode === 0) rewrite(c, c.nodeId, expose);
      } else if (b.errorCode === 0 && b.host !== '') {
        rewrite(b, b.nodeId, expose);
      }
      return;
    }
    case ApiKey.Produce:
    case ApiKey.Fetch:
    case ApiKey.ShareFetch:
    case ApiKey.ShareAcknowledge:
      rewriteAll(response.body.nodeEndpoints, expose);
      return;
    default:
      return;
  }
}

/**
 * The brokers a response names, leaving it as it is (an identity mapping writes back the same
 * host and port). Used on responses to the proxy's own requests.
 */
export function brokersIn(response: AnyResponse): { nodeId: number; address: HostPort }[] {
  const found: { nodeId: number; address: HostPort }[] = [];
  rewriteBrokerAddresses(response, (nodeId, address) => {
    found.push({ nodeId, address });
    return address;
  });
  return found;
}
