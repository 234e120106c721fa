// What the Redis Cluster and Sentinel network-fault tests share (reliability-redis-ha-*.test.ts):
// /readyz polled through a fault, by phase; the measured (not asserted) loss without WAIT; and a
// Cluster run's groups, placed on the master a fault hits (the victim) or on the others, with the
// verdict read from the nodes' own ports (redis-node-relays.ts).
import { expect } from 'vitest';
import { waitUntil } from '../bed/process.js';
import { freePort } from '../bed/ports.js';
import { startRedisCluster } from '../bed/redis.js';
import type { ClusterNodeInfo, RedisCluster } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import { readyz } from '../harness/readiness-poll.js';
import type { Readiness } from '../harness/readiness-poll.js';
import { sleep } from './commit-checker.js';
import { RedisNodeRelays, readOffsetsDirect } from './redis-node-relays.js';
import type { FaultContext, StoreFaultResult } from './store-faults.js';

const HOST = '127.0.0.1';

/** /readyz polled every 250 ms from start() until stop(); what it answered, by phase. */
export class ReadinessWatch {
  readonly seen: { phase: string; r: Readiness }[] = [];
  phase = 'before';
  private running: Promise<void> | undefined;
  private stopped = false;
  constructor(private readonly port: number) {}
  start(): void {
    this.running = (async () => {
      while (!this.stopped) {
        const phase = this.phase;
        this.seen.push({ phase, r: await readyz(this.port) });
        await sleep(250);
      }
    })();
  }
  /** Waits for a 200 after the cut (marking when), then stops polling. */
  async readyAgain(ctx: FaultContext): Promise<void> {
    await waitUntil('/readyz 200 after the cut', async () => this.count('after', 200) > 0, {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    ctx.mark('ready again');
    await this.stop();
  }
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }
  count(phase: string, status: number): number {
    return this.seen.filter((s) => s.phase === phase && s.r.status === status).length;
  }
  summary(): string {
    const phases = [...new Set(this.seen.map((s) => s.phase))];
    return phases
      .map((p) => {
        const statuses = this.seen.filter((s) => s.phase === p).map((s) => s.r.status);
        const tally = [...new Set(statuses)].map((st) => `${st}x${statuses.filter((x) => x === st).length}`);
        return `${p}: ${tally.join(' ')}`;
      })
      .join('; ');
  }
}

export async function withReadiness(
  run: (args: string[], watch: ReadinessWatch) => Promise<StoreFaultResult>,
): Promise<{ r: StoreFaultResult; watch: ReadinessWatch }> {
  const http = await freePort();
  const watch = new ReadinessWatch(http);
  const r = await run(['--http', `${HOST}:${http}`], watch);
  await watch.stop();
  console.log(`[faults] readiness (/readyz statuses by phase): ${watch.summary()}`);
  return { r, watch };
}

/**
 * A loss (without WAIT, or with too few replicas in it) is measured, not required: it is printed,
 * and only witness partitions may show it (the other groups' later commits overwrite a loss), each
 * below its acknowledged offset.
 */
export function expectWitnessLossOnly(r: StoreFaultResult, what: string): void {
  console.log(`[faults] ${what}: ${r.violations.length} witness partitions lost`);
  for (const v of r.violations) {
    expect(v.group).toContain('-witness-');
    expect(v.stored === null || v.stored < v.acked).toBe(true);
  }
}

/** The groups of one run: named `<topic>-<kind>-<i>`, on the master that owns `<topic>-main-0` or not. */
export interface ClusterGroups {
  victim: ClusterNodeInfo;
  topology: ClusterNodeInfo[];
  /** `n` groups of `kind` on the victim (`on`) or on the other masters. */
  pick(kind: string, n: number, on: boolean): Promise<string[]>;
}

export async function clusterGroups(cluster: RedisCluster, topic: string): Promise<ClusterGroups> {
  // A run before this one may have failed a master over and rejoined it: wait until every node's
  // view has converged, or the victim can show up without its replica.
  await cluster.settled();
  const topology = await cluster.topology();
  const live = topology[0]!.port;
  const ownerOf = async (g: string) => {
    const slot = Number((await redisCommand(HOST, live, `CLUSTER KEYSLOT kop:{g:${g}}:offsets`)).slice(1));
    return topology.find((n) => n.role === 'master' && n.slots.some(([a, b]) => slot >= a && slot <= b))!;
  };
  const victim = await ownerOf(`${topic}-main-0`);
  return {
    victim,
    topology,
    async pick(kind, n, on) {
      const out: string[] = [];
      for (let i = 0; out.length < n; i++) {
        const g = `${topic}-${kind}-${i}`;
        if (((await ownerOf(g)).id === victim.id) === on) out.push(g);
      }
      return out;
    },
  };
}

/**
 * What every Cluster run shares: its groups (on the victim, plus two main groups on other masters
 * that commit through the cut), and the verdict read from whichever node serves a group's slot
 * at the end (the others answer MOVED).
 */
export const clusterRunOptions = async (
  cluster: RedisCluster,
  g: ClusterGroups,
  topic: string,
  storeTimeoutMs: number,
) => ({
  topic,
  storeTimeoutMs,
  acks: 80,
  readStored: async (group: string) =>
    readOffsetsDirect(
      cluster.nodes.map((n) => n.port),
      group,
      topic,
    ),
  groups: [...(await g.pick('main', 4, true)), ...(await g.pick('main', 2, false))],
  witnesses: await g.pick('witness', 4, true),
  canaries: await g.pick('canary', 16, true),
});

/** A Redis Cluster with a fault relay in front of every node's client port and bus port. */
export interface ClusterBehindRelays {
  cluster: RedisCluster;
  /** In front of the client ports (the proxy's connections and the replication links). */
  relays: RedisNodeRelays;
  /** In front of the bus ports (cutOffBus). */
  busRelays: RedisNodeRelays;
  stop(): Promise<void>;
}

/** Three masters with `replicasPerMaster` each, `cluster-node-timeout` 2 s, every node behind relays. */
export async function startClusterBehindRelays(replicasPerMaster: number): Promise<ClusterBehindRelays> {
  const relays = new RedisNodeRelays();
  const busRelays = new RedisNodeRelays();
  const stopRelays = async () => {
    await relays.close();
    await busRelays.close();
  };
  let cluster: RedisCluster;
  try {
    cluster = await startRedisCluster({
      replicasPerMaster,
      nodeTimeoutMs: 2_000,
      announcePort: relays.announcePort,
      busAnnouncePort: busRelays.announcePort,
    });
  } catch (error) {
    await stopRelays();
    throw error;
  }
  return {
    cluster,
    relays,
    busRelays,
    async stop() {
      await cluster.stop();
      await stopRelays();
    },
  };
}

/** Waits until the node on `port` replicates again: a failed-over master rejoined as a replica. */
export async function rejoinedAsReplica(port: number): Promise<void> {
  await waitUntil(
    `the old master on ${port} to rejoin as a replica`,
    async () => {
      const info = await redisCommand(HOST, port, 'INFO replication');
      return info.includes('role:slave') && info.includes('master_link_status:up');
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  );
}
