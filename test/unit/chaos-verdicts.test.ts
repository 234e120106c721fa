// Issue #43: the chaos run's own logic, without a broker: the seeded schedule deals every fault
// kind a store allows in a run of the default length; the rebalance verdict attributes each
// reassignment through a proxy to a fault or the direct reference, and fails on the rest; the
// readiness verdict counts 503s and a closed port as unready, a /readyz poll without an answer in
// time only as unanswered (the machine), and fails only on unready time beyond a fault and its grace.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, test } from 'vitest';
import { unexplainedUnready } from '../reliability/chaos-checker.js';
import type { FaultRecord } from '../reliability/chaos-faults.js';
import { ReadinessTrack, probeReadyz } from '../reliability/chaos-readiness.js';
import type { ProbeOutcome } from '../reliability/chaos-readiness.js';
import { REBALANCE_GRACE_S, attributeRebalances, rebalanceReasons } from '../reliability/chaos-rebalances.js';
import type { GroupRebalances } from '../reliability/chaos-rebalances.js';
import { UNREADY_GRACE_S } from '../reliability/chaos-report.js';
import { defaultChaosOptions } from '../reliability/chaos-run.js';
import { FAULTS_BY_STORE, faultSchedule } from '../reliability/chaos-schedule.js';
import type { FaultKind, StoreKind } from '../reliability/chaos-schedule.js';

const fault = (kind: FaultKind, startedS: number, endedS: number, target = 0): FaultRecord => ({
  id: 1,
  kind,
  target,
  atS: startedS,
  durationS: endedS - startedS,
  startedS,
  endedS,
  note: '',
});

describe('the fault schedule', () => {
  const stores = Object.keys(FAULTS_BY_STORE) as StoreKind[];
  test.each(stores)('%s: every fault kind is dealt in every seed of a default-length run', (store) => {
    const o = defaultChaosOptions;
    for (let seed = 1; seed <= 100; seed++) {
      // As chaos-run.ts builds it for a run with its own broker.
      const schedule = faultSchedule({
        seed,
        store,
        seconds: o.seconds,
        meanGapS: o.meanGapS,
        minDurationS: o.minFaultS,
        maxDurationS: o.maxFaultS,
        proxies: store === 'embedded' ? 1 : 2,
        quietStartS: 15,
        quietEndS: Math.max(20, o.seconds / 4),
      });
      const drawn = new Set(schedule.map((f) => f.kind));
      expect([...drawn].sort(), `seed ${seed}`).toEqual([...FAULTS_BY_STORE[store]].sort());
      // Still a schedule: inside the run's window, no kind overlapping itself on one target.
      for (const f of schedule) {
        expect(f.atS).toBeGreaterThanOrEqual(15);
        expect(f.atS + f.durationS).toBeLessThanOrEqual(o.seconds - Math.max(20, o.seconds / 4));
        const overlap = schedule.filter(
          (g) =>
            g !== f &&
            g.kind === f.kind &&
            g.target === f.target &&
            g.atS >= f.atS &&
            g.atS < f.atS + f.durationS + 2,
        );
        expect(overlap, `seed ${seed}`).toEqual([]);
      }
    }
  });

  test('a seed gives the same schedule again; excluded kinds are never dealt', () => {
    const o = {
      seed: 7,
      store: 'redis' as const,
      seconds: 300,
      meanGapS: 20,
      minDurationS: 3,
      maxDurationS: 12,
      proxies: 2,
      quietStartS: 15,
      quietEndS: 75,
    };
    expect(faultSchedule(o)).toEqual(faultSchedule(o));
    expect(faultSchedule({ ...o, seed: 8 })).not.toEqual(faultSchedule(o));
    const without = faultSchedule({ ...o, exclude: ['broker-kill'] });
    expect(without.length).toBeGreaterThan(0);
    expect(without.filter((f) => f.kind === 'broker-kill')).toEqual([]);
  });
});

describe('the rebalance verdict', () => {
  const g = (kind: string, proxy: number | null, ...reassignedAtS: number[]): GroupRebalances => ({
    kind,
    proxy,
    reassignedAtS,
  });
  const cases: {
    name: string;
    groups: GroupRebalances[];
    faults: FaultRecord[];
    /** Per group: [by its proxy's kill, by a broker kill, with the reference, unexplained]. */
    expected: [number, number, number, number][];
    fails: boolean;
  }[] = [
    {
      name: 'no reassignment anywhere',
      groups: [g('classic', 0), g('direct', null)],
      faults: [fault('store-kill', 20, 30)],
      expected: [
        [0, 0, 0, 0],
        [0, 0, 0, 0],
      ],
      fails: false,
    },
    {
      name: 'a kill of the proxy the group goes through, rejoin within the grace',
      groups: [g('classic', 1, 45), g('direct', null)],
      faults: [fault('proxy-kill', 20, 30, 1)],
      expected: [
        [1, 0, 0, 0],
        [0, 0, 0, 0],
      ],
      fails: false,
    },
    {
      name: 'a kill of the other proxy explains nothing',
      groups: [g('classic', 0, 25), g('direct', null)],
      faults: [fault('proxy-kill', 20, 30, 1)],
      expected: [
        [0, 0, 0, 1],
        [0, 0, 0, 0],
      ],
      fails: true,
    },
    {
      name: 'a broker kill rebalances both sides',
      groups: [g('classic', 0, 70), g('kip848', 1, 75), g('direct', null, 72)],
      faults: [fault('broker-kill', 40, 60)],
      expected: [
        [0, 1, 0, 0],
        [0, 1, 0, 0],
        [0, 1, 0, 0],
      ],
      fails: false,
    },
    {
      name: 'the direct group rebalanced at the same time (the machine, not the proxy)',
      groups: [g('librdkafka', 0, 100), g('direct', null, 110)],
      faults: [],
      expected: [
        [0, 0, 1, 0],
        [0, 0, 0, 1],
      ],
      fails: false,
    },
    {
      name: 'a store fault is no excuse, nor is a rebalance long after a kill',
      groups: [g('classic', 0, 20 + REBALANCE_GRACE_S + 1, 105), g('direct', null)],
      faults: [fault('proxy-kill', 10, 20, 0), fault('store-kill', 100, 110)],
      expected: [
        [0, 0, 0, 2],
        [0, 0, 0, 0],
      ],
      fails: true,
    },
    {
      name: 'the direct group alone rebalancing fails nothing',
      groups: [g('classic', 0), g('direct', null, 50)],
      faults: [],
      expected: [
        [0, 0, 0, 0],
        [0, 0, 0, 1],
      ],
      fails: false,
    },
  ];
  test.each(cases)('$name', ({ groups, faults, expected, fails }) => {
    const a = attributeRebalances(groups, faults);
    expect(a.map((r) => [r.byProxyKill, r.byBrokerKill, r.byReference, r.unexplainedAtS.length])).toEqual(
      expected,
    );
    expect(a.map((r) => r.reassignments)).toEqual(groups.map((x) => x.reassignedAtS.length));
    expect(rebalanceReasons(a).length > 0).toBe(fails);
  });
});

describe('the readiness verdict', () => {
  /** Probes every 0.25 s from `from`, each answered `tookS` later. */
  const track = (steps: [from: number, to: number, outcome: ProbeOutcome, tookS?: number][]) => {
    const t = new ReadinessTrack();
    for (const [from, to, outcome, tookS = 0.01] of steps)
      for (let s = from; s < to; s += 0.25) t.record(s, s + tookS, outcome);
    return t;
  };
  const ready: ProbeOutcome = { state: 'ready' };
  const said503: ProbeOutcome = { state: 'unready', reason: '503 store unavailable' };
  const down: ProbeOutcome = { state: 'unready', reason: 'not listening: ECONNREFUSED' };
  const slow: ProbeOutcome = { state: 'unanswered' };

  test('503s and a closed port are unready, polls without an answer in time are not', () => {
    const t = track([
      [0, 10, ready],
      [10, 20, slow, 5],
      [20, 30, ready],
      [30, 34, said503],
      [34, 40, ready],
      [40, 43, down],
      [43, 50, ready],
    ]);
    expect(t.unready.map((u) => [u.fromS, u.toS, u.reason])).toEqual([
      [30, 34, '503 store unavailable'],
      [40, 43, 'not listening: ECONNREFUSED'],
    ]);
    expect(t.unanswered.map((u) => [u.fromS, u.toS])).toEqual([[10, 20]]);
  });

  test('an interval keeps every reason seen in it, in order, each once', () => {
    const pingFails: ProbeOutcome = { state: 'unready', reason: '503 ping: connection closed' };
    const t = track([
      [0, 10, said503],
      [10, 20, pingFails],
      [20, 30, said503],
      [30, 40, ready],
    ]);
    expect(t.unready.map((u) => [u.fromS, u.toS, u.reason])).toEqual([
      [0, 30, '503 store unavailable | then: 503 ping: connection closed'],
    ]);
  });

  const cases: {
    name: string;
    steps: Parameters<typeof track>[0];
    faults: FaultRecord[];
    unreadyS: number;
    unansweredS: number;
  }[] = [
    {
      name: 'unanswered from the start, before any fault (load 32-50): reported, not failed',
      steps: [
        [0, 30, slow, 5],
        [30, 60, ready],
      ],
      faults: [],
      unreadyS: 0,
      unansweredS: 30,
    },
    {
      name: 'unready during a store fault and within the grace after it: passes',
      steps: [
        [0, 20, ready],
        [20, 30 + UNREADY_GRACE_S - 1, said503],
        [30 + UNREADY_GRACE_S - 1, 80, ready],
      ],
      faults: [fault('store-kill', 20, 30)],
      unreadyS: 0,
      unansweredS: 0,
    },
    {
      name: 'unready (503) 10 s past the fault and its grace: fails',
      steps: [
        [0, 20, ready],
        [20, 30 + UNREADY_GRACE_S + 10, said503],
        [30 + UNREADY_GRACE_S + 10, 80, ready],
      ],
      faults: [fault('store-stop', 20, 30)],
      unreadyS: 10,
      unansweredS: 0,
    },
    {
      name: 'a proxy down with no fault (it crashed): fails',
      steps: [
        [0, 20, ready],
        [20, 28, down],
        [28, 40, ready],
      ],
      faults: [],
      unreadyS: 8,
      unansweredS: 0,
    },
  ];
  test.each(cases)('$name', ({ steps, faults, unreadyS, unansweredS }) => {
    const t = track(steps);
    const end = Math.max(...steps.map((s) => s[1]));
    expect(unexplainedUnready(t.unready, faults, UNREADY_GRACE_S, end).seconds).toBeCloseTo(unreadyS, 0);
    expect(unexplainedUnready(t.unanswered, faults, UNREADY_GRACE_S, end).seconds).toBeCloseTo(
      unansweredS,
      0,
    );
  });

  test('probeReadyz: 200 ready, 503 unready with its body, no answer in time unanswered, closed port unready', async () => {
    const server = http.createServer((req, res) => {
      if (req.url === '/ok') res.end('ok');
      else if (req.url === '/no') res.writeHead(503).end('store: timeout');
      // '/hang' is never answered
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect(await probeReadyz(`${base}/ok`, 2000)).toEqual({ state: 'ready' });
      expect(await probeReadyz(`${base}/no`, 2000)).toEqual({
        state: 'unready',
        reason: '503 store: timeout',
      });
      expect(await probeReadyz(`${base}/hang`, 300)).toEqual({ state: 'unanswered' });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
    // The first probe may find its kept-alive connection closed (as a SIGKILLed proxy's is), the
    // next finds nothing listening: both are unready.
    for (let i = 0; i < 2; i++)
      expect(await probeReadyz(`${base}/ok`, 2000)).toMatchObject({
        state: 'unready',
        reason: /^not listening: /,
      });
    expect(await probeReadyz(`${base}/ok`, 2000)).toEqual({
      state: 'unready',
      reason: 'not listening: ECONNREFUSED',
    });
  });
});
