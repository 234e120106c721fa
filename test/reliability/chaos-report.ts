/** The chaos run's verdict and report: a table per fault and per consumer group, one RESULT line. */
import os from 'node:os';
import { faultTable, groupTable, unexplainedUnready, unreadyWithin } from './chaos-checker.js';
import type { ReadBack, SecondSample } from './chaos-checker.js';
import type { GroupReport } from './chaos-consumers.js';
import type { FaultRecord } from './chaos-faults.js';
import type { ChaosProxy, RssSummary } from './chaos-proxy.js';
import { memoryReason } from './chaos-memory.js';
import { attributeRebalances, rebalanceReasons, rebalanceTable } from './chaos-rebalances.js';
import type { RebalanceAttribution } from './chaos-rebalances.js';
import type { Shared } from './load-connection.js';
import { unreadyReasonsInWarmUp, warmUp, warmUpReasons } from './chaos-warmup.js';
import type { WarmUpMarks } from './chaos-warmup.js';

/**
 * Unready time (503, or nothing listening) within this long after a fault ended counts as the
 * fault's: a restarted proxy's first readiness check, the store circuit's next probe, the
 * broker's leadership settling. /readyz polls left unanswered are reported, not counted.
 */
export const UNREADY_GRACE_S = 15;

export interface ChaosInputs {
  options: object;
  measuredS: number;
  faults: FaultRecord[];
  series: SecondSample[];
  proxies: ChaosProxy[];
  shareds: Shared[];
  groups: GroupReport[];
  produced: number;
  producerErrors: number | null;
  proxyRead: ReadBack;
  storeRead: ReadBack;
  rss: RssSummary[];
  warnings: Record<string, number>[];
  exitCodes: (number | null)[];
  negativeControl: number | null;
  /** Fault kinds of this store the machine could not inject, and why. */
  leftOut: { kind: string; why: string }[];
  warmUp: WarmUpMarks;
}

export interface ChaosResult {
  ok: boolean;
  reasons: string[];
  /** The tables and the RESULT line. */
  report: string;
  resultLine: string;
  lostDirect: number;
  lostViaProxy: number;
  staleReads: number;
  faults: FaultRecord[];
  groups: GroupReport[];
  unexplainedUnreadyS: number;
  /** The warm-up's end on the run's clock (null: never) and the unready seconds in it, per proxy. */
  warmUpS: number | null;
  unreadyInWarmUpS: number[];
  /** /readyz polls without an answer in time, outside faults: the machine's, reported only. */
  unansweredOutsideFaultsS: number;
  rebalances: RebalanceAttribution[];
  load: {
    sent: number;
    acked: number;
    failed: number;
    failures: Record<string, number>;
    errorCodes: Record<number, number>;
  };
  rss: ChaosInputs['rss'];
  /** With the negative control: partitions reported lost after one group was deleted (5 expected). */
  negativeControlLost: number | null;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

function merge(records: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of records) for (const [k, v] of Object.entries(r)) out[k] = (out[k] ?? 0) + v;
  return out;
}

export function faultTableAndVerdict(i: ChaosInputs): ChaosResult {
  const totals = i.shareds.map((s) => s.totals);
  const failures = merge(totals.map((t) => t.failures));
  const errorCodes = merge(totals.map((t) => t.errorCodes as Record<string, number>));
  // A stale read: an OffsetFetch answer older than a commit acknowledged before it was sent
  // (staleFetches), or below the group's lowest acknowledged offset at the time ("fetched offset wrong").
  const staleReads = sum(totals.map((t) => t.staleFetches)) + (failures['fetched offset wrong'] ?? 0);
  const warm = warmUp(
    i.warmUp,
    i.proxies.map((p) => p.name),
    i.groups.map((g) => g.kind),
  );
  // A run that never warmed up is judged from its start (and fails on that too).
  const countFromS = Math.min(warm.endS ?? 0, i.measuredS);
  const unreadyInWarmUpS = i.proxies.map((p) => unreadyWithin(p.unready, 0, countFromS));
  const warmReasons = [...new Set(i.proxies.flatMap((p) => unreadyReasonsInWarmUp(p.unready, countFromS)))];
  const unready = unexplainedUnready(
    i.proxies.flatMap((p) => p.unready),
    i.faults,
    UNREADY_GRACE_S,
    i.measuredS,
    countFromS,
  );
  // What the injected faults alone leave unexplained: how much the store's own events explain.
  const unreadyOutsideInjected = unexplainedUnready(
    i.proxies.flatMap((p) => p.unready),
    i.faults.filter((f) => !f.kind.startsWith('sentinel-')),
    UNREADY_GRACE_S,
    i.measuredS,
    countFromS,
  );
  const unanswered = unexplainedUnready(
    i.proxies.flatMap((p) => p.unanswered),
    i.faults,
    UNREADY_GRACE_S,
    i.measuredS,
    countFromS,
  );
  const rebalances = attributeRebalances(i.groups, i.faults);
  const reasons: string[] = [];
  const lostDirect = i.storeRead.lost.length + i.storeRead.consumerLost.length;
  const lostViaProxy = i.proxyRead.lost.length + i.proxyRead.consumerLost.length;
  if (lostDirect > 0)
    reasons.push(
      `${lostDirect} partitions below an acknowledged commit in the store: ${JSON.stringify([...i.storeRead.lost.slice(0, 3), ...i.storeRead.consumerLost.slice(0, 3)])}`,
    );
  if (lostViaProxy > 0)
    reasons.push(
      `${lostViaProxy} partitions below an acknowledged commit through a fresh proxy: ${JSON.stringify([...i.proxyRead.lost.slice(0, 3), ...i.proxyRead.consumerLost.slice(0, 3)])}`,
    );
  if (staleReads > 0) reasons.push(`${staleReads} stale OffsetFetch answers`);
  for (const g of i.groups) {
    if (g.missing > 0) reasons.push(`${g.kind}: ${g.missing} acknowledged records never consumed`);
    if (g.duplicatesOutsideWindow > 0)
      reasons.push(
        `${g.kind}: ${g.duplicatesOutsideWindow} duplicates below an acknowledged commit (${g.outsideExamples.join('; ')})`,
      );
  }
  if (unready.seconds > 0)
    reasons.push(
      `unready for ${unready.seconds.toFixed(1)} s outside any fault: ${unready.examples.slice(0, 3).join('; ')}`,
    );
  reasons.push(...warmUpReasons(warm));
  reasons.push(...rebalanceReasons(rebalances));
  const observed = i.faults.filter((f) => f.kind.startsWith('sentinel-')).length;
  const injected = i.faults.length - observed;
  const failedInjections = i.faults.filter((f) => f.note.includes('injection error'));
  if (failedInjections.length > 0)
    reasons.push(
      `${failedInjections.length} faults not injected: ${failedInjections.map((f) => f.note).join('; ')}`,
    );
  if (i.produced === 0 && i.groups.length > 0) reasons.push('the producer wrote nothing');
  i.proxies.forEach((p, k) => {
    const memory = memoryReason(p.name, i.rss[k]!.anonGrowth);
    if (memory !== null) reasons.push(memory);
  });

  const sent = sum(totals.map((t) => t.sent));
  const acked = sum(totals.map((t) => t.partitionCommitsAcked));
  const failed = sum(totals.map((t) => t.failed));
  const o = i.options as { store: string; seed: number; seconds: number; connections: number; rate: number };
  const ok = reasons.length === 0;
  const rssText = i.proxies
    .map((p, k) => {
      const growth = i.rss[k]!.anonGrowth;
      const anon =
        growth === null ? '' : ` anon ${growth.growthMb >= 0 ? '+' : ''}${growth.growthMb.toFixed(0)} MB`;
      return `${p.name} ${i.rss[k]!.startMb.toFixed(0)}->${i.rss[k]!.endMb.toFixed(0)} MB${anon}`;
    })
    .join(', ');
  const resultLine =
    `RESULT: ${ok ? 'ok' : 'FAILED'} store=${o.store} seed=${o.seed} seconds=${o.seconds} faults=${injected} ` +
    (observed > 0 ? `store-events=${observed} ` : '') +
    `partition-commits-acked=${acked} requests-failed=${failed} lost=${lostDirect} lost-via-proxy=${lostViaProxy} ` +
    `stale-reads=${staleReads} records=${i.produced} missing=${sum(i.groups.map((g) => g.missing))} ` +
    `duplicates-outside-window=${sum(i.groups.map((g) => g.duplicatesOutsideWindow))} ` +
    `warm-up=${warm.endS === null ? 'never' : `${warm.endS.toFixed(1)}s`} ` +
    `unready-in-warm-up=${unreadyInWarmUpS.map((u) => u.toFixed(1)).join('/')}s ` +
    `unready-outside-faults=${unready.seconds.toFixed(1)}s ` +
    (observed > 0 ? `unready-outside-injected-faults=${unreadyOutsideInjected.seconds.toFixed(1)}s ` : '') +
    `unanswered-readyz-outside-faults=${unanswered.seconds.toFixed(1)}s ` +
    `unexplained-rebalances=${sum(rebalances.filter((r) => r.proxy !== null).map((r) => r.unexplainedAtS.length))} rss=[${rssText}]` +
    (i.leftOut.length > 0 ? ` left-out=${i.leftOut.map((l) => l.kind).join(',')}` : '') +
    (ok ? '' : ` reasons: ${reasons.join(' | ')}`);
  const lines = [
    `chaos run: ${o.store} store, ${i.proxies.length} proxies, seed ${o.seed}, ${o.seconds} s measured (${i.measuredS.toFixed(0)} s with the drain), ` +
      `${o.connections} load connections at ${o.rate} partition commits/s, ${os.cpus().length} cores, load average at the end ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    '',
    ...faultTable(i.faults, i.series, i.proxies, {
      endS: countFromS,
      note: `${warm.summary}${warmReasons.length > 0 ? `; unready: ${warmReasons.join('; ')}` : ''}`,
    }),
    '',
    ...groupTable(i.groups),
    '',
    ...rebalanceTable(
      rebalances,
      i.proxies.map((p) => p.name),
    ),
    '',
    `load: ${sent} requests sent, ${acked} partition commits acknowledged, ${failed} requests failed ${JSON.stringify(failures)}; error codes ${JSON.stringify(errorCodes)}`,
    `read back: ${i.storeRead.groups} groups from the store directly (${lostDirect} wrong), through a fresh proxy (${lostViaProxy} wrong)`,
    `producer: ${i.produced} records acknowledged, ${i.producerErrors ?? 'unknown'} send errors`,
    ...i.leftOut.map((l) => `left out: ${l.kind} (${l.why})`),
    ...i.proxies.map(
      (p, k) =>
        `${p.name}: ${p.restarts} restarts (${p.failedStarts} failed starts), unready ${sum(p.unready.filter((u) => u.fromS >= 0).map((u) => u.toS - u.fromS)).toFixed(1)} s in all ` +
        `(/readyz unanswered ${sum(p.unanswered.filter((u) => u.fromS >= 0).map((u) => u.toS - u.fromS)).toFixed(1)} s more), ` +
        `VmRSS start ${i.rss[k]!.startMb.toFixed(0)} MB, end ${i.rss[k]!.endMb.toFixed(0)} MB (incarnation ${i.rss[k]!.endIncarnation}), max ${i.rss[k]!.maxMb.toFixed(0)} MB, ` +
        `exit code ${i.exitCodes[k]}, warnings ${JSON.stringify(i.warnings[k])}`,
    ),
    resultLine,
  ];
  return {
    ok,
    reasons,
    report: lines.join('\n'),
    resultLine,
    lostDirect,
    lostViaProxy,
    staleReads,
    faults: i.faults,
    groups: i.groups,
    unexplainedUnreadyS: unready.seconds,
    warmUpS: warm.endS,
    unreadyInWarmUpS,
    unansweredOutsideFaultsS: unanswered.seconds,
    rebalances,
    load: { sent, acked, failed, failures, errorCodes },
    rss: i.rss,
    negativeControlLost: i.negativeControl,
  };
}
