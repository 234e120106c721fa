import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { open } from 'lmdb';
import { afterAll, describe, expect, it } from 'vitest';
import { openLayout2 } from './embedded-store.js';
import { EmbeddedStore } from './embedded-store.js';
import type { MigrationReport } from './embedded-migrate.js';
import { legacyOffsetKey } from './embedded-migrate.js';
import type { GroupState, PartitionOffset } from './store.js';

const FIXTURE = resolve('test/fixtures/embedded-layout-1');
interface ExpectedGroup {
  group: string;
  state: GroupState | null;
  offsets: PartitionOffset[];
}
const expected: ExpectedGroup[] = JSON.parse(readFileSync(join(FIXTURE, 'expected.json'), 'utf8'), (_k, v) =>
  typeof v === 'string' && /^-?\d+n$/.test(v) ? BigInt(v.slice(0, -1)) : v,
);

const root = mkdtempSync(join(tmpdir(), 'kop-migrate-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
function copyOfFixture(): string {
  const dir = join(root, `d${n++}`);
  cpSync(FIXTURE, dir, { recursive: true });
  return dir;
}

const byPartition = (xs: PartitionOffset[]): PartitionOffset[] =>
  [...xs].sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));

async function expectFixtureContent(store: EmbeddedStore): Promise<void> {
  expect(new Set(await store.listGroups())).toEqual(new Set(expected.map((g) => g.group)));
  for (const g of expected) {
    expect(byPartition(await store.fetch(g.group, null)), JSON.stringify(g.group)).toEqual(
      byPartition(g.offsets),
    );
    expect(await store.getGroup(g.group)).toEqual(g.state);
  }
}

describe('embedded store: a data directory written by the previous release (layout 1)', () => {
  it('is migrated on open: every group, offset and membership record reads as that release wrote it', async () => {
    const dir = copyOfFixture();
    const reports: MigrationReport[] = [];
    const store = new EmbeddedStore({ dataDir: dir, onMigrated: (r) => reports.push(r) });
    await store.ready;
    expect(reports).toEqual([{ groups: 14, offsets: 13 * 9, unreadable: 0 }]);
    await expectFixtureContent(store);
    // A group migrated from layout 1 is deleted whole and starts again from nothing.
    const long = 'x'.repeat(64);
    await store.deleteGroup(long);
    expect(await store.fetch(long, null)).toEqual([]);
    expect(await store.listGroups()).not.toContain(long);
    await store.close();

    const again: MigrationReport[] = [];
    const reopened = new EmbeddedStore({ dataDir: dir, onMigrated: (r) => again.push(r) });
    await reopened.ready;
    expect(again).toEqual([]);
    expect(await reopened.fetch('x'.repeat(63), null)).toHaveLength(9);
    expect(await reopened.fetch(long, null)).toEqual([]);
    await reopened.close();
    // Nothing of layout 1 is left behind.
    const env = open({ path: dir, maxDbs: 16 });
    expect([...env.getKeys({})].sort()).toEqual([
      'groups-v2',
      'meta',
      'offsets-v2',
      'request-times-v2',
      'requests-v2',
    ]);
    await env.close();
  });

  it('a migration cut short is redone from the start on the next open', async () => {
    const dir = copyOfFixture();
    // As if a first open crashed mid-copy: layout-2 databases hold a stale partial copy, no marker.
    const env = open({ path: dir, maxDbs: 16 });
    const v2 = openLayout2(env);
    await v2.groups.put(Buffer.alloc(32, 7), { n: 'half-copied', s: null });
    await env.close();
    const store = new EmbeddedStore({ dataDir: dir });
    await expectFixtureContent(store);
    expect(await store.listGroups()).not.toContain('half-copied');
    await store.close();
  });

  it('a directory of a newer layout is refused with a message that says so', async () => {
    const dir = join(root, `newer-${n++}`);
    const env = open({ path: dir, maxDbs: 16 });
    await env.openDB({ name: 'meta' }).put('layout', 3);
    await env.close();
    const store = new EmbeddedStore({ dataDir: dir });
    await expect(store.ready).rejects.toThrow(/layout 3.*reads layout 2/);
    await expect(store.fetch('g', null)).rejects.toThrow(/layout 3/);
    await store.close();
  });

  it('layout-1 keys of long names holding NUL are rejoined at the group the directory names', () => {
    const groups = new Set(['a'.repeat(70) + '\u0000b']);
    expect(legacyOffsetKey(['a'.repeat(70), 'b', 'topic\u0000x'.padEnd(70, 'y'), 'tail', 3], groups)).toEqual(
      {
        group: 'a'.repeat(70) + '\u0000b',
        topic: 'topic\u0000x'.padEnd(70, 'y') + '\u0000tail',
        partition: 3,
      },
    );
    expect(legacyOffsetKey(['g', 't', 0], new Set())).toEqual({ group: 'g', topic: 't', partition: 0 });
    expect(legacyOffsetKey(['g', 0], new Set())).toBeUndefined();
    expect(legacyOffsetKey('g', new Set())).toBeUndefined();
  });
});
