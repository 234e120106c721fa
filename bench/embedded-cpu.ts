/**
 * CPU per operation of the embedded store (not a test):
 *   npx tsx bench/embedded-cpu.ts [--rounds N] [--baseline <checkout>]
 *
 * Process CPU time (user + system, the LMDB write thread included) per 100-partition fenced
 * commit (32 callers on their own groups, fsync included) and per 100-partition fetch, of the
 * whole group and of named partitions, and what the commits wrote: bytes handed to write(2) per
 * commit (/proc/self/io wchar: LMDB writes dirty pages with pwrite) and 4 KiB pages per write
 * transaction. Request ids are the checkout's own (time-ordered where it has backends/request-id.ts,
 * v4 UUIDs as the proxy sent before). CPU time, not wall time, because this machine is shared:
 * wall time moves with the load, CPU per operation much less. With --baseline, the embedded store
 * of another checkout (e.g. a `git worktree` of an older commit, with node_modules) runs in the
 * same process, rounds alternating, so the two are compared under the same conditions.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
interface Target {
  Store: StoreCtor;
  newId: () => string;
}

async function load(checkout: string): Promise<Target> {
  const mod = (await import(resolve(checkout, 'backends/embedded-store.ts'))) as { EmbeddedStore: StoreCtor };
  const ids = resolve(checkout, 'backends/request-id.ts');
  const newId = existsSync(ids)
    ? ((await import(ids)) as { newRequestId: () => string }).newRequestId
    : randomUUID;
  return { Store: mod.EmbeddedStore, newId };
}

/** Bytes this process passed to write(2) and pwrite(2) so far. */
const written = (): number => Number(/^wchar: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'))?.[1]);
/** The environment's last transaction id (lmdb-js `getStats`), through the store's databases. */
const lastTxn = (store: object): number =>
  (store as { db: { root: { getStats(): { lastTxnId: number } } } }).db.root.getStats().lastTxnId;

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

interface RoundResult {
  commit: number;
  whole: number;
  named: number;
  /** KiB written per commit, pages written per write transaction. */
  kib: number;
  pages: number;
}

async function round({ Store, newId }: Target): Promise<RoundResult> {
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
    const [w0, t0] = [written(), lastTxn(store)];
    const c0 = process.cpuUsage();
    await Promise.all(
      groups.map(async (group) => {
        for (let i = 0; i < COMMITS_PER_GROUP; i++) {
          const out = await store.commit({
            group,
            identity,
            writes: writes(BigInt(seq)),
            requestId: newId(),
          });
          if (out.status !== 'ok') throw new Error(`commit refused: ${JSON.stringify(out)}`);
          seq++;
        }
      }),
    );
    const commit = cpuMicros(c0) / seq;
    const bytes = written() - w0;
    const transactions = lastTxn(store) - t0;
    const c1 = process.cpuUsage();
    for (let k = 0; k < FETCHES; k++) await store.fetch(groups[k % GROUPS]!, null);
    const whole = cpuMicros(c1) / FETCHES;
    const named = Array.from({ length: 100 }, (_, p) => ({ topic: 'orders', partition: p }));
    const c2 = process.cpuUsage();
    for (let k = 0; k < FETCHES; k++) await store.fetch(groups[k % GROUPS]!, named);
    const named100 = cpuMicros(c2) / FETCHES;
    return { commit, whole, named: named100, kib: bytes / seq / 1024, pages: bytes / transactions / 4096 };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const targets: [string, Target][] = [['this checkout', await load(resolve('.'))]];
if (values.baseline) targets.push([`baseline ${values.baseline}`, await load(values.baseline)]);
const results = new Map<string, { [K in keyof RoundResult]: number[] }>();
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, target] of r % 2 === 0 ? targets : [...targets].reverse()) {
    const x = await round(target);
    const acc = results.get(name) ?? { commit: [], whole: [], named: [], kib: [], pages: [] };
    for (const k of Object.keys(acc) as (keyof RoundResult)[]) acc[k].push(x[k]);
    results.set(name, acc);
  }
}
const median = (xs: number[], digits = 0): string =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(digits);
console.log(
  `| store | CPU µs per 100-partition commit | per whole-group fetch | per fetch of 100 named | KiB written per commit | pages per write transaction |`,
);
console.log(`|---|---:|---:|---:|---:|---:|`);
for (const [name, x] of results)
  console.log(
    `| ${name} | ${median(x.commit)} | ${median(x.whole)} | ${median(x.named)} | ${median(x.kib, 2)} | ${median(x.pages, 1)} |`,
  );
