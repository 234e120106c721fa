// Issue #20, an answered commit is final, ZooKeeper: the CLI proxy on a 3-node ensemble (one per
// file, started once) loses the leader, and has the server it is connected to frozen (SIGSTOP)
// for longer than --store-timeout-ms, resumed (SIGCONT) only after every canary group has had a
// commit acknowledged elsewhere. Requests the frozen server held then reach the ensemble late;
// none may overwrite what was acknowledged after them. The same through a relay per member
// (test/reliability/fault-relay.ts) that holds the proxy's bytes and delivers them on the old
// connection after the proxy reconnected, freezes and thaws, and resets connections. Main,
// witness and canary groups as in reliability-redis-network.test.ts; the store is read directly
// at the end.
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { startZooKeeperEnsemble } from '../bed/zookeeper.js';
import type { EnsembleMember, ZooKeeperEnsemble } from '../bed/zookeeper.js';
import { sleep } from '../reliability/commit-checker.js';
import { FaultRelay } from '../reliability/fault-relay.js';
import { expectSurvived, runStoreFault } from '../reliability/store-faults.js';
import type { FaultContext } from '../reliability/store-faults.js';

const brokerBootstrap = inject('kafkaBootstrap');
const STORE_TIMEOUT_MS = 1000;
/** A scenario takes 30-60 s on an idle machine; starting JVMs on a loaded one takes much longer. */
const SCENARIO_TIMEOUT_MS = 360_000;

const names = (topic: string, kind: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${topic}-${kind}-${i}`);

/** The ensemble members `pid` has an established TCP connection to (ss -tnp). */
function connectedMembers(pid: number, members: EnsembleMember[]): EnsembleMember[] {
  const lines = execFileSync('ss', ['-Htnp', 'state', 'established'], { encoding: 'utf8' }).split('\n');
  return members.filter((m) =>
    lines.some((l) => l.includes(`pid=${pid},`) && new RegExp(`\\s127\\.0\\.0\\.1:${m.port}\\s`).test(l)),
  );
}

describe('ZooKeeper ensemble of 3: leader lost, a server frozen', () => {
  let zk: ZooKeeperEnsemble;
  beforeAll(async () => {
    // A frozen follower keeps its place for 10 s (syncLimit 20 ticks): when it resumes it runs
    // what it held, as after a long GC pause, instead of being dropped and losing it.
    zk = await startZooKeeperEnsemble({ syncLimit: 20 });
  });
  afterAll(async () => {
    await zk?.stop();
  });

  const run = (
    title: string,
    kind: string,
    inject: (ctx: FaultContext) => Promise<void>,
    connectTo: string[] = zk.members.map((m) => `127.0.0.1:${m.port}`),
  ) =>
    runStoreFault({
      name: `ZooKeeper ensemble, ${title}`,
      brokerBootstrap,
      // The proxy may be given only some of the members (the verdict reads through all of them).
      store: `zk://${connectTo.join(',')}/${kind}`,
      open: () => openStore(`${zk.url}/${kind}`),
      storeTimeoutMs: STORE_TIMEOUT_MS,
      acks: 80,
      topic: uniqueName(`zk-${kind}`),
      groups: names(kind, 'main', 4),
      witnesses: names(kind, 'witness', 4),
      canaries: names(kind, 'canary', 24),
      inject,
    });

  test(
    'the leader killed: a new one is elected, commits resume, nothing acknowledged is lost',
    async () => {
      let killed: EnsembleMember | undefined;
      const r = await run('leader killed', 'leader', async (ctx) => {
        await ctx.stopWitnesses();
        killed = await zk.leader();
        await killed.kill();
        ctx.mark(`leader ${killed.id} killed`);
        const next = await zk.leader();
        ctx.mark(`member ${next.id} leads`);
        await ctx.canariesSettled();
        await killed.start();
        await zk.settled();
        ctx.mark(`member ${killed.id} back`);
      });
      expect(killed).toBeDefined();
      // Whether a commit was in flight at the kill is chance.
      expectSurvived(r, { errorsExpected: false });
    },
    SCENARIO_TIMEOUT_MS,
  );

  test(
    'the whole ensemble away (frozen) longer than the store timeout: no answered commit lands afterwards',
    async () => {
      const r = await run('every member frozen', 'away', async (ctx) => {
        await ctx.stopWitnesses();
        for (const m of zk.members) m.freeze();
        ctx.mark('every member frozen');
        try {
          await sleep(3 * STORE_TIMEOUT_MS);
        } finally {
          for (const m of zk.members) m.thaw();
        }
        ctx.mark('every member resumed');
        await zk.settled();
        await ctx.canariesSettled();
        // Whatever the proxy still had going when ZooKeeper came back has run by now.
        await sleep(2 * STORE_TIMEOUT_MS);
      });
      expectSurvived(r, { errorsExpected: true });
    },
    SCENARIO_TIMEOUT_MS,
  );

  test(
    'the server the proxy uses frozen longer than the store timeout: what it held applies nothing late',
    async () => {
      let frozen: EnsembleMember | undefined;
      // The proxy knows only the followers: the one it uses is frozen, it goes on through the other
      // (a frozen leader would stop every commit until it resumed).
      const leader = await zk.leader();
      const followers = zk.members.filter((m) => m !== leader);
      const r = await run(
        'its server (a follower) frozen',
        'frozen',
        async (ctx) => {
          await ctx.stopWitnesses();
          const [member] = connectedMembers(ctx.proxyPid, zk.members);
          if (member === undefined) throw new Error('the proxy has no connection to any ensemble member');
          frozen = member;
          const t0 = Date.now();
          member.freeze();
          ctx.mark(`member ${member.id} frozen`);
          try {
            // The store gives up on the frozen connection and carries on through another member
            // (a new client may pick the frozen one again: then it takes another round). Resumed
            // within 8 s at the latest, before the leader would drop it (syncLimit).
            await Promise.race([ctx.canariesSettled(), sleep(8_000)]);
            await sleep(Math.max(0, 3 * STORE_TIMEOUT_MS - (Date.now() - t0)));
          } finally {
            member.thaw();
          }
          ctx.mark(`member ${member.id} resumed after ${Date.now() - t0} ms`);
          await ctx.canariesSettled();
          // Let it run what it held before the verdict.
          await zk.settled();
          await sleep(1000);
        },
        followers.map((m) => `127.0.0.1:${m.port}`),
      );
      expect(frozen).toBeDefined();
      expect(frozen).not.toBe(leader);
      expectSurvived(r, { errorsExpected: true });
    },
    SCENARIO_TIMEOUT_MS,
  );

  describe('through a relay per member (fault-relay.ts)', () => {
    let relays: FaultRelay[] = [];
    beforeAll(async () => {
      relays = await Promise.all(
        zk.members.map((m) => FaultRelay.start({ host: '127.0.0.1', port: m.port })),
      );
    });
    afterAll(async () => {
      await Promise.all(relays.map((r) => r.close()));
    });
    const viaRelays = (title: string, kind: string, inject: (ctx: FaultContext) => Promise<void>) =>
      run(
        title,
        kind,
        inject,
        relays.map((r) => r.address),
      );
    const heldBytes = () => relays.reduce((n, r) => n + r.heldBytes(), 0);
    const pendingBytes = () => relays.reduce((n, r) => n + r.pendingBytes(), 0);

    test(
      'bytes held during a partition and delivered after the proxy reconnected: nothing applies late',
      async () => {
        let delivered = 0;
        const r = await viaRelays(
          'bytes held, delivered after the proxy reconnected',
          'held',
          async (ctx) => {
            await ctx.stopWitnesses();
            const holding = relays.reduce((n, relay) => n + relay.hold(), 0);
            ctx.mark(`holding ${holding} connection(s)`);
            // Commits go out and get no answer: the store answers them with an error (and after two
            // timeouts in a row starts a new session; the old connection's bytes stay held).
            await sleep(2.5 * STORE_TIMEOUT_MS);
            for (const relay of relays) relay.refusing = true;
            for (const relay of relays) relay.cutClients();
            ctx.mark(`proxy cut off, ${heldBytes()} bytes held`);
            await sleep(500);
            for (const relay of relays) relay.refusing = false;
            ctx.mark('reconnects allowed');
            await ctx.canariesSettled();
            // Within the old session's timeout (10 s): ZooKeeper still runs what the old connection sends.
            for (const relay of relays) delivered += await relay.deliverHeld();
            ctx.mark(`${delivered} held bytes delivered`);
          },
        );
        expect(delivered).toBeGreaterThan(0);
        expectSurvived(r, { errorsExpected: true });
      },
      SCENARIO_TIMEOUT_MS,
    );

    test(
      'its connection frozen longer than the store timeout, then thawed: nothing applies late',
      async () => {
        const r = await viaRelays('the network frozen, then thawed', 'netfrozen', async (ctx) => {
          await ctx.stopWitnesses();
          for (const relay of relays) relay.freeze();
          ctx.mark('frozen');
          await sleep(2.5 * STORE_TIMEOUT_MS);
          ctx.mark(`thawing ${pendingBytes()} bytes`);
          for (const relay of relays) relay.thaw();
          await ctx.canariesSettled();
        });
        expectSurvived(r, { errorsExpected: true });
      },
      SCENARIO_TIMEOUT_MS,
    );

    test(
      'connections reset again and again: nothing acknowledged is lost',
      async () => {
        const r = await viaRelays('connections reset again and again', 'dropped', async (ctx) => {
          await ctx.stopWitnesses();
          for (let i = 0; i < 8; i++) {
            for (const relay of relays) relay.drop();
            await sleep(250);
          }
          ctx.mark('resets over');
          await ctx.canariesSettled();
        });
        // Whether a reset hits a commit that then runs out of time is chance.
        expect(r.violations).toEqual([]);
        expect(r.staleReads).toBe(0);
      },
      SCENARIO_TIMEOUT_MS,
    );
  });
});
