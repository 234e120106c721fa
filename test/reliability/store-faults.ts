// The store-fault scenario of reliability-stores.test.ts: the CLI proxy in front of the bed's
// broker on a store, CommitChecker groups committing through it, a fault injected into the store,
// and the figures: what clients saw, how long until every group committed again, the proxy's RSS,
// and the checker's verdict read from the store directly.
//
// Two kinds of groups. The main groups commit through the whole run: they show the error codes
// and the recovery. But their later commits overwrite whatever the fault did to earlier ones (the
// checker compares the end state), so a loss at the fault would not show in them. The witness
// groups stop committing at the moment the fault chooses (just before the kill): their last
// acknowledged offsets must survive the fault itself, and nothing written later can hide a loss.
// Canary groups (optional) commit until the fault is over and then stop right after their first
// acknowledged commit: a commit answered with an error during the fault that the store applies
// later (a resend, bytes held by the network, a frozen server that resumes) would rewind them.
import { expect } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import { CommitChecker, readThroughProxy, rssOf } from './commit-checker.js';
import type { Violation } from './commit-checker.js';
import { storeReader, until } from './fault-helpers.js';

export interface FaultContext {
  /** Stops the witness groups (waits for their commits in flight). */
  stopWitnesses(): Promise<void>;
  /**
   * The fault is over for clients: every canary group commits until one is acknowledged, and
   * stops. Resolves once all have (the fault may then deliver what it held back).
   */
  canariesSettled(): Promise<void>;
  /** Records a moment of the fault for the report ("promoted", ...), in ms since it began. */
  mark(event: string): void;
  /** The witness groups' acknowledged commits so far. */
  witnessAcks(): number;
  /** The main groups' acknowledged commits so far (whether the proxy goes on during a fault). */
  mainAcks(): number;
  /** How many witness groups commit. */
  readonly witnessGroups: number;
  /** The proxy process (to find its store connections). */
  proxyPid: number;
}

export interface StoreFaultOptions {
  name: string;
  brokerBootstrap: string;
  /** The proxy's --store URL. */
  store: string;
  /** Opens the store for the verdict (default: openStore(store)). */
  open?: () => Promise<OffsetStore>;
  /**
   * Reads the verdict's offsets instead of `open` (a reader that does not share the proxy's store
   * code): a group's partition -> offset.
   */
  readStored?: (group: string) => Promise<Map<number, bigint>>;
  /** More options for the proxy (e.g. --http for its /readyz). */
  proxyArgs?: string[];
  topic: string;
  groups: string[];
  witnesses: string[];
  canaries?: string[];
  partitions?: number;
  /** The proxy's --store-timeout-ms (default 1000). */
  storeTimeoutMs?: number;
  /** Acknowledged commits before the fault and again after recovery (default 150). */
  acks?: number;
  /** The fault; returns once the store is back (restarted, failed over, ...). */
  inject(ctx: FaultContext): Promise<void>;
}

export interface StoreFaultResult {
  checker: CommitChecker;
  witness: CommitChecker;
  canary: CommitChecker;
  /** Of the main groups, the witnesses and the canaries, from the store read directly after the run. */
  violations: Violation[];
  /** Canary partitions the proxy answered, after the fault, with less than their last acknowledged offset. */
  staleReads: number;
  /** Partition answers with an error code from the fault's start to the main groups' recovery. */
  errorsDuringFault: Record<number, number>;
  events: Record<string, number>;
  /** From the end of inject() until every main group had a commit acknowledged again. */
  recoveryMs: number;
  rss: { before: number; duringMax: number; after: number };
  proxyExitCode: number | null;
  line: string;
}

const mb = (n: number) => (n / 1024 / 1024).toFixed(0);

function errorDiff(after: Record<number, number>, before: Record<number, number>): Record<number, number> {
  const out: Record<number, number> = {};
  for (const [code, n] of Object.entries(after)) {
    const d = n - (before[Number(code)] ?? 0);
    if (d > 0) out[Number(code)] = d;
  }
  return out;
}

export async function runStoreFault(o: StoreFaultOptions): Promise<StoreFaultResult> {
  await ensureBuilt();
  // Commits to a topic the cluster lacks are refused, as a broker refuses them.
  await createTopics({ bootstrap: o.brokerBootstrap }, [{ topic: o.topic, partitions: o.partitions ?? 2 }]);
  const proxy = await spawnProxy([
    '--bootstrap-server',
    o.brokerBootstrap,
    '--store',
    o.store,
    '--store-timeout-ms',
    String(o.storeTimeoutMs ?? 1000),
    ...(o.proxyArgs ?? []),
  ]);
  const pid = proxy.child.pid!;
  const partitions = o.partitions ?? 2;
  const acks = o.acks ?? 150;
  const target = () => proxy.bootstrap;
  const checker = new CommitChecker({ target, groups: o.groups, topic: o.topic, partitions });
  const witness = new CommitChecker({ target, groups: o.witnesses, topic: o.topic, partitions });
  const canary = new CommitChecker({ target, groups: o.canaries ?? [], topic: o.topic, partitions });
  const rssSamples: number[] = [];
  // When the main groups got error answers (ms since the fault began), to 100 ms.
  let t0 = 0;
  let errorCount = 0;
  const errorSpan: number[] = [];
  const errorTotal = () => Object.values(checker.stats.errors).reduce((a, b) => a + b, 0);
  const sampler = setInterval(() => {
    try {
      rssSamples.push(rssOf(pid));
    } catch {
      // the proxy died: the exit code below says so
    }
    if (t0 > 0 && errorTotal() !== errorCount) {
      errorCount = errorTotal();
      errorSpan[errorSpan.length === 0 ? 0 : 1] = Date.now() - t0;
    }
  }, 100);
  let store: OffsetStore | undefined;
  try {
    checker.start();
    witness.start();
    canary.start();
    await checker.waitForAcks(acks);
    await witness.waitForAcks(acks / 2);
    if (o.canaries !== undefined) await canary.waitForAcks(acks / 2);
    const rssBefore = rssOf(pid);
    rssSamples.length = 0;
    const errorsBefore = { ...checker.stats.errors };
    errorCount = errorTotal();
    t0 = Date.now();
    const events: Record<string, number> = {};
    let witnessesStopped = false;
    const stopWitnesses = async () => {
      if (witnessesStopped) return;
      witnessesStopped = true;
      await witness.stop();
      events['witnesses stopped'] = Date.now() - t0;
    };
    let settling: Promise<void> | undefined;
    const canariesSettled = () =>
      (settling ??= canary.stopAfterNextAck().then(() => {
        events['canaries settled'] = Date.now() - t0;
      }));
    await o.inject({
      stopWitnesses,
      canariesSettled,
      mark: (e) => (events[e] = Date.now() - t0),
      witnessAcks: () => witness.acknowledged,
      mainAcks: () => checker.acknowledged,
      witnessGroups: o.witnesses.length,
      proxyPid: pid,
    });
    await stopWitnesses();
    const back = Date.now();
    events['store back'] = back - t0;
    const tally = (g: string) => checker.tallies.get(g)!.acked[0]!;
    const ackedAtBack = new Map(o.groups.map((g) => [g, tally(g)]));
    await until(
      () => o.groups.every((g) => tally(g) > ackedAtBack.get(g)!),
      'every main group committing again',
      30_000,
    );
    const recoveryMs = Date.now() - back;
    const errorsDuringFault = errorDiff(checker.stats.errors, errorsBefore);
    if (errorSpan.length > 0) events['main groups got errors from'] = errorSpan[0]!;
    if (errorSpan.length > 1) events['... to'] = errorSpan[1]!;
    const duringMax = Math.max(rssBefore, ...rssSamples);
    await checker.waitForAcks(acks);
    await checker.stop();
    await canary.stop();
    // What the proxy answers now, after whatever the fault held back has reached the store.
    let staleReads = 0;
    for (const [g, tally] of canary.tallies) {
      const got = await readThroughProxy(proxy.bootstrap, g, o.topic, partitions);
      tally.acked.forEach((acked, p) => {
        if ((got.get(p) ?? -1n) < acked) staleReads++;
      });
    }
    const rssAfter = rssOf(pid);
    const proxyExitCode = proxy.child.exitCode;
    await proxy.stop();
    let read = o.readStored;
    if (read === undefined) {
      store = await (o.open ?? (() => openStore(o.store)))();
      read = storeReader(store);
    }
    const violations = [
      ...(await checker.verify(read)),
      ...(await witness.verify(read)),
      ...(await canary.verify(read)),
    ];
    const timeline = Object.entries(events)
      .sort((a, b) => a[1] - b[1])
      .map(([e, ms]) => `${e} ${ms}`)
      .join(', ');
    const line =
      `[faults] ${o.name}: main groups ${checker.summary()}; witnesses ${witness.summary()}; ` +
      (o.canaries === undefined
        ? ''
        : `canaries ${canary.summary()}, ${staleReads} stale reads through the proxy after the fault; `) +
      `fault timeline (ms): ${timeline}; errors during the fault ${JSON.stringify(errorsDuringFault)}; ` +
      `every main group committing again ${recoveryMs} ms after the store was back; ` +
      `proxy VmRSS before/max during/after ${mb(rssBefore)}/${mb(duringMax)}/${mb(rssAfter)} MB; ` +
      `violations ${violations.length}` +
      (violations.length === 0
        ? ''
        : ` (acknowledged commits missing per partition: ${violations
            .map((v) => String(v.stored === null ? v.acked : v.acked - v.stored))
            .join(' ')})`);
    console.log(line);
    return {
      checker,
      witness,
      canary,
      violations,
      staleReads,
      errorsDuringFault,
      events,
      recoveryMs,
      rss: { before: rssBefore, duringMax, after: rssAfter },
      proxyExitCode,
      line,
    };
  } finally {
    clearInterval(sampler);
    await checker.stop();
    await witness.stop();
    await canary.stop();
    await proxy.stop('SIGKILL');
    await store?.close();
  }
}

/**
 * What every store fault must show: nothing acknowledged lost; only retriable codes (REQUEST_TIMED_OUT
 * 7, COORDINATOR_NOT_AVAILABLE 15, COORDINATOR_LOAD_IN_PROGRESS 14 from the open store circuit) and never a dropped connection; the CLI still running; its RSS
 * bounded (+100 MB at most, during and after).
 */
export function expectSurvived(r: StoreFaultResult, opts: { errorsExpected: boolean }): void {
  expect(r.violations).toEqual([]);
  expect(r.staleReads).toBe(0);
  expectLive(r, opts);
}

/** The same without the verdict (for a run whose loss is the point). */
export function expectLive(r: StoreFaultResult, opts: { errorsExpected: boolean }): void {
  for (const c of [r.checker, r.witness, r.canary]) {
    expect(Object.keys(c.stats.errors).map(Number)).toSatisfy((codes: number[]) =>
      codes.every((code) => code === 7 || code === 14 || code === 15),
    );
    expect(c.stats.unanswered).toBe(0);
    expect(c.stats.reconnects).toBe(0);
  }
  if (opts.errorsExpected) expect(Object.keys(r.errorsDuringFault).length).toBeGreaterThan(0);
  expect(r.proxyExitCode).toBe(null);
  expect(r.rss.duringMax - r.rss.before).toBeLessThan(100 * 1024 * 1024);
  expect(r.rss.after - r.rss.before).toBeLessThan(100 * 1024 * 1024);
}
