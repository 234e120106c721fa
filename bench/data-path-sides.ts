// The sides of the data-path benchmark (bench/proxy.ts): one relay (or none, for `direct`) and what
// was measured through it, with the helpers that measure a run's relay CPU time and put the sides
// in each round's order.
import type { ConsumerPerfResult, ProducerPerfResult } from '../test/bed/clients/kafka-tools.js';
import { RawClient, brokerAddresses, metadataRequestBody } from '../test/harness/raw-client.js';
import { ApiKey } from '../protocol/messages/index.js';
import type { MetadataResponse } from '../protocol/messages/metadata-response.js';
import { cpuByThreadMs, cpuSplitMs } from './process-stats.js';

/** `direct`, `proxy`, `bare`, `haproxy`, `baseline`, `baseline2`, ... or an external side's name. */
export type SideName = string;

export interface Side {
  name: SideName;
  /** Where clients bootstrap. */
  bootstrap: string;
  /** The address of the partition leader's connection (node 1) as a client of this side uses it. */
  leader: string;
  /** The relay process, when there is one. */
  pid?: number;
  /** A proxy side's HTTP endpoint (its metrics: how many connections moved to the native relay). */
  http?: string;
  produce: ProducerPerfResult[];
  consume: ConsumerPerfResult[];
  rate: ProducerPerfResult[];
  rttUs: number[];
  /** The relay's VmRSS growth with CONNECTIONS open connections, in MB. */
  connectionsRssMb?: number;
  cpu: { produce: Cpu; consume: Cpu; rate: Cpu; rtt: Cpu };
  /** The relay's CPU ms (user + sys) of each produce and consume run, in order: warm-up shows here. */
  cpuPerRunMs: { produce: number[]; consume: number[] };
  /** The relay's CPU over the warm-up's produce and consume runs (WARMUP_RECORDS each). */
  warmupCpu: Cpu;
  /** The produce sweep, by `batch.size/record size`: each run's relay CPU ms and records/s. */
  sweep: Map<string, { cpuMs: number[]; recordsPerSec: number[] }>;
  /** The consume rounds by consumer (`java`, `librdkafka`, `kafkajs`): each run's relay CPU ms and records/s. */
  consumers: Map<string, { cpuMs: number[]; recordsPerSec: number[] }>;
}
export interface Cpu {
  user: number;
  sys: number;
}

export const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
export const pct = (xs: number[], q: number): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))]!;

export function log(line: string): void {
  console.log(`[bench] ${line}`);
}

/**
 * Runs `fn` and adds the side's relay CPU time over it to `into` (and to `runs`, when given). When
 * `label` is given it logs that time split by thread: the event loop against V8's compiler and GC
 * threads, which is what tells a relay still compiling from one doing its work.
 */
export async function measured<T>(
  side: Side,
  into: Cpu,
  fn: () => Promise<T>,
  runs?: number[],
  label?: string,
): Promise<T> {
  const movesBefore = await nativeMoves(side);
  const before = cpuSplitMs(side.pid);
  const threadsBefore = cpuByThreadMs(side.pid);
  const result = await fn();
  const after = cpuSplitMs(side.pid);
  const movesAfter = await nativeMoves(side);
  if (movesBefore !== null && movesAfter !== null)
    log(
      `${label ?? 'run'} ${side.name}: ${movesAfter.native - movesBefore.native} moves to the native relay, ` +
        `${movesAfter.javascript - movesBefore.javascript} back to JavaScript`,
    );
  if (side.pid !== undefined) {
    into.user += after.user - before.user;
    into.sys += after.sys - before.sys;
    runs?.push(after.user - before.user + after.sys - before.sys);
    if (label !== undefined)
      log(`${label} ${side.name} CPU ms by thread: ${threadDelta(threadsBefore, cpuByThreadMs(side.pid))}`);
  }
  return result;
}

/** A proxy side's native relay handovers since its start (its metrics), or null for other sides. */
export async function nativeMoves(side: Side): Promise<{ native: number; javascript: number } | null> {
  if (side.http === undefined) return null;
  const text = await (await fetch(`http://${side.http}/metrics`)).text();
  const count = (to: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(`kop_native_relay_handovers_total{to="${to}"}`));
    return line === undefined ? 0 : Number(line.split(' ').at(-1));
  };
  return { native: count('native'), javascript: count('javascript') };
}

/** "event loop 640, node 20, ..." : each thread name's CPU ms between two cpuByThreadMs readings. */
export function threadDelta(before: Map<string, number>, after: Map<string, number>): string {
  return [...after]
    .map(([name, ms]) => [name, ms - (before.get(name) ?? 0)] as const)
    .filter(([, ms]) => ms > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${name} ${ms.toFixed(0)}`)
    .join(', ');
}

/** The partition leader's (node `nodeId`'s) address as the side at `bootstrap` answers Metadata. */
export async function leaderThrough(bootstrap: string, nodeId: number): Promise<string> {
  const client = await RawClient.connect(bootstrap);
  try {
    const body = await client.request<MetadataResponse>(ApiKey.Metadata, 12, 1, metadataRequestBody());
    const node = brokerAddresses(body).find((b) => b.nodeId === nodeId);
    if (!node) throw new Error(`${bootstrap}: Metadata names no node ${nodeId}`);
    return `${node.host}:${node.port}`;
  } finally {
    client.close();
  }
}

/** The sides in round `round`'s order: as given, reversed every other round. */
export function ordered(sides: Side[], round: number): Side[] {
  return round % 2 === 0 ? sides : [...sides].reverse();
}

/** A side with nothing measured yet. */
export function newSide(name: SideName, bootstrap: string, leader: string, pid?: number): Side {
  return {
    name,
    bootstrap,
    leader,
    pid,
    produce: [],
    consume: [],
    rate: [],
    rttUs: [],
    cpu: {
      produce: { user: 0, sys: 0 },
      consume: { user: 0, sys: 0 },
      rate: { user: 0, sys: 0 },
      rtt: { user: 0, sys: 0 },
    },
    cpuPerRunMs: { produce: [], consume: [] },
    warmupCpu: { user: 0, sys: 0 },
    sweep: new Map(),
    consumers: new Map(),
  };
}
