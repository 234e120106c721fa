// Issue #43, the Redis chaos run's loss, sequence (b) of docs/reliability-chaos-runs.md: a commit
// script that a network hop held is delivered late, within its validity, after the store's client
// reconnected and a newer commit of the same group was acknowledged on the new connection.
//
// The real RedisStore reaches a real redis-server through a FaultRelay (test/reliability/
// fault-relay.ts). Each step waits for an observable event (bytes in the relay, the store's
// connection problem, an answer, the server's answer to a request behind the held bytes), never
// for a time: the only time involved is the held commit's validity, three quarters of the store
// timeout, and the test checks that the held bytes reached Redis well within it.
//
// What happens to the unanswered commit depends on how the client lost its connection:
// - one reset, and the first reconnect succeeds: ioredis sends the unanswered commit again on the
//   new connection, before anything issued later; the late copy finds the commit's request record
//   and writes nothing (the first test; it fails when the script's resend check is removed);
// - a reset and a first reconnect that fails before it connects (nothing listening, as while a
//   server restarts): ioredis gives up on the commands it had sent (maxRetriesPerRequest 1) and
//   does not send them again, so nothing in Redis records the held commit before its late copy
//   runs, and it applies over the newer one. Only the proxy knows which of two commits it read
//   first (a store caller that says nothing about it gets last-applied-wins), so this case is
//   tested through the CLI proxy and a Kafka client that gives up on its connection and commits
//   again on a new one: what the consumer would read after a restart (the second test).
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisStore } from '../../backends/redis-store.js';
import type { CommitOutcome, OffsetWrite } from '../../backends/store.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { freePort } from '../bed/ports.js';
import { waitUntil } from '../bed/process.js';
import { httpCall } from '../harness/http-call.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import { RawClient } from '../harness/raw-client.js';
import { commitOnce, fetchOnce } from '../reliability/commit-checker.js';
import { until } from '../reliability/fault-helpers.js';
import { FaultRelay } from '../reliability/fault-relay.js';

const redisUrl = inject('redisUrl');
const brokerBootstrap = inject('kafkaBootstrap');
/** The held commit stays valid for about 3/4 of this (redis-store.ts): far longer than the steps take. */
const STORE_TIMEOUT_MS = 30_000;

const at = (offset: bigint): OffsetWrite => ({
  topic: 't',
  partition: 0,
  offset,
  leaderEpoch: 1,
  metadata: '',
  commitTimestamp: 1n,
  expireTimestamp: -1n,
});

/** ECHO <token> in RESP, and its answer: sent behind the held bytes, answered after they ran. */
function echo(token: string): { request: Buffer; reply: Buffer } {
  return {
    request: Buffer.from(`*2\r\n$4\r\nECHO\r\n$${token.length}\r\n${token}\r\n`),
    reply: Buffer.from(`$${token.length}\r\n${token}\r\n`),
  };
}

describe('Redis: a commit script a hop delivers late, after a newer commit was acknowledged', () => {
  let relay: FaultRelay;
  let store: RedisStore;
  /** Reads what a fresh client would see, not through the relay. */
  let direct: RedisStore;
  beforeAll(async () => {
    const { hostname, port } = new URL(redisUrl);
    relay = await FaultRelay.start({ host: hostname, port: Number(port) });
    store = new RedisStore(`redis://${relay.address}`, { operationTimeoutMs: STORE_TIMEOUT_MS });
    direct = new RedisStore(redisUrl);
  });
  afterAll(async () => {
    await store?.close();
    await direct?.close();
    await relay?.close();
  });

  const commit = (group: string, offset: bigint): Promise<CommitOutcome> =>
    store.commit({ group, writes: [at(offset)], requestId: `${group}-${offset}` });
  const stored = async (group: string) => (await direct.fetch(group, null)).map((o) => o.offset);

  /** Commits 100, then 200 with its script held in the relay; returns 200's answer, still pending. */
  async function holdCommit200(group: string): Promise<{ answer: Promise<unknown>; sentAt: number }> {
    expect(await commit(group, 100n)).toEqual({ status: 'ok' });
    relay.hold();
    const sentAt = performance.now();
    const answer = commit(group, 200n).catch((err: unknown) => err);
    await until(() => relay.heldBytes() > 0, 'the commit of 200 held in the relay');
    return { answer, sentAt };
  }

  /** Delivers the held script on its old connection; resolves once Redis has run it. */
  async function deliverLate(sentAt: number, token: string): Promise<void> {
    const { request, reply } = echo(token);
    expect(await relay.deliverHeldThen(request, reply)).toBeGreaterThan(0);
    // Well within the held commit's validity, or this test shows nothing.
    expect(performance.now() - sentAt, 'the held script reached Redis within its validity').toBeLessThan(
      STORE_TIMEOUT_MS / 2,
    );
  }

  it('resent on the new connection before the newer commit: the late copy writes nothing', async () => {
    const group = uniqueName('late-resent');
    const { answer, sentAt } = await holdCommit200(group);
    // The store's connection is reset; ioredis reconnects at once. 300 is issued before it has,
    // so it goes out after whatever ioredis sends again.
    relay.cutClients();
    expect(await commit(group, 300n)).toEqual({ status: 'ok' });
    expect(await answer).toEqual({ status: 'ok' });
    expect(await stored(group)).toEqual([300n]);
    await deliverLate(sentAt, group);
    expect(await stored(group)).toEqual([300n]);
  });
});

// Through the CLI proxy and a Kafka client: the consumer's connection stalls with its
// commit of 200 unanswered, it gives up on that connection and commits 300 on a new one, which is
// acknowledged; then the held script reaches Redis.
describe('through the proxy: a commit held past its client connection, then a newer one', () => {
  it('the newer acknowledged commit is what OffsetFetch answers afterwards', async () => {
    await ensureBuilt();
    const topic = uniqueName('late-proxy');
    const group = `${topic}-g`;
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const { hostname, port } = new URL(redisUrl);
    const relay = await FaultRelay.start({ host: hostname, port: Number(port) });
    const httpPort = await freePort();
    const proxy = await spawnProxy([
      '--bootstrap-server',
      brokerBootstrap,
      '--store',
      `redis://${relay.address}`,
      '--store-timeout-ms',
      String(STORE_TIMEOUT_MS),
      '--http',
      `127.0.0.1:${httpPort}`,
    ]);
    const readyz = async () => httpCall(httpPort, 'GET', '/readyz');
    const first = await RawClient.connect(proxy.bootstrap);
    let second: RawClient | undefined;
    try {
      expect(await commitOnce(first, group, topic, 1, 100n)).toEqual([0]);
      relay.hold();
      const sentAt = performance.now();
      const unanswered = commitOnce(first, group, topic, 1, 200n).catch((err: unknown) => err);
      // The commit script itself (its packed write "200|-1|..."), not some other command.
      await until(() => relay.heldContains('200|-1|'), 'the commit script of 200 held in the relay');
      relay.closePort();
      relay.cutClients();
      await waitUntil(
        '/readyz naming the refused reconnect',
        async () => /refused/.test((await readyz()).text),
        {
          timeoutMs: 60_000,
          intervalMs: 50,
        },
      );
      await relay.openPort();
      await waitUntil('the proxy ready again', async () => (await readyz()).status === 200, {
        timeoutMs: 60_000,
        intervalMs: 50,
      });
      // The consumer gave up on its first connection (as after a request timeout).
      first.close();
      second = await RawClient.connect(proxy.bootstrap);
      expect(await commitOnce(second, group, topic, 1, 300n)).toEqual([0]);
      const { request, reply } = echo(group);
      expect(await relay.deliverHeldThen(request, reply)).toBeGreaterThan(0);
      expect(performance.now() - sentAt, 'the held script reached Redis within its validity').toBeLessThan(
        STORE_TIMEOUT_MS / 2,
      );
      const fetched = await fetchOnce(second, group, topic, 1);
      expect(fetched.offsets.get(0)).toBe(300n);
      // The first connection is closed: 200 got no answer at all.
      expect(await unanswered).toBeInstanceOf(Error);
    } finally {
      first.close();
      second?.close();
      await proxy.stop();
      await relay.close();
    }
  });
});
