// Issue #43, a Redis Cluster with two replicas per master: `?wait=N` counts the replicas that
// acknowledged a commit, and a failover may promote one that did not. Under a steady commit load
// (store-faults.ts), one replica of the groups' master stops receiving its writes (its replication
// link cut: cutOffReplica) while the other still does, and that other one is cut off the cluster
// bus, so it cannot be elected. Then the master is cut off the bus too: the other masters fail it
// over to the one replica they can reach, the one that lags. With `wait=1` the up-to-date replica's
// acknowledgement was enough, and every commit acknowledged since its sibling fell behind is lost;
// with `wait=2` those commits were refused, and nothing acknowledged is lost. The verdict reads the
// nodes' own ports, not the proxy's store code.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { uniqueName } from '../bed/clients/scenarios.js';
import { waitUntil } from '../bed/process.js';
import { parseClusterNodes } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import { sleep } from '../reliability/commit-checker.js';
import {
  clusterGroups,
  clusterRunOptions,
  rejoinedAsReplica,
  startClusterBehindRelays,
  expectWitnessLossOnly,
  withReadiness,
} from '../reliability/redis-ha-scenario.js';
import type { ClusterBehindRelays } from '../reliability/redis-ha-scenario.js';
import { cutOffBus, cutOffReplica } from '../reliability/redis-node-relays.js';
import { expectLive, expectSurvived, runStoreFault } from '../reliability/store-faults.js';
import type { FaultContext } from '../reliability/store-faults.js';

const brokerBootstrap = inject('kafkaBootstrap');
const HOST = '127.0.0.1';
const STORE_TIMEOUT_MS = 1000;

describe('Redis Cluster, two replicas per master: the failover promotes the one that lags', () => {
  let bed: ClusterBehindRelays | undefined;
  beforeAll(async () => {
    bed = await startClusterBehindRelays(2);
  }, 180_000);
  afterAll(async () => {
    await bed?.stop();
  });

  for (const wait of [1, 2]) {
    test(`wait=${wait}: ${wait === 1 ? 'what only the other replica had is lost' : 'nothing acknowledged is lost'}`, async () => {
      const topic = uniqueName(`cluster-replicas-wait${wait}`);
      const g = await clusterGroups(bed!.cluster, topic);
      const replicas = g.topology.filter((n) => n.masterId === g.victim.id);
      expect(replicas).toHaveLength(2);
      const [lagging, current] = replicas as [(typeof replicas)[0], (typeof replicas)[0]];
      const roleSeenBy = async (observer: number, id: string) =>
        parseClusterNodes(await redisCommand(HOST, observer, 'CLUSTER NODES')).find((n) => n.id === id);
      const observer = g.topology.find((n) => n.role === 'master' && n.id !== g.victim.id)!;
      let witnessAcksLagging = 0;
      const { r, watch } = await withReadiness(async (proxyArgs, watch) =>
        runStoreFault({
          name: `Redis Cluster, two replicas, the lagging one promoted, wait=${wait}`,
          brokerBootstrap,
          store: `${bed!.cluster.url}?wait=${wait}&waitTimeoutMs=500`,
          proxyArgs,
          ...(await clusterRunOptions(bed!.cluster, g, topic, STORE_TIMEOUT_MS)),
          inject: async (ctx: FaultContext) => {
            watch.start();
            await sleep(1_000);
            const cuts = [
              cutOffReplica(bed!.relays, bed!.cluster.nodes, g.victim.port, lagging.port),
              cutOffBus(bed!.busRelays, bed!.cluster.nodes, current.port),
            ];
            watch.phase = 'cut';
            ctx.mark('one replica lags, the other is off the bus');
            try {
              // The witnesses commit while only the current replica gets the master's writes, and
              // stop before the failover: a commit sent later would reach the new master.
              await sleep(100);
              const atLag = ctx.witnessAcks();
              await sleep(900);
              await ctx.stopWitnesses();
              witnessAcksLagging = ctx.witnessAcks() - atLag;
              ctx.mark(`witness acks while one replica lagged ${witnessAcksLagging}`);
              cuts.push(cutOffBus(bed!.busRelays, bed!.cluster.nodes, g.victim.port));
              ctx.mark('master off the bus');
              await waitUntil(
                'the other masters to promote the lagging replica',
                async () =>
                  (await roleSeenBy(observer.port, g.victim.id))?.failing === true &&
                  (await roleSeenBy(observer.port, lagging.id))?.role === 'master',
                { timeoutMs: 30_000, intervalMs: 50 },
              );
              ctx.mark('lagging replica promoted');
            } finally {
              for (const cut of cuts) cut.heal();
            }
            watch.phase = 'after';
            ctx.mark('cut over');
            await rejoinedAsReplica(g.victim.port);
            ctx.mark('old master a replica');
            await ctx.canariesSettled();
            await watch.readyAgain(ctx);
          },
        }),
      );
      if (wait === 2) {
        expectSurvived(r, { errorsExpected: true });
        // The lagging replica could not acknowledge: nothing the witnesses sent was.
        expect(witnessAcksLagging).toBe(0);
      } else {
        expectLive(r, { errorsExpected: false });
        expectWitnessLossOnly(r, 'Cluster, two replicas, the lagging one promoted, wait=1');
        // One acknowledgement was enough, from the replica that was not promoted.
        if (witnessAcksLagging > 0) expect(r.violations.length).toBeGreaterThan(0);
      }
      expect(watch.count('cut', 0)).toBe(0);
      expect(watch.count('after', 200)).toBeGreaterThan(0);
    }, 120_000);
  }
});
