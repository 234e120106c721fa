// Issue 40 with Kafka's own Java client: a store outage never costs a consumer its group
// membership. Four Java 4.4 consumers, each in its own group: on the classic protocol with
// session.timeout.ms 10 s and 45 s, and on KIP-848's (group.protocol=consumer) with the group's
// consumer.session.timeout.ms 10 s and 45 s (the broker's default), consume on and on through the
// CLI proxy and commit what they consumed every 200 ms (commitSync, 3 s timeout), while the store
// goes away for 50 s, longer than every session: Redis frozen (SIGSTOP, then
// SIGCONT), Redis partitioned away (a relay between the proxy and Redis that stops forwarding and
// keeps every connection open, then forwards what it held), and the embedded store's disk full
// (a tmpfs filled to the last page, then freed). The three outages run at once, each with its own
// store and proxy, to keep the file's time near one outage. Then, after them, for 30 s (the issue's
// figure, three classic sessions), Redis killed (SIGKILL, restarted on its AOF) and ZooKeeper
// stopped (and started again on its data directory), at once: the stores whose connections close
// rather than hang; there two consumers each (classic 10 s, KIP-848 45 s), to spare the machine.
//
// Asserted for each consumer: no rebalance callback and the same member id and generation (member
// epoch) from before the outage to the end; every failed commit failed with a retriable exception,
// and commits failed while the store was away; commits are acknowledged again after it returns;
// what the coordinator (the proxy) and the store itself hold at the end is what the consumer last
// committed successfully (or a later commit whose answer it did not wait for). On the full disk,
// /readyz answers 503 naming the cause, and 200 again once space is freed. The figures are printed
// for docs/reliability.md; nothing here asserts a speed.
import { afterAll, beforeAll, describe, inject, test } from 'vitest';
import type { ExpectStatic } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import type { GroupProtocol } from '../bed/clients/java.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { JavaMember } from '../harness/java-member.js';
import type { MemberLine, PartitionOffset } from '../harness/java-member.js';
import { ensureBuilt } from '../harness/proxy.js';
import { pollReadiness, readyz } from '../harness/readiness-poll.js';
import { RecordFeeder } from '../harness/record-feeder.js';
import {
  expectReadinessNamedTheCause,
  OUTAGE_TITLES,
  OutageStores,
  spawnOutageProxy,
} from '../harness/store-outages.js';
import type { Outage, OutageKind } from '../harness/store-outages.js';

const brokerBootstrap = inject('kafkaBootstrap');
const classpath = inject('kafkaClasspath');
/** Longer than every session: 10 s and 45 s. */
const LONG_OUTAGE_MS = 50_000;
/** The outage: three 10 s sessions. */
const OUTAGE_MS = 30_000;

interface MemberKind {
  protocol: GroupProtocol;
  sessionMs: number;
}
const memberTag = (k: MemberKind) => `${k.protocol}-${k.sessionMs / 1000}s`;
/** Both protocols, each with a 10 s and a 45 s session. */
const EVERY_MEMBER: MemberKind[] = [
  { protocol: 'classic', sessionMs: 10_000 },
  { protocol: 'classic', sessionMs: 45_000 },
  { protocol: 'consumer', sessionMs: 10_000 },
  { protocol: 'consumer', sessionMs: 45_000 },
];
/** Under the 30 s outages: one of each protocol (ten JVMs at once starved the machine). */
const TWO_MEMBERS: MemberKind[] = [
  { protocol: 'classic', sessionMs: 10_000 },
  { protocol: 'consumer', sessionMs: 45_000 },
];

const key = (offsets: PartitionOffset[]): string =>
  JSON.stringify([...offsets].sort((a, b) => a.partition - b.partition));
const total = (offsets: PartitionOffset[]): number => offsets.reduce((n, o) => n + o.offset, 0);

/** Checks one member's run; returns its figures for the report line. */
function judge(
  expect: ExpectStatic,
  m: JavaMember,
  at: { downAt: number; upAt: number; backAt: number; stopAt: number },
  held: { coordinator: PartitionOffset[]; store: PartitionOffset[] },
): string {
  const explain = m.explain();
  const before = (l: MemberLine) => Number(l['t']) < at.stopAt;
  // Membership: one assignment, never revoked nor lost, until the member was told to stop
  // (closing revokes, as it should).
  const callbacks = m.lines.filter((l) => ['assigned', 'revoked', 'lost'].includes(l.type) && before(l));
  expect(
    callbacks.map((l) => l.type),
    explain,
  ).toEqual(['assigned']);
  // The same member id and generation (member epoch) from before the outage to the end.
  const identities = m.lines.filter((l) => l.type === 'member' && before(l));
  const atDown = identities.filter((l) => Number(l['t']) <= at.downAt).at(-1);
  expect(atDown, explain).toBeDefined();
  expect(Number(atDown!['generation']), explain).toBeGreaterThan(0);
  expect(
    identities.filter((l) => Number(l['t']) > at.downAt),
    explain,
  ).toEqual([]);

  const commits = m.commits().filter(before);
  const failed = commits.filter((c) => !c.ok);
  // Every failure is one the client retries (never UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
  // CommitFailedException...), and the store was really away: commits failed while it was.
  expect(
    failed.filter((c) => c.retriable !== true),
    explain,
  ).toEqual([]);
  const during = commits.filter((c) => c.started >= at.downAt && c.t <= at.upAt);
  expect(during.filter((c) => !c.ok).length, explain).toBeGreaterThan(0);

  // Nothing acknowledged lost: the coordinator and the store hold the last acknowledged commit,
  // or a later one the client gave up waiting for (its outcome unknown to the client). The member
  // commits until it reads "stop", so its last commits may come after stopAt.
  const acked = m.acked();
  const lastAck = acked.at(-1)!;
  const lastAckBefore = acked.filter((c) => c.t <= at.downAt).at(-1)!;
  const allowed = new Set(
    [lastAck, ...m.commits().filter((c) => c.n > lastAck.n)].map((c) => key(c.offsets)),
  );
  expect(allowed.has(key(held.coordinator)), `coordinator ${key(held.coordinator)}\n${explain}`).toBe(true);
  expect(key(held.store), `store, coordinator`).toBe(key(held.coordinator));
  // And the consumer got on: it committed further than before the outage.
  expect(total(lastAck.offsets), explain).toBeGreaterThan(total(lastAckBefore.offsets));

  const firstAfter = acked.find((c) => c.started >= at.upAt);
  const slowest = Math.max(0, ...during.map((c) => c.ms));
  const errors = [...new Set(failed.map((c) => String(c.error).replace(/^.*\./, '')))];
  return (
    `${m.protocol} ${m.sessionMs / 1000} s: ${during.length} commits during the outage, ${during.filter((c) => !c.ok).length} failed ` +
    `(${errors.join(', ')}), slowest ${slowest} ms; first acknowledged ${firstAfter ? Math.max(0, firstAfter.t - at.backAt) : -1} ms ` +
    `after the store was back; member ${String(atDown!['memberId']).slice(0, 12)} generation ${String(atDown!['generation'])}, unchanged`
  );
}

/** `ms`: how long the store stays away. */
async function runOutage(expect: ExpectStatic, o: Outage, ms: number, kinds: MemberKind[]): Promise<void> {
  const base = uniqueName(`java-outage-${o.name.replace(/\W+/g, '-')}`);
  const topic = (k: MemberKind) => `${base}-${memberTag(k)}`;
  await createTopics(
    { bootstrap: brokerBootstrap },
    kinds.map((k) => ({ topic: topic(k), partitions: 2 })),
  );
  const { proxy, http } = await spawnOutageProxy(brokerBootstrap, o);
  const feeder = await RecordFeeder.start(brokerBootstrap, kinds.map(topic));
  const members: JavaMember[] = [];
  const explainAll = () =>
    `${members.map((m) => m.explain()).join('\n')}\nproxy:\n${proxy.output().slice(-8000)}`;
  try {
    for (const k of kinds) {
      members.push(
        await JavaMember.start(classpath, proxy.bootstrap, {
          topic: topic(k),
          group: `${topic(k)}-g`,
          protocol: k.protocol,
          session: { ms: k.sessionMs, brokerBootstrap },
        }),
      );
    }
    await Promise.all(
      members.map((m) => m.ackedSince(0, 5, 'five acknowledged commits before the outage', 180_000)),
    );

    const downAt = Date.now();
    await o.down();
    // Readiness while the store is away (on the full disk: not ready, in the store's words).
    const seen = await pollReadiness(http, downAt + ms);
    const upAt = Date.now();
    await o.up();
    // The restart done (ZooKeeper's JVM takes seconds): "after the store was back" counts from here.
    const backAt = Date.now();
    await Promise.all(
      members.map((m) => m.ackedSince(upAt, 5, 'five acknowledged commits after the outage')),
    );
    const stopAt = Date.now();
    await Promise.all(members.map((m) => m.stop()));
    const readyAfter = await readyz(http);
    expect(proxy.child.exitCode, explainAll()).toBe(null);
    expect(proxy.output()).not.toMatch(/uncaught exception|unhandled/i);
    await proxy.stop();

    // Read directly, with room for a loaded machine (the store's default deadline is 1.5 s).
    const store = await openStore(o.directUrl, { operationTimeoutMs: 30_000 });
    const report: string[] = [];
    try {
      for (const m of members) {
        const readBack = m.lines.find((l) => l.type === 'committed');
        expect(readBack, m.explain()).toBeDefined();
        const coordinator = (readBack!['offsets'] as PartitionOffset[]).map(({ partition, offset }) => ({
          partition,
          offset,
        }));
        const group = `${topic({ protocol: m.protocol, sessionMs: m.sessionMs })}-g`;
        const stored = (await store.fetch(group, null)).map((s) => ({
          partition: s.partition,
          offset: Number(s.offset),
        }));
        report.push(judge(expect, m, { downAt, upAt, backAt, stopAt }, { coordinator, store: stored }));
      }
    } finally {
      await store.close();
    }
    const notReady = seen.filter((r) => r.status === 503);
    console.log(
      `[store-outage-java] ${o.name}, ${ms / 1000} s: ${report.join('; ')}; ` +
        `/readyz during: ${notReady.length} of ${seen.length} polls 503 (${notReady[0]?.body.slice(0, 200) ?? ''}), after: ${readyAfter.status}`,
    );
    if (o.checkReadiness) expectReadinessNamedTheCause(expect, seen, readyAfter);
  } catch (e) {
    throw new Error(`${String(e)}\n${explainAll()}`, { cause: e });
  } finally {
    for (const m of members) m.kill();
    await feeder.stop();
    await proxy.stop('SIGKILL');
  }
}

const LONG: OutageKind[] = ['redis-frozen', 'redis-partition', 'disk-full'];
/** The stores whose connections close rather than hang. */
const CLOSING: OutageKind[] = ['redis-killed', 'zookeeper-stop'];
let stores: OutageStores | undefined;
// The build (when a source is newer than dist/) runs here, once, not inside the tests' time: at a
// load average of 30 it took minutes.
beforeAll(async () => {
  await ensureBuilt();
  stores = await OutageStores.start([...LONG, ...CLOSING]);
}, 600_000);
afterAll(() => stores?.stop());

describe.concurrent(
  `a ${LONG_OUTAGE_MS / 1000} s store outage under committing Java consumers (classic and KIP-848, 10 s and 45 s sessions) costs them nothing`,
  () => {
    for (const kind of LONG) {
      test(OUTAGE_TITLES[kind], { timeout: 420_000 }, async ({ expect }) =>
        runOutage(expect, stores!.outage(kind), LONG_OUTAGE_MS, EVERY_MEMBER),
      );
    }
  },
);

// After the 50 s block, not beside it (a concurrent suite runs beside its concurrent siblings):
// five outages at once, ten JVMs, starve the machine; these two run at once with each other only.
describe(`a ${OUTAGE_MS / 1000} s store outage that closes the store's connections costs them nothing`, () => {
  for (const kind of CLOSING) {
    test.concurrent(OUTAGE_TITLES[kind], { timeout: 420_000 }, async ({ expect }) =>
      runOutage(expect, stores!.outage(kind), OUTAGE_MS, TWO_MEMBERS),
    );
  }
});
