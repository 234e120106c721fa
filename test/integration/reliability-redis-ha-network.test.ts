// Issue #43, network faults between the proxy and Redis Cluster or Sentinel nodes. The bed starts
// each node announcing the port of a fault relay in front of it (test/reliability/redis-node-relays.ts),
// so the proxy's client, which learns node addresses from the servers, reaches every node through
// its relay. So does a Cluster replica's replication link (it connects to its master's announced
// port), and in the Cluster bed the bus too (a relay in front of every bus port, which lets a test
// cut one node off it); a Sentinel replica's first replication link stays direct. Under a steady
// commit load (store-faults.ts: main, witness and canary groups through the CLI proxy):
// - Cluster: the network to the master that owns the groups is frozen (no bytes either way) for
//   several store timeouts, then reset while reconnects fail; the other nodes see it healthy, so
//   nothing fails over;
// - Cluster, the other way round: the master is cut off the cluster bus (redis-node-relays.ts
//   cutOffBus) while the proxy and its replica still reach it; the other masters fail it over to
//   the replica, then the cut ends and the old master rejoins as a replica of the new one; and the
//   same with its replica's replication link cut too (cutOffReplica), so that what the old master
//   acknowledges until its minority refuses reaches no other node;
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
import { parseClusterNodes, startRedisSentinel } from '../bed/redis.js';
import type { RedisCluster, RedisSentinelSet } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import { sleep } from '../reliability/commit-checker.js';
import {
  RedisNodeRelays,
  cutOffBus,
  cutOffReplica,
  readOffsetsDirect,
} from '../reliability/redis-node-relays.js';
import {
  clusterGroups,
  clusterRunOptions,
  rejoinedAsReplica,
  startClusterBehindRelays,
  expectWitnessLossOnly,
  withReadiness,
} from '../reliability/redis-ha-scenario.js';
import type { ClusterBehindRelays } from '../reliability/redis-ha-scenario.js';
import { expectLive, expectSurvived, runStoreFault } from '../reliability/store-faults.js';
import type { FaultContext } from '../reliability/store-faults.js';

const brokerBootstrap = inject('kafkaBootstrap');
const HOST = '127.0.0.1';
const STORE_TIMEOUT_MS = 1000;
const SCENARIO_TIMEOUT_MS = 120_000;
/** How long the witnesses go on committing after the Sentinel cut ends. */
const WINDOW_MS = 2_000;

/** Polls a Cluster node's cluster_state every 50 ms until stop(), reporting each change. */
class ClusterStateWatch {
  /** Whether the node ever answered anything but cluster_state:ok. */
  refused = false;
  private stopped = false;
  private readonly running: Promise<void>;
  constructor(port: number, report: (event: 'refuse' | 'serve again') => void) {
    this.running = (async () => {
      let ok = true;
      while (!this.stopped) {
        const now = (await redisCommand(HOST, port, 'CLUSTER INFO').catch(() => '')).includes(
          'cluster_state:ok',
        );
        if (now !== ok) report(now ? 'serve again' : 'refuse');
        this.refused ||= !now;
        ok = now;
        await sleep(50);
      }
    })();
  }
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }
}

describe('Redis Cluster: the network to one master cut', () => {
  let bed: ClusterBehindRelays | undefined;
  let relays: RedisNodeRelays;
  let busRelays: RedisNodeRelays;
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    bed = await startClusterBehindRelays(1);
    ({ cluster, relays, busRelays } = bed);
  }, 120_000);
  afterAll(async () => {
    await bed?.stop();
  });
  test(
    'frozen, then reset: retriable errors, /readyz 503, recovery on its own, nothing lost',
    async () => {
      const topic = uniqueName('cluster-net');
      const g = await clusterGroups(cluster!, topic);
      const relay = relays.of(g.victim.port);
      const { r, watch } = await withReadiness(async (proxyArgs, watch) =>
        runStoreFault({
          name: 'Redis Cluster, the network to one master frozen then reset',
          brokerBootstrap,
          store: cluster!.url,
          proxyArgs,
          ...(await clusterRunOptions(cluster!, g, topic, STORE_TIMEOUT_MS)),
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
            expect((await cluster!.topology()).find((n) => n.id === g.victim.id)?.role).toBe('master');
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

  // With cluster-require-full-coverage yes (Redis's default) every master refuses from the moment
  // the others flag the old master failed until its replica is promoted: a slot without a master
  // takes the whole cluster down. Without it the other masters' groups commit on throughout.
  // Cut off its replica too, the old master acknowledges writes that no other node gets until its
  // minority refuses: without WAIT those are the loss; with it, WAIT finds no replica and refuses.
  const busCuts = [
    { wait: true, fullCoverage: true, replicaCut: false },
    { wait: false, fullCoverage: true, replicaCut: false },
    { wait: false, fullCoverage: false, replicaCut: false },
    { wait: true, fullCoverage: true, replicaCut: true },
    { wait: false, fullCoverage: true, replicaCut: true },
  ];
  for (const { wait, fullCoverage, replicaCut } of busCuts) {
    const setting =
      (wait ? 'wait=1&waitTimeoutMs=500' : 'no WAIT') +
      (fullCoverage ? '' : ', cluster-require-full-coverage no');
    const cutOff = replicaCut ? 'the bus and its replica' : 'the bus';
    test(
      `cut off ${cutOff}, failed over, rejoined, ${setting}: ${wait ? 'nothing acknowledged is lost' : 'the loss measured'}`,
      async () => {
        const topic = uniqueName(`cluster-bus-${wait ? 'wait' : 'nowait'}`);
        const g = await clusterGroups(cluster!, topic);
        const replica = g.topology.find((n) => n.masterId === g.victim.id)!;
        // The others' view: a node that is neither the victim nor its replica.
        const observer = g.topology.find((n) => n.id !== g.victim.id && n.id !== replica.id)!;
        const seenByOthers = async () =>
          parseClusterNodes(await redisCommand(HOST, observer.port, 'CLUSTER NODES'));
        const stateOf = async (port: number) =>
          /cluster_state:(\w+)/.exec(await redisCommand(HOST, port, 'CLUSTER INFO'))?.[1];
        const setCoverage = async (value: 'yes' | 'no') => {
          for (const n of cluster!.nodes)
            await redisCommand(HOST, n.port, `CONFIG SET cluster-require-full-coverage ${value}`);
        };
        // cluster-replica-no-failover: the replica promotes itself only once let.
        const holdFailover = (value: 'yes' | 'no') =>
          redisCommand(HOST, replica.port, `CONFIG SET cluster-replica-no-failover ${value}`);
        if (!fullCoverage) await setCoverage('no');
        await holdFailover('yes');
        let witnessAcksCutOff = 0;
        try {
          const { r, watch } = await withReadiness(async (proxyArgs, watch) =>
            runStoreFault({
              name: `Redis Cluster, a master cut off ${cutOff} until a failover, ${setting}`,
              brokerBootstrap,
              store: wait ? `${cluster!.url}?wait=1&waitTimeoutMs=500` : cluster!.url,
              proxyArgs,
              ...(await clusterRunOptions(cluster!, g, topic, STORE_TIMEOUT_MS)),
              inject: async (ctx: FaultContext) => {
                watch.start();
                await sleep(1_000);
                const cut = cutOffBus(busRelays, cluster!.nodes, g.victim.port);
                const replicaLink = replicaCut
                  ? cutOffReplica(relays, cluster!.nodes, g.victim.port, replica.port)
                  : undefined;
                watch.phase = 'cut';
                ctx.mark('bus cut');
                if (replicaCut) {
                  // The witnesses stop while the old master still takes writes that reach no
                  // other node: a commit they sent later would go to the new master (the client
                  // retries through CLUSTERDOWN) and hide the loss.
                  await sleep(100);
                  const atCut = ctx.witnessAcks();
                  await sleep(900);
                  await ctx.stopWitnesses();
                  witnessAcksCutOff = ctx.witnessAcks() - atCut;
                  ctx.mark(`witness acks while the old master was cut off ${witnessAcksCutOff}`);
                }
                const others = new ClusterStateWatch(observer.port, (e) =>
                  ctx.mark(`the other masters ${e}`),
                );
                try {
                  // Cut off from the other masters, the old master finds itself in a minority and
                  // refuses commands (CLUSTERDOWN) before they can promote its replica.
                  await waitUntil(
                    'the old master to see the cluster down',
                    async () => (await stateOf(g.victim.port)) === 'fail',
                    { timeoutMs: 30_000, intervalMs: 50 },
                  );
                  ctx.mark('old master refuses');
                  const mainAtRefusal = ctx.mainAcks();
                  if (!fullCoverage) {
                    // Redis promotes the replica as soon as 0.5-1 s after the others flag the old
                    // master failed: held back, the victim's slots stay without a master until
                    // the other masters' groups have shown that they commit on meanwhile.
                    await waitUntil(
                      'the other masters to flag the old master failed (FAIL, not PFAIL)',
                      async () => (await seenByOthers()).find((n) => n.id === g.victim.id)?.failed === true,
                      { timeoutMs: 30_000, intervalMs: 50 },
                    );
                    const mainAtFail = ctx.mainAcks();
                    await waitUntil(
                      "the other masters' groups to commit while the victim's slots have no master",
                      async () => ctx.mainAcks() - mainAtFail >= 20,
                      { timeoutMs: 15_000, intervalMs: 50 },
                    );
                    expect((await seenByOthers()).find((n) => n.id === replica.id)?.role).toBe('replica');
                    ctx.mark(
                      `main acks while no master held the victim's slots ${ctx.mainAcks() - mainAtFail}`,
                    );
                    await holdFailover('no');
                  } else {
                    // With full coverage every master refuses while the victim's slots have none.
                    // Redis may promote the replica within a commit's deadline, and the proxy then
                    // rides through without an error: held back until the cluster has refused for
                    // longer than a deadline, the fault is one that clients see.
                    await waitUntil('the other masters to refuse', async () => others.refused, {
                      timeoutMs: 30_000,
                      intervalMs: 50,
                    });
                    await sleep(STORE_TIMEOUT_MS + 500);
                    await holdFailover('no');
                  }
                  await waitUntil(
                    'the other masters to fail the old master over to its replica',
                    async () => {
                      const nodes = await seenByOthers();
                      return (
                        nodes.find((n) => n.id === g.victim.id)?.failing === true &&
                        nodes.find((n) => n.id === replica.id)?.role === 'master'
                      );
                    },
                    { timeoutMs: 30_000, intervalMs: 50 },
                  );
                  ctx.mark('replica promoted');
                  // The victim's slots had no master in between: these are the other masters'
                  // groups.
                  const othersAcks = ctx.mainAcks() - mainAtRefusal;
                  ctx.mark(`main acks while the old master refused ${othersAcks}`);
                  if (!fullCoverage) {
                    expect(othersAcks).toBeGreaterThan(0);
                    expect(others.refused).toBe(false);
                  }
                  // What the witnesses had acknowledged until now must survive the rejoin; their
                  // later commits, to the new master, would hide a loss.
                  await ctx.stopWitnesses();
                  cut.heal();
                  replicaLink?.heal();
                  watch.phase = 'after';
                  ctx.mark('cut over');
                  await rejoinedAsReplica(g.victim.port);
                  ctx.mark('old master a replica');
                } finally {
                  cut.heal();
                  replicaLink?.heal();
                  await others.stop();
                }
                await ctx.canariesSettled();
                await watch.readyAgain(ctx);
              },
            }),
          );
          if (wait) expectSurvived(r, { errorsExpected: true });
          else {
            expectLive(r, { errorsExpected: true });
            expectWitnessLossOnly(
              r,
              `Cluster: cut off ${cutOff}${fullCoverage ? '' : ' (cluster-require-full-coverage no)'}, without WAIT`,
            );
            // What the old master acknowledged reached no other node: the fault is real.
            if (replicaCut && witnessAcksCutOff > 0) expect(r.violations.length).toBeGreaterThan(0);
          }
          expect(watch.count('cut', 0)).toBe(0);
          expect(watch.count('after', 200)).toBeGreaterThan(0);
        } finally {
          if (!fullCoverage) await setCoverage('yes');
          await holdFailover('no');
        }
      },
      SCENARIO_TIMEOUT_MS,
    );
  }
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
          // make it a replica (whether the proxy still reaches the old master then depends on the
          // machine's timing).
          expectWitnessLossOnly(r, 'Sentinel, without WAIT');
        }
        expect(watch.count('cut', 503)).toBeGreaterThan(0);
        expect(watch.count('cut', 0)).toBe(0);
        expect(watch.count('after', 200)).toBeGreaterThan(0);
      },
      SCENARIO_TIMEOUT_MS,
    );
  }
});
