// A fault relay (fault-relay.ts) in front of every node of a Redis Cluster or Sentinel set, for the
// bed's `announcePort` option: the nodes announce the relays' ports, so the proxy's client, which
// learns node addresses from the servers, connects only through them and a test can cut the
// network to one node. The same class in front of every Cluster node's bus port (the bed's
// `busAnnouncePort`) lets cutOffBus() take one node off the bus alone. Also a reader of stored
// offsets that goes to the nodes' own ports with a plain client, apart from both the relays and
// the proxy's store code, for the verdict.
import { Redis } from 'ioredis';
import type { AnnouncePort } from '../bed/redis.js';
import { FaultRelay } from './fault-relay.js';

const HOST = '127.0.0.1';

export class RedisNodeRelays {
  private readonly relays = new Map<number, FaultRelay>();

  /** Starts a relay to `port` and returns the relay's port (the bed's announcePort). */
  readonly announcePort: AnnouncePort = async (port) => {
    const relay = await FaultRelay.start({ host: HOST, port });
    this.relays.set(port, relay);
    return relay.port;
  };

  /** The relay in front of the node listening on `port`. */
  of(port: number): FaultRelay {
    const relay = this.relays.get(port);
    if (relay === undefined) throw new Error(`no relay in front of port ${port}`);
    return relay;
  }

  async close(): Promise<void> {
    await Promise.all([...this.relays.values()].map((r) => r.close()));
  }
}

/**
 * Cuts the Cluster node listening on `port` off the cluster bus, both ways, with `busRelays` in
 * front of every node's bus port: its own bus relay frozen for every peer, and the others' freezing
 * what comes from its source address (the bed gives each node one). Its client port, and so its
 * clients and its replication, are untouched. Returns what ends the cut.
 */
export function cutOffBus(
  busRelays: RedisNodeRelays,
  nodes: { port: number; sourceAddress?: string }[],
  port: number,
): { heal(): void } {
  const source = nodes.find((n) => n.port === port)?.sourceAddress;
  if (source === undefined) throw new Error(`node ${port} has no source address of its own`);
  const own = busRelays.of(port + 10_000);
  const others = nodes.filter((n) => n.port !== port).map((n) => busRelays.of(n.port + 10_000));
  own.freeze();
  for (const relay of others) relay.freezeFrom(source);
  return {
    heal() {
      for (const relay of [own, ...others]) relay.thaw();
    },
  };
}

/**
 * Cuts a Cluster replica's replication link to its master, with `relays` in front of every node's
 * client port (the bed's `announcePort`: a replica connects to its master's announced port): the
 * master's relay freezes what comes from the replica's source address. The proxy's connections to
 * the master go on. Returns what ends the cut.
 */
export function cutOffReplica(
  relays: RedisNodeRelays,
  nodes: { port: number; sourceAddress?: string }[],
  masterPort: number,
  replicaPort: number,
): { heal(): void } {
  const source = nodes.find((n) => n.port === replicaPort)?.sourceAddress;
  if (source === undefined) throw new Error(`node ${replicaPort} has no source address of its own`);
  const relay = relays.of(masterPort);
  relay.freezeFrom(source);
  return {
    heal() {
      relay.thaw();
    },
  };
}

/**
 * A group's committed offsets (`kop:{g:G}:offsets`, "<topic>:<partition>" -> "<offset>|...") as
 * the first of `ports` that owns the key answers them: a Cluster node that does not serve the slot
 * answers MOVED, a Sentinel replica is not asked (the caller passes the current master first).
 */
export async function readOffsetsDirect(
  ports: number[],
  group: string,
  topic: string,
): Promise<Map<number, bigint>> {
  let lastError: unknown;
  for (const port of ports) {
    const client = new Redis({ host: HOST, port, lazyConnect: true, maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const hash = await client.hgetall(`kop:{g:${group}}:offsets`);
      const out = new Map<number, bigint>();
      for (const [field, value] of Object.entries(hash)) {
        const sep = field.lastIndexOf(':');
        if (field.slice(0, sep) !== topic) continue;
        out.set(Number(field.slice(sep + 1)), BigInt(value.slice(0, value.indexOf('|'))));
      }
      return out;
    } catch (error) {
      lastError = error;
    } finally {
      client.disconnect();
    }
  }
  throw new Error(`no node answered for group ${group}: ${String(lastError)}`);
}
