// Issue #43, network faults between the proxy and Redis Cluster or Sentinel nodes. The bed starts
// each node announcing the port of a fault relay in front of it (test/reliability/redis-node-relays.ts),
// so the proxy's client, which learns node addresses from the servers, reaches every node through
// its relay; the cluster bus and the first replication link stay direct. Under a steady commit
// load (store-faults.ts: main, witness and canary groups through the CLI proxy):
// - Cluster: the network to the master that owns the groups is frozen (no bytes either way) for
//   several store timeouts, then reset while reconnects fail; the other nodes see it healthy, so
//   nothing fails over;
// - Sentinel: the network to the master is frozen, which cuts the proxy and the sentinels off while
//   the replica still replicates; the sentinels promote the replica; then the cut ends and the old
//   master, still a master until the sentinels convert it, is reachable again with the proxy's
//   connections to it open: with wait=1 nothing it acknowledges can be lost, without WAIT the
//   run measures what is.
// The verdict reads the nodes' own ports with a plain client, not the proxy's store code; the
// proxy's /readyz is polled through the cut.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { uniqueName } from '../bed/clients/scenarios.js';
import { waitUntil } from '../bed/process.js';
import { freePort } from '../bed/ports.js';
import { startRedisCluster, startRedisSentinel } from '../bed/redis.js';
import type { RedisCluster, RedisSentinelSet } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import { readyz } from '../harness/readiness-poll.js';
import type { Readiness } from '../harness/readiness-poll.js';
import { sleep } from '../reliability/commit-checker.js';
import { RedisNodeRelays, readOffsetsDirect } from '../reliability/redis-node-relays.js';
import { expectLive, expectSurvived, runStoreFault } from '../reliability/store-faults.js';
import type { FaultContext, StoreFaultResult } from '../reliability/store-faults.js';

const brokerBootstrap = inject('kafkaBootstrap');
const HOST = '127.0.0.1';
const STORE_TIMEOUT_MS = 1000;
const SCENARIO_TIMEOUT_MS = 120_000;
/** How long the witnesses go on committing after the Sentinel cut ends. */
const WINDOW_MS = 2_000;

/** /readyz polled every 250 ms from start() until stop(); what it answered, by phase. */
class ReadinessWatch {
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

async function withReadiness(
  run: (args: string[], watch: ReadinessWatch) => Promise<StoreFaultResult>,
): Promise<{ r: StoreFaultResult; watch: ReadinessWatch }> {
  const http = await freePort();
  const watch = new ReadinessWatch(http);
  const r = await run(['--http', `${HOST}:${http}`], watch);
  await watch.stop();
  console.log(`[faults] readiness (/readyz statuses by phase): ${watch.summary()}`);
  return { r, watch };
}

describe('Redis Cluster: the network to one master cut', () => {
  let relays: RedisNodeRelays;
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    relays = new RedisNodeRelays();
    cluster = await startRedisCluster({
      replicasPerMaster: 1,
      nodeTimeoutMs: 2_000,
      announcePort: relays.announcePort,
    });
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
    await relays?.close();
  });

  test(
    'frozen, then reset: retriable errors, /readyz 503, recovery on its own, nothing lost',
    async () => {
      const topic = uniqueName('cluster-net');
      const topology = await cluster!.topology();
      const live = topology[0]!.port;
      const slotOf = async (g: string) =>
        Number((await redisCommand(HOST, live, `CLUSTER KEYSLOT kop:{g:${g}}:offsets`)).slice(1));
      const ownerOf = (slot: number) =>
        topology.find((n) => n.role === 'master' && n.slots.some(([a, b]) => slot >= a && slot <= b))!;
      const victim = ownerOf(await slotOf(`${topic}-0`));
      const onVictim: string[] = [];
      const elsewhere: string[] = [];
      for (let i = 0; onVictim.length < 24 || elsewhere.length < 2; i++) {
        const g = `${topic}-${i}`;
        if (ownerOf(await slotOf(g)).id === victim.id) onVictim.push(g);
        else elsewhere.push(g);
      }
      const relay = relays.of(victim.port);
      const masters = topology.filter((n) => n.role === 'master').map((n) => n.port);
      const { r, watch } = await withReadiness((proxyArgs, watch) =>
        runStoreFault({
          name: 'Redis Cluster, the network to one master frozen then reset',
          brokerBootstrap,
          store: cluster!.url,
          proxyArgs,
          readStored: async (g) => readOffsetsDirect(masters, g, topic),
          storeTimeoutMs: STORE_TIMEOUT_MS,
          acks: 80,
          topic,
          // Two main groups on other masters: their commits go on through the cut.
          groups: [...onVictim.slice(0, 4), ...elsewhere.slice(0, 2)],
          witnesses: onVictim.slice(4, 8),
          canaries: onVictim.slice(8, 24),
          inject: async (ctx: FaultContext) => {
            watch.start();
            await sleep(1_000);
            await ctx.stopWitnesses();
            relay.freeze();
            watch.phase = 'cut';
            ctx.mark('frozen');
            const mainAtCut = ctx.mainAcks();
            await sleep(4 * STORE_TIMEOUT_MS);
            ctx.mark(`main acks during the freeze ${ctx.mainAcks() - mainAtCut}`);
            // Then the hop resets what it held, and reconnects fail for a while.
            relay.refusing = true;
            relay.drop();
            ctx.mark('reset');
            await sleep(2 * STORE_TIMEOUT_MS);
            relay.refusing = false;
            relay.thaw();
            watch.phase = 'after';
            ctx.mark('cut over');
            await ctx.canariesSettled();
            await watch.readyAgain(ctx);
            // The topology did not change: the cut was the proxy's alone.
            expect((await cluster!.topology()).find((n) => n.id === victim.id)?.role).toBe('master');
          },
        }),
      );
      expectSurvived(r, { errorsExpected: true });
      expect(watch.count('cut', 503)).toBeGreaterThan(0);
      expect(watch.count('cut', 0)).toBe(0);
      expect(watch.count('after', 200)).toBeGreaterThan(0);
    },
    SCENARIO_TIMEOUT_MS,
  );
});

describe('Redis Sentinel: the master cut off from the proxy and the sentinels, the replica promoted', () => {
  let relays: RedisNodeRelays;
  let set: RedisSentinelSet | undefined;
  beforeAll(async () => {
    relays = new RedisNodeRelays();
    set = await startRedisSentinel({ sentinels: 3, downAfterMs: 1_000, announcePort: relays.announcePort });
  }, 120_000);
  afterAll(async () => {
    await set?.stop();
    await relays?.close();
  });

  for (const wait of [true, false]) {
    const setting = wait ? 'wait=1&waitTimeoutMs=500' : 'no WAIT';
    test(
      `${setting}: ${wait ? 'nothing acknowledged is lost' : 'the loss window measured'}, recovery on its own`,
      async () => {
        const topic = uniqueName(`sentinel-net-${wait ? 'wait' : 'nowait'}`);
        const oldMaster = await set!.masterPort();
        const replica = set!.data.find((d) => d.port !== oldMaster)!.port;
        const relay = relays.of(oldMaster);
        const names = (kind: string, n: number) =>
          Array.from({ length: n }, (_, i) => `${topic}-${kind}-${i}`);
        const { r, watch } = await withReadiness((proxyArgs, watch) =>
          runStoreFault({
            name: `Redis Sentinel, the master's network frozen until a failover, ${setting}`,
            brokerBootstrap,
            store: wait ? `${set!.url}?wait=1&waitTimeoutMs=500` : set!.url,
            proxyArgs,
            // The master the sentinels name at the end, then the other node.
            readStored: async (g) => {
              const m = await set!.masterPort();
              return readOffsetsDirect([m, ...set!.data.map((d) => d.port).filter((p) => p !== m)], g, topic);
            },
            storeTimeoutMs: STORE_TIMEOUT_MS,
            acks: 80,
            topic,
            groups: names('main', 4),
            witnesses: names('witness', 4),
            canaries: names('canary', 16),
            inject: async (ctx: FaultContext) => {
              watch.start();
              await sleep(1_000);
              relay.freeze();
              watch.phase = 'cut';
              ctx.mark('frozen');
              await waitUntil(
                'the sentinels to promote the replica',
                async () =>
                  (await set!.masterPort().catch(() => 0)) === replica &&
                  (await redisCommand(HOST, replica, 'INFO replication')).includes('role:master'),
                { timeoutMs: 45_000, intervalMs: 100 },
              );
              ctx.mark('replica promoted');
              // The cut ends with the proxy's connections to the old master open, and the old
              // master still a master until the sentinels convert it: the witnesses commit for
              // WINDOW_MS more and stop, before their groups' later commits could hide a loss.
              relay.thaw();
              watch.phase = 'after';
              ctx.mark('cut over');
              const witnessAcksAtThaw = ctx.witnessAcks();
              await sleep(WINDOW_MS);
              await ctx.stopWitnesses();
              ctx.mark(`witness acks after the cut ${ctx.witnessAcks() - witnessAcksAtThaw}`);
              await waitUntil(
                'the old master to be converted into a replica of the new one',
                async () => (await redisCommand(HOST, oldMaster, 'INFO replication')).includes('role:slave'),
                { timeoutMs: 45_000, intervalMs: 100 },
              );
              ctx.mark('old master converted');
              await ctx.canariesSettled();
              await watch.readyAgain(ctx);
            },
          }),
        );
        if (wait) expectSurvived(r, { errorsExpected: true });
        else {
          expectLive(r, { errorsExpected: true });
          // Without WAIT what the old master acknowledged after the cut is gone once the sentinels
          // make it a replica: measured, not required (whether the proxy still reaches the old
          // master then depends on the machine's timing; 3 of 3 runs lost 70-165 offsets of each
          // witness). Only the witnesses can show it (the other groups' later commits overwrite
          // the loss), and nothing else may be lost.
          console.log(`[faults] Sentinel without WAIT: ${r.violations.length} witness partitions lost`);
          for (const v of r.violations) {
            expect(v.group).toContain('-witness-');
            expect(v.stored === null || v.stored < v.acked).toBe(true);
          }
        }
        expect(watch.count('cut', 503)).toBeGreaterThan(0);
        expect(watch.count('cut', 0)).toBe(0);
        expect(watch.count('after', 200)).toBeGreaterThan(0);
      },
      SCENARIO_TIMEOUT_MS,
    );
  }
});
