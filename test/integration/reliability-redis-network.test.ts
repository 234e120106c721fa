// Issue #20, an answered commit is final, Redis: the CLI proxy reaches Redis through a relay
// (test/reliability/fault-relay.ts) that freezes, resets, or holds bytes and delivers them late
// on the old connections after the proxy reconnected. Main groups commit all along, witness
// groups stop before the fault, canary groups stop right after their first acknowledged commit
// once the fault is over, before anything held back reaches Redis; then the store is read
// directly: nothing acknowledged may be missing or rewound, and the proxy answers no canary
// with less than it acknowledged.
import { afterAll, beforeAll, describe, inject, test } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { startRedis } from '../bed/redis.js';
import type { RedisServer } from '../bed/redis.js';
import { sleep } from '../reliability/commit-checker.js';
import { FaultRelay } from '../reliability/fault-relay.js';
import { expectSurvived, runStoreFault } from '../reliability/store-faults.js';
import type { FaultContext } from '../reliability/store-faults.js';

const brokerBootstrap = inject('kafkaBootstrap');
const STORE_TIMEOUT_MS = 1000;
/** A scenario takes 20-40 s on an idle machine; allow for a loaded one. */
const SCENARIO_TIMEOUT_MS = 300_000;

const names = (topic: string, kind: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${topic}-${kind}-${i}`);

describe('Redis behind a misbehaving network hop', () => {
  let redis: RedisServer;
  let relay: FaultRelay;
  beforeAll(async () => {
    redis = await startRedis({ appendfsync: 'always' });
    relay = await FaultRelay.start({ host: redis.host, port: redis.port });
  });
  afterAll(async () => {
    await relay?.close();
    await redis?.kill();
  });

  const scenario = (
    title: string,
    kind: string,
    errorsExpected: boolean,
    inject: (ctx: FaultContext) => Promise<void>,
  ) =>
    test(
      title,
      async () => {
        const topic = uniqueName(`redis-${kind}`);
        const r = await runStoreFault({
          name: `Redis, ${title}`,
          brokerBootstrap,
          store: `redis://${relay.address}`,
          open: () => openStore(redis.url),
          storeTimeoutMs: STORE_TIMEOUT_MS,
          acks: 80,
          topic,
          groups: names(topic, 'main', 4),
          witnesses: names(topic, 'witness', 4),
          canaries: names(topic, 'canary', 24),
          inject,
        });
        expectSurvived(r, { errorsExpected });
      },
      SCENARIO_TIMEOUT_MS,
    );

  scenario(
    'bytes held during a partition and delivered after the proxy reconnected: nothing applies late',
    'held',
    true,
    async (ctx) => {
      await ctx.stopWitnesses();
      relay.hold();
      ctx.mark('holding');
      // Commits go out and get no answer: the store answers them with an error.
      await sleep(2.5 * STORE_TIMEOUT_MS);
      // The proxy's connection breaks and stays broken for a while (ioredis gives up on what it
      // had sent), then it reconnects through a fresh connection.
      relay.refusing = true;
      relay.cutClients();
      ctx.mark(`proxy cut off, ${relay.heldBytes()} bytes held`);
      await sleep(500);
      relay.refusing = false;
      ctx.mark('reconnects allowed');
      await ctx.canariesSettled();
      const bytes = await relay.deliverHeld();
      ctx.mark(`${bytes} held bytes delivered`);
    },
  );

  scenario('frozen longer than --store-timeout-ms, then thawed', 'frozen', true, async (ctx) => {
    await ctx.stopWitnesses();
    relay.freeze();
    ctx.mark('frozen');
    await sleep(2.5 * STORE_TIMEOUT_MS);
    ctx.mark(`thawing ${relay.pendingBytes()} bytes`);
    relay.thaw();
    await ctx.canariesSettled();
  });

  // ioredis reconnects and resends within the deadline: most commits see no error (a reset that
  // hits a commit whose validity then runs out is answered with one; which ones is chance).
  scenario('connections reset again and again', 'dropped', false, async (ctx) => {
    await ctx.stopWitnesses();
    for (let i = 0; i < 8; i++) {
      relay.drop();
      await sleep(250);
    }
    ctx.mark('resets over');
    await ctx.canariesSettled();
  });
});
