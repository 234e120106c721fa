/**
 * The chaos run's checker. It keeps no state of the proxy's: the load connections' own record of
 * what each group was told was committed (LoadConnection.ackedK / sentK), the consumers' record of
 * their acknowledged commits, and what it reads back at the end through a freshly started proxy
 * (OffsetFetch, as a client reads) and from the store directly. Then the verdicts and the report.
 */
import type { OffsetStore } from '../../backends/store.js';
import { RawClient } from '../harness/raw-client.js';
import type { ChaosGroup, GroupReport } from './chaos-consumers.js';
import type { FaultRecord } from './chaos-faults.js';
import type { ChaosProxy } from './chaos-proxy.js';
import type { UnreadyInterval } from './chaos-readiness.js';
import { fetchOnce } from './commit-checker.js';
import type { LoadConnection } from './load-connection.js';
import type { LostCommit } from './load-run-types.js';

export type GroupReader = (group: string, topic: string, partitions: number) => Promise<Map<number, number>>;

/** OffsetFetch through a proxy; an error code is retried for up to a minute (the proxy may be starting). */
export async function proxyReader(bootstrap: string): Promise<{ read: GroupReader; close: () => void }> {
  let client = await RawClient.connect(bootstrap);
  const read: GroupReader = async (group, topic, partitions) => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        const { errorCode, offsets } = await fetchOnce(client, group, topic, partitions);
        if (errorCode === 0 && [...offsets.values()].length === partitions)
          return new Map([...offsets].filter(([, o]) => o >= 0n).map(([p, o]) => [p, Number(o)]));
        if (Date.now() > deadline) throw new Error(`OffsetFetch of ${group}: error ${errorCode}`);
      } catch (err) {
        if (Date.now() > deadline) throw err;
        client.close();
        client = await RawClient.connect(bootstrap);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  };
  return { read, close: () => client.close() };
}

export function storeReader(store: OffsetStore): GroupReader {
  return async (group, topic) => {
    const offsets = await store.fetch(group, null);
    return new Map(offsets.filter((o) => o.topic === topic).map((o) => [o.partition, Number(o.offset)]));
  };
}

export interface ReadBack {
  /** Load groups' partitions below their acknowledged commit, missing, or never sent. */
  lost: LostCommit[];
  /** Consumer groups' partitions read back below a commit the consumer was told succeeded. */
  consumerLost: string[];
  groups: number;
}

export async function readBack(
  read: GroupReader,
  conns: LoadConnection[],
  loadTopic: string,
  partitionsPerCommit: number,
  consumers: ChaosGroup[],
  consumerTopic: string,
  consumerPartitions: number,
): Promise<ReadBack> {
  const lost: LostCommit[] = [];
  for (const c of conns) await c.verify((g) => read(g, loadTopic, partitionsPerCommit), lost);
  const consumerLost: string[] = [];
  // The reference group commits to the broker, not through a proxy: nothing of it is in the store.
  for (const g of consumers.filter((c) => c.kind !== 'direct-classic')) {
    const got = await read(g.report.group, consumerTopic, consumerPartitions);
    g.ackedCommits(consumerPartitions).forEach((acked, p) => {
      const v = got.get(p) ?? -1;
      if (v < acked) consumerLost.push(`${g.report.group} p${p}: ${v} < acknowledged ${acked}`);
    });
  }
  return { lost, consumerLost, groups: conns.reduce((n, c) => n + c.groups.length, 0) + consumers.length };
}

/**
 * Unready time no fault explains, from `fromS` (the end of the warm-up, chaos-warmup.ts) to
 * `untilS`: an unready interval counts as explained while a fault ran or within `graceS` after one
 * ended (a restarted proxy's first readiness poll, the store circuit's probe, the broker's
 * leadership settling).
 */
export function unexplainedUnready(
  intervals: UnreadyInterval[],
  faults: FaultRecord[],
  graceS: number,
  untilS: number,
  fromS = 0,
): { seconds: number; examples: string[] } {
  const covered = faults
    .map((f) => [f.startedS - 1, f.endedS + graceS] as [number, number])
    .sort((a, b) => a[0] - b[0]);
  let seconds = 0;
  const examples: string[] = [];
  for (const u of intervals) {
    if (u.toS < fromS || u.fromS > untilS) continue;
    const from = Math.max(fromS, u.fromS);
    const to = Math.min(u.toS, untilS);
    // The parts of [from, to] no covered span reaches: what no fault explains.
    let at = from;
    let left = 0;
    for (const [a, b] of covered) {
      if (b <= at) continue;
      if (a >= to) break;
      if (a > at) left += a - at;
      at = Math.max(at, b);
      if (at >= to) break;
    }
    if (at < to) left += to - at;
    if (left > 0.5) {
      seconds += left;
      examples.push(`${from.toFixed(1)}-${to.toFixed(1)} s (${left.toFixed(1)} s outside): ${u.reason}`);
    }
  }
  return { seconds, examples };
}

/** Seconds a proxy was unready within [from, to]. */
export function unreadyWithin(intervals: UnreadyInterval[], from: number, to: number): number {
  let s = 0;
  for (const u of intervals) s += Math.max(0, Math.min(u.toS, to) - Math.max(u.fromS, from));
  return s;
}

export interface SecondSample {
  atS: number;
  /** Cumulative partition commits acknowledged and requests failed. */
  acked: number;
  failed: number;
}

function between(series: SecondSample[], from: number, to: number): { acked: number; failed: number } {
  const at = (t: number) => series.findLast((s) => s.atS <= t) ?? { acked: 0, failed: 0 };
  return { acked: at(to).acked - at(from).acked, failed: at(to).failed - at(from).failed };
}

const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '-');

/**
 * A row per fault; the warm-up (chaos-warmup.ts) first, as row 0, with the unready time in it
 * (not counted by the verdict, shown here) and `note` saying when each step came and the 503s.
 */
export function faultTable(
  faults: FaultRecord[],
  series: SecondSample[],
  proxies: ChaosProxy[],
  warm?: { endS: number; note: string },
): string[] {
  const rows = [
    `| # | at s | fault | planned s | lasted s | partition commits acked/s during | failed requests during | ${proxies.map((p) => `${p.name} unready s`).join(' | ')} | what happened |`,
    `|---:|---:|---|---:|---:|---:|---:|${proxies.map(() => '---:|').join('')}---|`,
  ];
  if (warm !== undefined) {
    const d = between(series, 0, warm.endS);
    const unready = proxies.map((p) => f1(unreadyWithin(p.unready, 0, warm.endS)));
    rows.push(
      `| 0 | 0.0 | warm-up | - | ${f1(warm.endS)} | ${(d.acked / Math.max(warm.endS, 0.1)).toFixed(0)} | ${d.failed} | ${unready.join(' | ')} | ${warm.note} |`,
    );
  }
  for (const f of faults) {
    const lasted = f.endedS - f.startedS;
    const d = between(series, f.startedS, f.endedS);
    const unready = proxies.map((p) => f1(unreadyWithin(p.unready, f.startedS, f.endedS + 15)));
    const name = f.kind === 'proxy-kill' ? `proxy-kill ${proxies[f.target]?.name ?? f.target}` : f.kind;
    const planned = f.kind.startsWith('sentinel-') ? '-' : String(f.durationS);
    rows.push(
      `| ${f.id} | ${f1(f.startedS)} | ${name} | ${planned} | ${f1(lasted)} | ${(d.acked / Math.max(lasted, 0.1)).toFixed(0)} | ${d.failed} | ${unready.join(' | ')} | ${f.note} |`,
    );
  }
  return rows;
}

export function groupTable(groups: GroupReport[]): string[] {
  return [
    '| consumer | through | consumed | duplicates | outside the uncommitted window | missing | commits ok | commits failed | reassignments | died |',
    '|---|---|---:|---:|---:|---:|---:|---|---:|---:|',
    ...groups.map(
      (g) =>
        `| ${g.kind} | ${g.bootstrap} | ${g.consumed} | ${g.duplicates} | ${g.duplicatesOutsideWindow} | ${g.missing} | ${g.commitsOk} | ${JSON.stringify(g.commitsFailed)} | ${g.reassignments} | ${g.deaths.length} |`,
    ),
  ];
}
