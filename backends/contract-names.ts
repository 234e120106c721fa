/**
 * The part of the store contract about names: every group id and topic name Kafka accepts is
 * stored, fetched (by partition and whole group), listed and deleted exactly, without touching
 * another group's data. Kafka's strings are up to 32,767 bytes of any Unicode (NUL included), and
 * the names that broke stores before are the ones here: around 64 characters (where lmdb-js
 * changes its string key encoding), prefixes of each other, and the stores' own key syntax.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { OffsetStore, OffsetWrite, PartitionOffset } from './store.js';

/** 32,767 bytes of UTF-8: the longest string the Kafka protocol carries. */
export const LONGEST_NAME = `${'é'.repeat(16_383)}a`;

/** Group ids (and, as topics, names) that other software sends and that stores get wrong. */
export const HOSTILE_NAMES: readonly string[] = [
  '',
  'g',
  'g\u0000',
  'g\u0000x',
  'gg',
  '\u0000',
  'x'.repeat(62),
  'x'.repeat(63),
  'x'.repeat(64),
  `${'x'.repeat(64)}\u0000${'x'.repeat(10)}`,
  'y'.repeat(300),
  LONGEST_NAME,
  '\uffff',
  'rocket \u{1F680} and \u{1D11E}',
  'grüße, 名前',
  'a:b',
  '{g}',
  'a}b{c',
  'g:{x}:offsets',
  'x}:state',
  'x/y',
  '/',
  '%2F',
  '%',
  '.',
  '..',
  ' leading and trailing ',
  'tab\tnewline\n\u007f\u0085',
];

const TOPICS = ['orders', 'pay.ments_v2', 'a.b_c-d', 'x'.repeat(249)];

const sorted = (xs: PartitionOffset[]): PartitionOffset[] =>
  [...xs].sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));

function writeOf(topic: string, partition: number, offset: bigint): OffsetWrite {
  return {
    topic,
    partition,
    offset,
    leaderEpoch: partition,
    metadata: `m-${offset}`,
    commitTimestamp: 1_700_000_000_000n,
    expireTimestamp: -1n,
  };
}
const stored = (w: OffsetWrite): PartitionOffset => {
  const { expectedOffset: _e, ...rest } = w;
  return rest;
};

let seq = 0;
const rid = (): string => `names-${process.pid}-${Date.now().toString(36)}-${seq++}`;

export interface NameContractOptions {
  /** fast-check runs of the property (each run commits, lists and deletes a few groups). */
  runs?: number;
}

export function runNameContract(
  name: string,
  makeStore: () => Promise<OffsetStore>,
  opts: NameContractOptions = {},
): void {
  describe(`OffsetStore contract, names: ${name}`, () => {
    it('stores, fetches, lists and deletes groups of every hostile name, each apart from the others', async () => {
      const store = await makeStore();
      try {
        for (const g of HOSTILE_NAMES) await store.deleteGroup(g);
        const writesOf = new Map<string, OffsetWrite[]>();
        for (const [i, g] of HOSTILE_NAMES.entries()) {
          // The group's own name is also one of its topics (topic names reach the store unchecked
          // with --unknown-topics allow).
          const topics = [TOPICS[i % TOPICS.length]!, g === '' ? 'topic-of-the-empty-group' : g];
          const writes = topics.flatMap((t, j) =>
            [0, 1].map((p) => writeOf(t, p, BigInt(i * 100 + j * 10 + p))),
          );
          writesOf.set(g, writes);
          expect(await store.commit({ group: g, writes, requestId: rid() }), JSON.stringify(g)).toEqual({
            status: 'ok',
          });
        }
        const listed = new Set(await store.listGroups());
        for (const [g, writes] of writesOf) {
          const label = JSON.stringify(g.length > 80 ? `${g.slice(0, 40)}...(${g.length})` : g);
          expect(listed.has(g), `${label} listed`).toBe(true);
          expect(sorted(await store.fetch(g, null)), `${label} whole group`).toEqual(
            sorted(writes.map(stored)),
          );
          const one = writes[1]!;
          expect(await store.fetch(g, [{ topic: one.topic, partition: one.partition }]), label).toEqual([
            stored(one),
          ]);
        }

        // Deleting one partition of "g" leaves its prefix relatives alone.
        const [first, ...restOfG] = writesOf.get('g')!;
        await store.deleteOffsets('g', [{ topic: first!.topic, partition: first!.partition }]);
        expect(sorted(await store.fetch('g', null))).toEqual(sorted(restOfG.map(stored)));

        // DeleteGroups of "g": its prefix relatives keep every offset; re-created, it starts from nothing.
        await store.deleteGroup('g');
        expect(await store.fetch('g', null)).toEqual([]);
        expect(await store.listGroups()).not.toContain('g');
        for (const relative of ['g\u0000', 'g\u0000x', 'gg', '']) {
          expect(sorted(await store.fetch(relative, null))).toEqual(
            sorted(writesOf.get(relative)!.map(stored)),
          );
        }
        const fresh = writeOf('orders', 5, 1n);
        await store.commit({ group: 'g', writes: [fresh], requestId: rid() });
        expect(await store.fetch('g', null)).toEqual([stored(fresh)]);

        for (const g of HOSTILE_NAMES) await store.deleteGroup(g);
        const after = new Set(await store.listGroups());
        for (const g of HOSTILE_NAMES) expect(after.has(g), JSON.stringify(g.slice(0, 80))).toBe(false);
      } finally {
        await store.close();
      }
    });

    it('property: any names, prefixes of each other included, never see each other’s offsets', async () => {
      const store = await makeStore();
      const base = fc.oneof(
        fc.string({ unit: 'binary', maxLength: 70 }),
        fc.string({ unit: 'binary', minLength: 60, maxLength: 300 }),
      );
      // A family of names built on one stem, so prefixes and NUL-extensions occur in every run.
      const family = fc
        .tuple(
          base,
          fc.uniqueArray(fc.constantFrom('', '\u0000', '\u0000x', 'g', '}', ':offsets', '/', '%'), {
            minLength: 1,
            maxLength: 4,
          }),
        )
        .map(([stem, tails]) => tails.map((t) => stem + t));
      const topic = fc.oneof(
        fc.constantFrom(...TOPICS),
        fc.string({ unit: 'binary', minLength: 1, maxLength: 120 }),
      );
      try {
        await fc.assert(
          fc.asyncProperty(
            family,
            fc.array(fc.tuple(topic, fc.integer({ min: 0, max: 3 })), { minLength: 1, maxLength: 4 }),
            async (names, tps) => {
              // A per-run stem keeps runs (and other tests on a shared store) apart.
              const run = `nc-${process.pid}-${seq++}-`;
              const groups = names.map((n) => run + n);
              const expected = new Map<string, Map<string, OffsetWrite>>();
              for (const [i, g] of groups.entries()) {
                const writes = tps.map(([t, p], j) => writeOf(t, p, BigInt(i * 1000 + j)));
                const last = new Map<string, OffsetWrite>();
                for (const w of writes) last.set(`${w.topic}\u0000${w.partition}`, w);
                expected.set(g, last);
                expect(await store.commit({ group: g, writes, requestId: rid() })).toEqual({ status: 'ok' });
              }
              const listed = new Set(await store.listGroups());
              for (const [g, last] of expected) {
                expect(listed.has(g)).toBe(true);
                expect(sorted(await store.fetch(g, null))).toEqual(sorted([...last.values()].map(stored)));
              }
              await store.deleteGroup(groups[0]!);
              expect(await store.fetch(groups[0]!, null)).toEqual([]);
              for (const g of groups.slice(1))
                expect(sorted(await store.fetch(g, null))).toEqual(
                  sorted([...expected.get(g)!.values()].map(stored)),
                );
              for (const g of groups) await store.deleteGroup(g);
            },
          ),
          { numRuns: opts.runs ?? 20 },
        );
      } finally {
        await store.close();
      }
    });
  });
}
