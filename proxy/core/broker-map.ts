/**
 * Which real broker stands behind which proxy port.
 *
 * Node N is exposed on `listenPort + 1 + N` unless an explicit mapping says otherwise, so the
 * port a client sees for a broker is the same across proxy restarts and can be planned for in
 * firewalls. Upstream addresses are learned from every response that names brokers (Metadata,
 * DescribeCluster, FindCoordinator, NodeEndpoints), so a broker that appears later, or moves,
 * is picked up without configuration.
 */
export interface HostPort {
  host: string;
  port: number;
}

export class BrokerMap {
  private readonly upstream = new Map<number, HostPort>();

  constructor(
    private listenPort: number,
    private readonly explicitPorts: ReadonlyMap<number, number> = new Map(),
  ) {}

  /** The bootstrap port the default mapping counts from. */
  setBasePort(port: number): void {
    this.listenPort = port;
  }

  /** The proxy port that fronts node `nodeId`. */
  localPort(nodeId: number): number {
    const explicit = this.explicitPorts.get(nodeId);
    if (explicit !== undefined) return explicit;
    const port = this.listenPort + 1 + nodeId;
    if (nodeId < 0 || port > 65535) {
      throw new Error(
        `node id ${nodeId} maps outside the port range; give it an explicit --broker-port mapping`,
      );
    }
    return port;
  }

  /** Records where node `nodeId` really is. Returns true when this is new or changed. */
  learn(nodeId: number, address: HostPort): boolean {
    const known = this.upstream.get(nodeId);
    if (known && known.host === address.host && known.port === address.port) return false;
    this.upstream.set(nodeId, { host: address.host, port: address.port });
    return true;
  }

  upstreamOf(nodeId: number): HostPort | undefined {
    return this.upstream.get(nodeId);
  }

  nodeIds(): number[] {
    return [...this.upstream.keys()];
  }
}

/** Parses "host:port" (IPv6 as "[::1]:9092"). */
export function parseHostPort(text: string): HostPort {
  const trimmed = text.trim();
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(trimmed) ?? /^([^:]+):(\d+)$/.exec(trimmed);
  if (!m) throw new Error(`expected host:port, got "${text}"`);
  const port = Number(m[2]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad port in "${text}"`);
  return { host: m[1]!, port };
}

export function parseHostPortList(text: string): HostPort[] {
  const list = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map(parseHostPort);
  if (list.length === 0) throw new Error('expected at least one host:port');
  return list;
}
