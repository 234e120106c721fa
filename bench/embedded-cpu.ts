/**
 * CPU per operation of the embedded store (not a test):
 *   npx tsx bench/embedded-cpu.ts [--rounds N] [--baseline <checkout>]
 *
 * Process CPU time (user + system, the LMDB write thread included) per 100-partition fenced
 * commit (32 callers on their own groups, fsync included) and per 100-partition fetch, of the
 * whole group and of named partitions. CPU time, not wall time, because this machine is shared:
 * wall time moves with the load, CPU per operation much less. With --baseline, the embedded store
 * of another checkout (e.g. a `git worktree` of an older commit, with node_modules) runs in the
 * same process, rounds alternating, so the two are compared under the same conditions.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { OffsetStore, OffsetWrite } from '../backends/store.js';

const { values } = parseArgs({ options: { rounds: { type: 'string' }, baseline: { type: 'string' } } });
const ROUNDS = Number(values.rounds ?? 6);
const GROUPS = 32;
const COMMITS_PER_GROUP = 60;
const FETCHES = 5000;

type StoreCtor = new (opts: { dataDir: string }) => OffsetStore & { ready?: Promise<void> };

async function load(checkout: string): Promise<StoreCtor> {
  const mod = (await import(resolve(checkout, 'backends/embedded-store.ts'))) as { EmbeddedStore: StoreCtor };
  return mod.EmbeddedStore;
}

const writes = (offset: bigint): OffsetWrite[] =>
  Array.from({ length: 100 }, (_, p) => ({
    topic: 'orders',
    partition: p,
    offset,
    leaderEpoch: 1,
    metadata: '',
    commitTimestamp: 1_700_000_000_000n,
    expireTimestamp: -1n,
  }));

const cpuMicros = (since: NodeJS.CpuUsage): number => {
  const u = process.cpuUsage(since);
  return u.user + u.system;
};

async function round(Store: StoreCtor): Promise<{ commit: number; whole: number; named: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'kop-bench-embedded-'));
  const store = new Store({ dataDir: dir });
  await store.ready;
  try {
    const groups = Array.from({ length: GROUPS }, (_, i) => `bench-group-${i}`);
    for (const g of groups) {
      await store.updateGroup(g, { kind: 'joined', generationId: 1, memberId: 'm', groupInstanceId: null });
      await store.updateGroup(g, { kind: 'synced', generationId: 1, memberId: 'm' });
    }
    const identity = {
      generationIdOrMemberEpoch: 1,
      memberId: 'm',
      groupInstanceId: null,
      requestVersion: 9,
    };
    let seq = 0;
    const c0 = process.cpuUsage();
    await Promise.all(
      groups.map(async (group) => {
        for (let i = 0; i < COMMITS_PER_GROUP; i++) {
          const out = await store.commit({
            group,
            identity,
            writes: writes(BigInt(seq)),
            requestId: `r${seq++}`,
          });
          if (out.status !== 'ok') throw new Error(`commit refused: ${JSON.stringify(out)}`);
        }
      }),
    );
    const commit = cpuMicros(c0) / seq;
    const c1 = process.cpuUsage();
    for (let k = 0; k < FETCHES; k++) await store.fetch(groups[k % GROUPS]!, null);
    const whole = cpuMicros(c1) / FETCHES;
    const named = Array.from({ length: 100 }, (_, p) => ({ topic: 'orders', partition: p }));
    const c2 = process.cpuUsage();
    for (let k = 0; k < FETCHES; k++) await store.fetch(groups[k % GROUPS]!, named);
    return { commit, whole, named: cpuMicros(c2) / FETCHES };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const targets: [string, StoreCtor][] = [['this checkout', await load(resolve('.'))]];
if (values.baseline) targets.push([`baseline ${values.baseline}`, await load(values.baseline)]);
const results = new Map<string, { commit: number[]; whole: number[]; named: number[] }>();
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, Store] of r % 2 === 0 ? targets : [...targets].reverse()) {
    const x = await round(Store);
    const acc = results.get(name) ?? { commit: [], whole: [], named: [] };
    acc.commit.push(x.commit);
    acc.whole.push(x.whole);
    acc.named.push(x.named);
    results.set(name, acc);
  }
}
const median = (xs: number[]): string => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(0);
console.log(`| store | CPU µs per 100-partition commit | per whole-group fetch | per fetch of 100 named |`);
console.log(`|---|---:|---:|---:|`);
for (const [name, x] of results)
  console.log(`| ${name} | ${median(x.commit)} | ${median(x.whole)} | ${median(x.named)} |`);
