// Issue #43: the chaos run's readiness verdict starts its clock once the run is warmed up (every
// proxy ready once, every proxy's load acknowledged, every consumer group assigned): 503s while the
// brokers, JVMs and proxies all start on a starved machine are reported in the warm-up row and the
// RESULT line, not counted; the same 503s after the warm-up fail the run, as does a warm-up that
// never ends or takes longer than WARM_UP_LIMIT_S.
import { describe, expect, test } from 'vitest';
import type { ReadBack } from '../reliability/chaos-checker.js';
import type { GroupReport } from '../reliability/chaos-consumers.js';
import type { FaultRecord } from '../reliability/chaos-faults.js';
import type { ChaosProxy } from '../reliability/chaos-proxy.js';
import type { UnreadyInterval } from '../reliability/chaos-readiness.js';
import { faultTableAndVerdict } from '../reliability/chaos-report.js';
import { WARM_UP_LIMIT_S, warmUp } from '../reliability/chaos-warmup.js';
import type { WarmUpMarks } from '../reliability/chaos-warmup.js';
import { newShared } from '../reliability/load-connection.js';
import { defaultLoadRunOptions } from '../reliability/load-run-types.js';

const storeDown503 = '503 store: redis store: ping: accepts connections but does not answer';

/** What faultTableAndVerdict reads of a proxy. */
const proxy = (name: string, unready: UnreadyInterval[]) =>
  ({ name, unready, unanswered: [], restarts: 0, failedStarts: 0 }) as unknown as ChaosProxy;

const group = (kind: GroupReport['kind'], firstAssignedAtS: number | null): GroupReport => ({
  kind,
  group: `g-${kind}`,
  bootstrap: '127.0.0.1:1',
  consumed: 10,
  duplicates: 0,
  duplicatesOutsideWindow: 0,
  outsideExamples: [],
  missing: 0,
  commitsOk: 1,
  commitsFailed: {},
  reassignments: 0,
  reassignedAtS: [],
  firstAssignedAtS,
  proxy: kind === 'direct-classic' ? null : 0,
  deaths: [],
});

const nothingLost: ReadBack = { lost: [], consumerLost: [], groups: 4 };

function verdict(
  unready: UnreadyInterval[],
  marks: WarmUpMarks,
  faults: FaultRecord[] = [],
  leftOut: { kind: string; why: string }[] = [],
) {
  const shared = newShared(defaultLoadRunOptions, 't');
  shared.totals.partitionCommitsAcked = 1000;
  return faultTableAndVerdict({
    options: { store: 'redis', seed: 3, seconds: 600, connections: 300, rate: 3000 },
    measuredS: 600,
    faults,
    series: [
      { atS: 0, acked: 0, failed: 0 },
      { atS: 30, acked: 100, failed: 7 },
      { atS: 600, acked: 1000, failed: 7 },
    ],
    proxies: [proxy('proxy-A', unready), proxy('proxy-B', [])],
    shareds: [shared],
    groups: [
      group('java-classic', marks.assignedS[0] ?? null),
      group('direct-classic', marks.assignedS[1] ?? null),
    ],
    produced: 10,
    producerErrors: 0,
    proxyRead: nothingLost,
    storeRead: nothingLost,
    rss: [0, 1].map(() => ({ startMb: 80, endMb: 90, maxMb: 95, endIncarnation: 1, anonGrowth: null })),
    warnings: [{}, {}],
    exitCodes: [0, 0],
    negativeControl: null,
    leftOut,
    warmUp: marks,
  });
}

// The run of 2026-12-06 (seed 3, load average 29-37): the proxies ready at once, nothing
// acknowledged for 30 s, the Java consumers assigned last.
const slowStart: WarmUpMarks = { proxyReadyS: [-2, 1.5], firstAckS: [28, 30.2], assignedS: [41.3, 12] };

describe('the warm-up', () => {
  test('ends at the last of its steps; a step that never came keeps it open', () => {
    const w = warmUp(slowStart, ['proxy-A', 'proxy-B'], ['java-classic', 'direct-classic']);
    expect(w.endS).toBe(41.3);
    expect(w.pending).toEqual([]);
    expect(w.summary).toContain('ready at proxy-A 0.0, proxy-B 1.5 s');
    const never = warmUp({ ...slowStart, firstAckS: [28, null] }, ['proxy-A', 'proxy-B'], ['c', 'd']);
    expect(never.endS).toBeNull();
    expect(never.pending).toEqual(['proxy-B never first commit acknowledged']);
  });

  test('503s before the end of the warm-up are reported, not counted: RESULT ok', () => {
    const r = verdict([{ fromS: 0.5, toS: 10.1, reason: storeDown503 }], slowStart);
    expect(r.reasons).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.warmUpS).toBe(41.3);
    expect(r.unreadyInWarmUpS.map((s) => s.toFixed(1))).toEqual(['9.6', '0.0']);
    expect(r.resultLine).toContain('warm-up=41.3s unready-in-warm-up=9.6/0.0s unready-outside-faults=0.0s');
    const row = r.report.split('\n').find((l) => l.startsWith('| 0 | 0.0 | warm-up |'));
    expect(row).toContain('| 41.3 |');
    expect(row).toContain('| 9.6 | 0.0 |');
    expect(row).toContain(`unready: ${storeDown503}`);
  });

  test('the same 503s after the warm-up fail the run; one straddling its end counts from there', () => {
    const after = verdict([{ fromS: 50, toS: 59.6, reason: storeDown503 }], slowStart);
    expect(after.ok).toBe(false);
    expect(after.unexplainedUnreadyS).toBeCloseTo(9.6, 5);
    const straddling = verdict([{ fromS: 35, toS: 45, reason: storeDown503 }], slowStart);
    expect(straddling.ok).toBe(false);
    expect(straddling.unexplainedUnreadyS).toBeCloseTo(45 - 41.3, 5);
    expect(straddling.unreadyInWarmUpS[0]).toBeCloseTo(41.3 - 35, 5);
  });

  test('a fault still explains unready time after the warm-up', () => {
    const f: FaultRecord = {
      id: 1,
      kind: 'store-kill',
      target: 0,
      atS: 50,
      durationS: 5,
      startedS: 50,
      endedS: 55,
      note: 'SIGKILL, restarted on its data',
    };
    expect(verdict([{ fromS: 50, toS: 59.6, reason: storeDown503 }], slowStart, [f]).ok).toBe(true);
  });

  test('a run that never warms up fails, and is judged from its start', () => {
    const r = verdict([{ fromS: 0.5, toS: 10.1, reason: storeDown503 }], {
      ...slowStart,
      assignedS: [null, 12],
    });
    expect(r.ok).toBe(false);
    expect(r.reasons).toContain('the run never warmed up: java-classic never assigned');
    expect(r.unexplainedUnreadyS).toBeCloseTo(9.6, 5);
    expect(r.resultLine).toContain('warm-up=never');
  });

  test(`a warm-up longer than ${WARM_UP_LIMIT_S} s fails the run`, () => {
    const r = verdict([], { ...slowStart, firstAckS: [28, WARM_UP_LIMIT_S + 5] });
    expect(r.ok).toBe(false);
    expect(r.reasons[0]).toMatch(/^the warm-up took 185\.0 s/);
  });
});

describe('fault kinds the machine cannot inject', () => {
  test('are named in the report and on the RESULT line, never dropped silently', () => {
    const r = verdict([], slowStart, [], [{ kind: 'disk-stall', why: 'no /dev/fuse' }]);
    expect(r.ok).toBe(true);
    expect(r.resultLine).toContain('left-out=disk-stall');
    expect(r.report).toContain('left out: disk-stall (no /dev/fuse)');
    expect(verdict([], slowStart).resultLine).not.toContain('left-out');
  });
});
