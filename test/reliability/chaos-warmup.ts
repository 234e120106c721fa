/**
 * The chaos run's warm-up: the broker, the JVM consumers, the librdkafka consumer, both proxies and
 * hundreds of load connections all start at once. On a starved machine (load average 30) that took
 * 30 s and more with nothing acknowledged, and the proxies' store and broker checks answered 503
 * while everything waited for a core (a run of 2026-12-06 failed on 9.6 s of it before the first
 * fault). The verdict "never unready longer than a fault" is about a running proxy, so its clock
 * starts once the run is warmed up: every proxy ready once, every proxy's load acknowledged a
 * commit, every consumer group assigned. The warm-up is not hidden: its length and the unready time
 * in it are reported beside the faults, and a run that never warms up, or takes longer than
 * WARM_UP_LIMIT_S, fails.
 */
import type { UnreadyInterval } from './chaos-readiness.js';

/** A warm-up longer than this fails the run (a proxy that cannot start is not the machine's). */
export const WARM_UP_LIMIT_S = 180;

/** When each warm-up step was first seen on the run's clock (s), null: never. */
export interface WarmUpMarks {
  /** Per proxy: its first 200 from /readyz. */
  proxyReadyS: (number | null)[];
  /** Per proxy: the first partition commit its load connections were acknowledged. */
  firstAckS: (number | null)[];
  /** Per consumer group: its first assignment with partitions. */
  assignedS: (number | null)[];
}

export interface WarmUp {
  /** The end of the warm-up on the run's clock (0 at the earliest), null: it never ended. */
  endS: number | null;
  /** The steps that never came. */
  pending: string[];
  /** The steps, for the report. */
  summary: string;
}

export function warmUp(marks: WarmUpMarks, proxyNames: string[], groupNames: string[]): WarmUp {
  const pending: string[] = [];
  const steps: [string, (number | null)[], string[]][] = [
    ['ready', marks.proxyReadyS, proxyNames],
    ['first commit acknowledged', marks.firstAckS, proxyNames],
    ['assigned', marks.assignedS, groupNames],
  ];
  const parts: string[] = [];
  let endS = 0;
  for (const [what, at, names] of steps) {
    at.forEach((s, k) => {
      if (s === null) pending.push(`${names[k]} never ${what}`);
      else endS = Math.max(endS, s);
    });
    parts.push(
      `${what} at ${at.map((s, k) => `${names[k]} ${s === null ? 'never' : Math.max(0, s).toFixed(1)}`).join(', ')} s`,
    );
  }
  return { endS: pending.length > 0 ? null : endS, pending, summary: parts.join('; ') };
}

/** The distinct reasons (503 bodies, a closed port) of unready intervals within [0, endS]. */
export function unreadyReasonsInWarmUp(intervals: UnreadyInterval[], endS: number): string[] {
  return [...new Set(intervals.filter((u) => u.toS > 0 && u.fromS < endS).map((u) => u.reason))];
}

/** The verdict's reasons: a warm-up that never ended or took too long. */
export function warmUpReasons(w: WarmUp): string[] {
  if (w.endS === null) return [`the run never warmed up: ${w.pending.join(', ')}`];
  if (w.endS > WARM_UP_LIMIT_S)
    return [`the warm-up took ${w.endS.toFixed(1)} s (over ${WARM_UP_LIMIT_S} s): ${w.summary}`];
  return [];
}
