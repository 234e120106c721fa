// Issue #43, a ZooKeeper ensemble split by the network: the CLI proxy on a 3-node ensemble whose
// members reach each other only through relays (test/reliability/zk-split.ts), committing main,
// witness and canary groups (store-faults.ts) while the ensemble is cut in two and healed:
//  - the leader cut off from both followers, the proxy's session on the leader, then on a
//    follower: the followers elect a new leader, the old one stops serving;
//  - the member the proxy's session is on (a follower) isolated alone: the other two go on.
// The cut lasts until the majority has a leader, the cut-off member has stopped serving (its
// tick-based timeouts have run out) and the proxy has had commits acknowledged through the
// majority; then it heals. An answered commit is final, no canary reads back below its last
// acknowledged offset, only retriable error codes, no client connection dropped.
//
// The proxy reaches the members through a relay per member too, only to start its session on the
// member a scenario wants: the others refuse connections until the proxy has connected.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import type { EnsembleMember } from '../bed/zookeeper.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import { CommitChecker, sleep } from '../reliability/commit-checker.js';
import { FaultRelay } from '../reliability/fault-relay.js';
import { StaleProbe } from '../reliability/stale-probe.js';
import { expectSurvived, runStoreFault } from '../reliability/store-faults.js';
import type { FaultContext, StoreFaultResult } from '../reliability/store-faults.js';
import { startSplittableEnsemble } from '../reliability/zk-split.js';
import type { SplittableEnsemble } from '../reliability/zk-split.js';

const brokerBootstrap = inject('kafkaBootstrap');
const STORE_TIMEOUT_MS = 1000;
/** A scenario takes 30-60 s on an idle machine; elections on a loaded one take much longer. */
const SCENARIO_TIMEOUT_MS = 360_000;
/** A bound on every wait for the ensemble (the test's failure, not a measurement). */
const WAIT_MS = 120_000;
const MAIN_GROUPS = 4;

const names = (topic: string, kind: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${topic}-${kind}-${i}`);

async function waitFor(what: string, cond: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe('ZooKeeper ensemble of 3 split by the network', () => {
  let zk: SplittableEnsemble;
  /** A follower of the settled ensemble, to be cut off alone, and the two others. */
  async function followerAndMajority(): Promise<{ isolated: EnsembleMember; majority: EnsembleMember[] }> {
    await zk.settled(WAIT_MS);
    const leader = await zk.leader(WAIT_MS);
    const isolated = zk.members.find((m) => m !== leader)!;
    return { isolated, majority: zk.members.filter((m) => m !== isolated) };
  }
  /** One relay per member's client port, in member order: the proxy's way to the ensemble. */
  let clientRelays: FaultRelay[] = [];
  beforeAll(async () => {
    zk = await startSplittableEnsemble();
    clientRelays = await Promise.all(
      zk.members.map((m) => FaultRelay.start({ host: '127.0.0.1', port: m.port })),
    );
  });
  afterAll(async () => {
    await Promise.all(clientRelays.map((r) => r.close()));
    await zk?.stop();
  });

  /** The members the proxy has a connection to now. */
  const proxyOn = () => zk.members.filter((_, i) => clientRelays[i]!.open > 0);

  /**
   * Starts the proxy with its session on `start`, and once commits flow cuts `side` (one member)
   * from the other two; heals once the majority has a leader, `side` has stopped serving and the
   * main groups have had commits acknowledged through the majority.
   */
  const split = async (
    title: string,
    kind: string,
    pick: (
      leader: EnsembleMember,
      followers: EnsembleMember[],
    ) => {
      start: EnsembleMember;
      side: EnsembleMember;
    },
  ): Promise<StoreFaultResult> => {
    await zk.settled(WAIT_MS);
    const leader = await zk.leader(WAIT_MS);
    const { start, side } = pick(
      leader,
      zk.members.filter((m) => m !== leader),
    );
    const majority = zk.members.filter((m) => m !== side);
    clientRelays.forEach((relay, i) => (relay.refusing = zk.members[i] !== start));
    let movedTo: EnsembleMember[] = [];
    const r = await runStoreFault({
      name: `ZooKeeper ensemble split, ${title}`,
      brokerBootstrap,
      store: `zk://${clientRelays.map((relay) => relay.address).join(',')}/${kind}`,
      open: () => openStore(`${zk.url}/${kind}`),
      storeTimeoutMs: STORE_TIMEOUT_MS,
      acks: 80,
      topic: uniqueName(`zk-${kind}`),
      groups: names(kind, 'main', MAIN_GROUPS),
      witnesses: names(kind, 'witness', 4),
      canaries: names(kind, 'canary', 24),
      inject: async (ctx: FaultContext) => {
        await ctx.stopWitnesses();
        for (const relay of clientRelays) relay.refusing = false;
        const on = proxyOn();
        if (on.length !== 1 || on[0] !== start)
          throw new Error(`the proxy is on members ${on.map((m) => m.id)}, not ${start.id}`);
        ctx.mark(`cut ${zk.cut([side])} (leader ${leader.id}, proxy on ${start.id})`);
        try {
          await waitFor('a leader in the majority', async () => {
            for (const m of majority) if ((await m.mode()) === 'leader') return true;
            return false;
          });
          ctx.mark('the majority has a leader');
          await waitFor(`member ${side.id} to stop serving`, async () => (await side.mode()) === undefined);
          ctx.mark(`member ${side.id} stopped serving`);
          const acks = ctx.mainAcks();
          await waitFor(
            'commits acknowledged through the majority',
            () => ctx.mainAcks() >= acks + 2 * MAIN_GROUPS,
          );
          ctx.mark(`${ctx.mainAcks() - acks} commits acknowledged through the majority`);
          movedTo = proxyOn();
        } finally {
          zk.heal();
        }
        ctx.mark('healed');
        await zk.settled(WAIT_MS);
        ctx.mark('every member serves again');
        await ctx.canariesSettled();
      },
    });
    expect(zk.cutLinks).toBe(0);
    // The proxy's session left the cut-off member (or never was on it) and went on in the majority.
    expect(movedTo.length).toBeGreaterThan(0);
    expect(movedTo.every((m) => majority.includes(m))).toBe(true);
    return r;
  };

  test(
    'the leader cut off from both followers, the proxy on the leader: it goes on through the new leader',
    async () => {
      const r = await split('the leader cut off, the proxy on it', 'leaderside', (leader) => ({
        start: leader,
        side: leader,
      }));
      expectSurvived(r, { errorsExpected: true });
    },
    SCENARIO_TIMEOUT_MS,
  );

  test(
    'the leader cut off from both followers, the proxy on a follower: it goes on through the new leader',
    async () => {
      const r = await split(
        'the leader cut off, the proxy on a follower',
        'followerside',
        (leader, followers) => ({
          start: followers[0]!,
          side: leader,
        }),
      );
      expectSurvived(r, { errorsExpected: true });
    },
    SCENARIO_TIMEOUT_MS,
  );

  test(
    "the proxy's member (a follower) isolated alone: its session moves to the majority and goes on",
    async () => {
      const r = await split("the proxy's follower isolated", 'isolated', (_leader, followers) => ({
        start: followers[0]!,
        side: followers[0]!,
      }));
      expectSurvived(r, { errorsExpected: true });
    },
    SCENARIO_TIMEOUT_MS,
  );

  test(
    'a second proxy on the member cut off alone answers no OffsetFetch older than an acknowledged commit',
    async () => {
      const { isolated, majority } = await followerAndMajority();
      const topic = uniqueName('zk-reader');
      const partitions = 2;
      await ensureBuilt();
      await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions }]);
      // The writer knows only the majority, the reader only the member that will be cut off.
      const proxyOn = (members: EnsembleMember[]) =>
        spawnProxy([
          '--bootstrap-server',
          brokerBootstrap,
          '--store',
          `zk://${members.map((m) => `127.0.0.1:${m.port}`).join(',')}/reader`,
          '--store-timeout-ms',
          String(STORE_TIMEOUT_MS),
        ]);
      const writer = await proxyOn(majority);
      const reader = await proxyOn([isolated]);
      const checker = new CommitChecker({
        target: () => writer.bootstrap,
        groups: names('reader', 'g', 8),
        topic,
        partitions,
      });
      const probe = new StaleProbe(reader.bootstrap, checker, topic, partitions);
      const t0 = Date.now();
      const events: string[] = [];
      const mark = (e: string) => events.push(`${e} ${Date.now() - t0}`);
      try {
        checker.start();
        await checker.waitForAcks(80);
        probe.start();
        await probe.waitForAnswers(50);
        mark(`${probe.stats.answered} fetches answered, cut ${zk.cut([isolated])}`);
        const acksAtCut = checker.acknowledged;
        const staleAtCut = probe.stats.stale;
        const fetchesAtCut = probe.stats.answered + probe.stats.unanswered;
        try {
          await waitFor(
            `member ${isolated.id} to stop serving`,
            async () => (await isolated.mode()) === undefined,
          );
          mark(`member ${isolated.id} stopped serving`);
        } finally {
          zk.heal();
        }
        const acksDuringCut = checker.acknowledged - acksAtCut;
        const fetchesDuringCut =
          probe.stats.answered +
          probe.stats.unanswered +
          Object.values(probe.stats.errors).reduce((a, b) => a + b, 0) -
          fetchesAtCut;
        const staleDuringCut = probe.stats.stale - staleAtCut;
        mark('healed');
        await zk.settled(WAIT_MS);
        mark(`member ${isolated.id} serves again`);
        await probe.waitForAnswers(50);
        mark('50 fetches answered again');
        await probe.stop();
        await checker.stop();
        console.log(
          `[faults] ZooKeeper ensemble split, a second proxy on the member cut off alone: ` +
            `writer ${checker.summary()}, ${acksDuringCut} acknowledged during the cut; ` +
            `reader ${probe.summary()}, ${fetchesDuringCut} fetches sent during the cut; stale partitions ` +
            `before/during/after the cut ${staleAtCut}/${staleDuringCut}/${probe.stats.stale - staleAtCut - staleDuringCut}; ` +
            `timeline (ms): ${events.join(', ')}`,
        );
        // The writer went on through the majority while the reader's member was cut off.
        expect(acksDuringCut).toBeGreaterThan(0);
        expect(fetchesDuringCut).toBeGreaterThan(0);
        expect(probe.stats.stale).toBe(0);
        expect(Object.keys(probe.stats.errors).map(Number)).toSatisfy((codes: number[]) =>
          codes.every((code) => code === 7 || code === 14 || code === 15),
        );
        expect(probe.stats.unanswered).toBe(0);
        expect(probe.stats.reconnects).toBe(0);
      } finally {
        await probe.stop();
        await checker.stop();
        await writer.stop('SIGKILL');
        await reader.stop('SIGKILL');
      }
    },
    SCENARIO_TIMEOUT_MS,
  );

  test(
    'a store on the member cut off alone reads no group record or listing older than a written one',
    async () => {
      const { isolated, majority } = await followerAndMajority();
      const url = (members: EnsembleMember[]) =>
        `zk://${members.map((m) => `127.0.0.1:${m.port}`).join(',')}/records`;
      const opts = { operationTimeoutMs: STORE_TIMEOUT_MS };
      const writer = await openStore(url(majority), opts);
      const reader = await openStore(url([isolated]), opts);
      const group = uniqueName('zk-record');
      // The writer raises one group's generation and adds groups, over and over; what it finished
      // writing before a read began, the read must show (or fail).
      const written = { generation: 0, groups: [] as string[] };
      const reads = { records: 0, listings: 0, stale: 0, failed: 0, examples: [] as string[] };
      let running = true;
      const writing = (async () => {
        for (let g = 1; running; g++) {
          try {
            await writer.updateGroup(group, {
              kind: 'joined',
              generationId: g,
              memberId: 'm',
              groupInstanceId: null,
              members: [{ memberId: 'm', groupInstanceId: null }],
            });
            written.generation = g;
            const added = `${group}-${g}`;
            await writer.updateGroup(added, { kind: 'rebalancing', generationId: 1 });
            written.groups.push(added);
          } catch {
            await sleep(50);
          }
        }
      })();
      const reading = (async () => {
        while (running) {
          const before = { generation: written.generation, groups: [...written.groups] };
          try {
            const record = await reader.getGroup(group);
            reads.records++;
            if ((record?.generationId ?? 0) < before.generation) {
              reads.stale++;
              reads.examples.push(`record at ${record?.generationId} after ${before.generation} was written`);
            }
            const listed = new Set(await reader.listGroups());
            reads.listings++;
            const missing = before.groups.filter((g) => !listed.has(g));
            if (missing.length > 0) {
              reads.stale++;
              reads.examples.push(`listing without ${missing.length} groups written before it`);
            }
          } catch {
            reads.failed++;
            await sleep(50);
          }
        }
      })();
      try {
        await waitFor('reads before the cut', () => reads.listings >= 20);
        const cut = zk.cut([isolated]);
        const generationAtCut = written.generation;
        try {
          await waitFor(
            `member ${isolated.id} to stop serving`,
            async () => (await isolated.mode()) === undefined,
          );
        } finally {
          zk.heal();
        }
        const generationsDuringCut = written.generation - generationAtCut;
        await zk.settled(WAIT_MS);
        const listingsAfter = reads.listings;
        await waitFor('reads after the heal', () => reads.listings >= listingsAfter + 20);
        running = false;
        await Promise.all([writing, reading]);
        console.log(
          `[faults] ZooKeeper split, group records read on the member cut off (${cut}): ` +
            `${reads.records} records and ${reads.listings} listings read, ${reads.failed} reads failed, ` +
            `${reads.stale} stale; ${generationsDuringCut} generations written during the cut`,
        );
        expect(generationsDuringCut).toBeGreaterThan(0);
        expect(reads.stale, reads.examples.slice(0, 5).join('; ')).toBe(0);
      } finally {
        running = false;
        await Promise.all([writing, reading]);
        await writer.close();
        await reader.close();
      }
    },
    SCENARIO_TIMEOUT_MS,
  );
});
