// Issue 40: a store outage never costs a consumer its membership. librdkafka consumers (python
// confluent-kafka) commit every 200 ms through the CLI proxy while the store goes away for 50 s,
// longer than the longest session, five ways, each with its own store and proxy, all at once (to
// keep the file's time near one outage): Redis frozen (SIGSTOP); Redis partitioned away (a relay
// between the proxy and Redis that stops forwarding and keeps every connection open, then forwards
// what it held); Redis SIGKILLed and restarted; ZooKeeper stopped and started; the embedded store's
// disk full (a tmpfs filled to the last page, then freed). Under each, four members, each in its
// own group (test/harness/librdkafka-member.ts): Debian's librdkafka 2.0.2, classic, 10 s session;
// librdkafka 2.16.0 classic, 45 s; librdkafka 2.16.0 KIP-848 (group.protocol=consumer), the group's
// session 10 s and 45 s. A classic member's heartbeat answers queue behind its commits' on the one
// coordinator connection, so the proxy must answer the commits at once while the store is known to
// be down (proxy/offsets/store-circuit.ts). Asserted for each member: it keeps its assignment (no
// revocation, no lost partitions, no session timeout, the same member id), no commit fails with a
// code that costs membership, it commits again soon after the store is back, and the last
// acknowledged commit is what the coordinator and the store hold at the end. On the full disk,
// /readyz answers 503 naming the cause, and 200 again once space is freed.
//
// The figures (slowest failing commit, first commit after the return) are printed for
// docs/reliability.md; nothing here asserts a speed.
import { afterAll, beforeAll, describe, inject, test } from 'vitest';
import type { ExpectStatic } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { modernPython } from '../bed/clients/python-modern.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { LIBRDKAFKA_MEMBERS, LibrdkafkaMember } from '../harness/librdkafka-member.js';
import { ensureBuilt } from '../harness/proxy.js';
import { pollReadiness, readyz } from '../harness/readiness-poll.js';
import {
  expectReadinessNamedTheCause,
  OUTAGE_TITLES,
  OutageStores,
  spawnOutageProxy,
} from '../harness/store-outages.js';
import type { Outage, OutageKind } from '../harness/store-outages.js';
import { until } from '../reliability/fault-helpers.js';

const brokerBootstrap = inject('kafkaBootstrap');
/** Longer than the longest session (45 s): a stalled heartbeat would cost any member its place. */
const OUTAGE_MS = 50_000;
/** What a failed commit may answer: errors librdkafka retries without leaving the group. */
const RETRIABLE = new Set([
  'COORDINATOR_LOAD_IN_PROGRESS',
  'COORDINATOR_NOT_AVAILABLE',
  'NOT_COORDINATOR',
  'REQUEST_TIMED_OUT',
]);
/** Commit errors that mean the member lost its place in the group: never acceptable here. */
const MEMBERSHIP_LOST = /UNKNOWN_MEMBER|ILLEGAL_GEN|REBALANCE_IN_PROGRESS|FENCED|STALE_MEMBER_EPOCH/i;

const KINDS: OutageKind[] = [
  'redis-frozen',
  'redis-partition',
  'redis-killed',
  'zookeeper-stop',
  'disk-full',
];
let stores: OutageStores | undefined;
// The build (when a source is newer than dist/) and the modern librdkafka's venv (when
// bed:prefetch has not made it) are made here, once, not inside the tests' time: at a load
// average of 30 the build took minutes.
beforeAll(async () => {
  await Promise.all([ensureBuilt(), modernPython()]);
  stores = await OutageStores.start(KINDS);
}, 600_000);
afterAll(() => stores?.stop());

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/**
 * Checks one member's run; returns its figures for the report. Times are the test's Date.now():
 * the store was taken away at `downAt`, its return begun at `upAt` (a restart: Redis, ZooKeeper)
 * and complete at `backAt`.
 */
function judge(
  expect: ExpectStatic,
  m: LibrdkafkaMember,
  at: { downAt: number; upAt: number; backAt: number },
  storedOffsets: number[],
): string {
  const explain = m.explain();
  const commits = m.commits();
  const acked = m.acked();
  // A commit line arrives when the commit has returned: it was under way during the outage if it
  // returned after the store went away and started before it was back.
  const during = commits.filter((l) => l.at > at.downAt && l.at - Number(l['ms']) < at.upAt);
  const failed = during.filter((l) => l['ok'] !== true);
  const lastAck = acked.at(-1)!;
  const lastAckBefore = acked.filter((l) => l.at <= at.downAt).at(-1);
  const firstAckAfter = acked.find((l) => l.at > at.upAt);

  // Until the member was told to stop (closing revokes its partitions, as it should): assignments
  // only, never a revocation nor a loss (classic: one callback with both partitions; KIP-848's
  // incremental callbacks may add them one at a time), and one member id throughout.
  const stopAt = m.lines.find((l) => l.type === 'member')!.t;
  const callbacks = m.lines.filter((l) => ['assigned', 'revoked', 'lost'].includes(l.type) && l.t < stopAt);
  expect(
    callbacks.filter((l) => l.type !== 'assigned'),
    explain,
  ).toEqual([]);
  if (m.kind.protocol === 'classic') expect(callbacks.length, explain).toBe(1);
  expect(callbacks.flatMap((l) => l['partitions'] as number[]).sort(), explain).toEqual([0, 1]);
  const ids = new Set(m.lines.filter((l) => 'memberId' in l).map((l) => l['memberId']));
  expect(ids.size, explain).toBe(1);
  // No session timeout, and no error (a commit's included) that means the member was dropped.
  expect(
    m.lines.filter(
      (l) =>
        (l.type === 'client-error' && /session/i.test(String(l['message']))) ||
        (['client-error', 'commit'].includes(l.type) && MEMBERSHIP_LOST.test(String(l['code']))),
    ),
    explain,
  ).toEqual([]);
  // The store was really away: commits failed while it was, each with an error the client
  // retries on the same coordinator, and the open circuit answered them with the broker's "offsets
  // loading" (without it they wait the store deadline each and fail REQUEST_TIMED_OUT).
  expect(failed.length, explain).toBeGreaterThan(0);
  expect(
    failed.filter((l) => !RETRIABLE.has(String(l['code']))),
    explain,
  ).toEqual([]);
  expect(failed.filter((l) => l['code'] === 'COORDINATOR_LOAD_IN_PROGRESS').length, explain).toBeGreaterThan(
    0,
  );
  // Nothing acknowledged was lost: the coordinator (the proxy) and the store itself hold the last
  // acknowledged commit, and it is past what was acknowledged before the outage.
  expect(firstAckAfter, explain).toBeDefined();
  expect(lastAckBefore, explain).toBeDefined();
  const offsets = m.lines.find((l) => l.type === 'committed')!['offsets'] as Record<string, number>;
  expect(Object.values(offsets), explain).toEqual([lastAck['offset'], lastAck['offset']]);
  expect(storedOffsets, explain).toEqual([Number(lastAck['offset']), Number(lastAck['offset'])]);
  expect(Number(lastAck['offset'])).toBeGreaterThan(Number(lastAckBefore!['offset']));

  const codes = [...new Set(failed.map((l) => String(l['code'])))];
  const failedMs = failed.map((l) => Number(l['ms']));
  return (
    `${m.kind.label}: ${during.length} commits during, ${failed.length} failed (${codes.join(', ')}), ` +
    `slowest failing ${Math.max(0, ...failedMs)} ms, median ${median(failedMs)} ms; first acknowledged ` +
    `${Math.max(0, firstAckAfter!.at - at.backAt)} ms after the store was back; ${callbacks.length} assignment callback(s)`
  );
}

async function runOutage(expect: ExpectStatic, o: Outage): Promise<void> {
  const base = uniqueName(`store-outage-${o.name.replace(/\W+/g, '-')}`);
  const topic = (tag: string) => `${base}-${tag}`;
  await createTopics(
    { bootstrap: brokerBootstrap },
    LIBRDKAFKA_MEMBERS.map((k) => ({ topic: topic(k.tag), partitions: 2 })),
  );
  const { proxy, http } = await spawnOutageProxy(brokerBootstrap, o);
  const members: LibrdkafkaMember[] = [];
  const explainAll = () =>
    `${members.map((m) => m.explain()).join('\n')}\nproxy:\n${proxy.output().slice(-6000)}`;
  try {
    for (const kind of LIBRDKAFKA_MEMBERS) {
      const t = topic(kind.tag);
      members.push(await LibrdkafkaMember.start(kind, brokerBootstrap, proxy.bootstrap, t, `${t}-group`));
    }
    await until(
      () => members.every((m) => m.acked().length >= 10),
      `${o.name}: ten acknowledged commits by each member`,
      120_000,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${explainAll()}`);
    });
    const downAt = Date.now();
    await o.down();
    const seen = await pollReadiness(http, downAt + OUTAGE_MS);
    const upAt = Date.now();
    await o.up();
    const backAt = Date.now();
    await until(
      () => members.every((m) => m.acked().filter((l) => l.at - Number(l['ms']) >= backAt).length >= 10),
      `${o.name}: ten commits by each member acknowledged after the store is back`,
      120_000,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${explainAll()}`);
    });
    const readyAfter = await readyz(http);
    for (const m of members) m.stop();
    await until(
      () => members.every((m) => m.lines.some((l) => l.type === 'committed')),
      'the read-backs',
      60_000,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${explainAll()}`);
    });
    expect(proxy.child.exitCode, explainAll()).toBe(null);
    expect(proxy.output()).not.toMatch(/uncaught exception|unhandled/i);
    await proxy.stop();

    // Read directly, with room for a loaded machine (the store's default deadline is 1.5 s).
    const store = await openStore(o.directUrl, { operationTimeoutMs: 30_000 });
    const report: string[] = [];
    try {
      for (const m of members) {
        const stored = (await store.fetch(m.group, null)).map((s) => Number(s.offset));
        report.push(judge(expect, m, { downAt, upAt, backAt }, stored));
      }
    } finally {
      await store.close();
    }
    const notReady = seen.filter((r) => r.status === 503);
    console.log(
      `[store-outage] ${o.name}, ${OUTAGE_MS / 1000} s: ${report.join('; ')}; ` +
        `/readyz during: ${notReady.length} of ${seen.length} polls 503, after: ${readyAfter.status}`,
    );
    if (o.checkReadiness) expectReadinessNamedTheCause(expect, seen, readyAfter);
  } finally {
    for (const m of members) m.kill();
    await proxy.stop('SIGKILL');
  }
}

describe.concurrent(
  `a ${OUTAGE_MS / 1000} s store outage under committing librdkafka consumers (classic and KIP-848) costs them nothing`,
  () => {
    for (const kind of KINDS) {
      test(OUTAGE_TITLES[kind], { timeout: 420_000 }, async ({ expect }) =>
        runOutage(expect, stores!.outage(kind)),
      );
    }
  },
);
