/**
 * The chaos run's rebalance verdict: "no rebalance caused by the proxy, the same consumer workload
 * run directly beside it is the reference". Every reassignment a group through a proxy went
 * through is attributed, in this order, to
 * - a SIGKILL of the proxy the group goes through: its members lose their coordinator connection
 *   and, once the session timed out, rejoin (a kill of the other proxy explains nothing);
 * - a broker SIGKILL: the coordinator itself is gone, both sides rebalance;
 * - the direct reference group rebalancing near the same time: what moved both (the machine
 *   stalling every consumer past its session timeout) is not the proxy.
 * What none of these explains is the proxy's: a store fault is no excuse (the proxy answers
 * offset requests with error codes, it must not cost a member its membership), nor is a quiet
 * moment. The direct group's own reassignments are counted and attributed alike, for the report.
 */
import type { FaultRecord } from './chaos-faults.js';

/** What the verdict needs of a group (a GroupReport has it). */
export interface GroupRebalances {
  kind: string;
  /** The proxy instance the group goes through, null for the direct reference. */
  proxy: number | null;
  /** Reassignments (assignments after the first), on the run's clock (s). */
  reassignedAtS: number[];
}

/**
 * A reassignment up to this long after a fault was over counts as the fault's: the members notice
 * the lost coordinator only when their session times out (10 s for the classic and librdkafka
 * consumers), then rejoin, which takes a rebalance of up to a few seconds more on a loaded machine.
 * The same window, either side, pairs a proxied group's reassignment with the reference's.
 */
export const REBALANCE_GRACE_S = 30;

export interface RebalanceAttribution {
  kind: string;
  proxy: number | null;
  reassignments: number;
  byProxyKill: number;
  byBrokerKill: number;
  byReference: number;
  /** When the unexplained ones came (s); the verdict fails on any through a proxy. */
  unexplainedAtS: number[];
}

export function attributeRebalances(
  groups: GroupRebalances[],
  faults: Pick<FaultRecord, 'kind' | 'target' | 'startedS' | 'endedS'>[],
  graceS = REBALANCE_GRACE_S,
): RebalanceAttribution[] {
  const during = (t: number, f: (typeof faults)[number]) => t >= f.startedS - 1 && t <= f.endedS + graceS;
  const reference = groups.filter((g) => g.proxy === null).flatMap((g) => g.reassignedAtS);
  return groups.map((g) => {
    const a: RebalanceAttribution = {
      kind: g.kind,
      proxy: g.proxy,
      reassignments: g.reassignedAtS.length,
      byProxyKill: 0,
      byBrokerKill: 0,
      byReference: 0,
      unexplainedAtS: [],
    };
    for (const t of g.reassignedAtS) {
      if (faults.some((f) => f.kind === 'proxy-kill' && f.target === g.proxy && during(t, f)))
        a.byProxyKill++;
      else if (faults.some((f) => f.kind === 'broker-kill' && during(t, f))) a.byBrokerKill++;
      else if (g.proxy !== null && reference.some((r) => Math.abs(r - t) <= graceS)) a.byReference++;
      else a.unexplainedAtS.push(t);
    }
    return a;
  });
}

/** The verdict's reasons: one per proxied group with a reassignment nothing explains. */
export function rebalanceReasons(attributions: RebalanceAttribution[]): string[] {
  return attributions
    .filter((a) => a.proxy !== null && a.unexplainedAtS.length > 0)
    .map(
      (a) =>
        `${a.kind}: ${a.unexplainedAtS.length} of ${a.reassignments} rebalances through proxy ${a.proxy} ` +
        `explained by no proxy or broker kill and not seen by the direct group (at ${a.unexplainedAtS.map((t) => t.toFixed(1)).join(', ')} s)`,
    );
}

export function rebalanceTable(attributions: RebalanceAttribution[], proxyNames: string[]): string[] {
  return [
    '| consumer | through | reassignments | after a kill of its proxy | after a broker kill | with the direct group | unexplained |',
    '|---|---|---:|---:|---:|---:|---:|',
    ...attributions.map(
      (a) =>
        `| ${a.kind} | ${a.proxy === null ? 'the broker (reference)' : (proxyNames[a.proxy] ?? a.proxy)} | ${a.reassignments} | ` +
        `${a.byProxyKill} | ${a.byBrokerKill} | ${a.proxy === null ? '-' : a.byReference} | ${a.unexplainedAtS.length} |`,
    ),
  ];
}
