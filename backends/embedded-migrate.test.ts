import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { open } from 'lmdb';
import { afterAll, describe, expect, it } from 'vitest';
import { groupKey, offsetKey } from './embedded-keys.js';
import { openDatabases } from './embedded-databases.js';
import { EmbeddedStore } from './embedded-store.js';
import type { MigrationReport } from './embedded-migrate.js';
import { legacyOffsetKey } from './embedded-migrate.js';
import { newInstanceId } from './commit-order.js';
import type { GroupState, PartitionOffset } from './store.js';

const LAYOUT_1 = resolve('test/fixtures/embedded-layout-1');
const LAYOUT_2 = resolve('test/fixtures/embedded-layout-2');
const LAYOUT_3 = resolve('test/fixtures/embedded-layout-3');
interface ExpectedGroup {
  group: string;
  state: GroupState | null;
  offsets: PartitionOffset[];
}
const expectedOf = (fixture: string): ExpectedGroup[] =>
  JSON.parse(readFileSync(join(fixture, 'expected.json'), 'utf8'), (_k, v) =>
    typeof v === 'string' && /^-?\d+n$/.test(v) ? BigInt(v.slice(0, -1)) : v,
  );
const expected = expectedOf(LAYOUT_1);

const root = mkdtempSync(join(tmpdir(), 'kop-migrate-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
function copyOfFixture(fixture = LAYOUT_1): string {
  const dir = join(root, `d${n++}`);
  cpSync(fixture, dir, { recursive: true });
  return dir;
}

const byPartition = (xs: PartitionOffset[]): PartitionOffset[] =>
  [...xs].sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));

const LAYOUT_3_DATABASES = [
  'groups-v2',
  'meta',
  'offsets-v3',
  'request-times-v2',
  'requests-v2',
  'requests-v3',
];

async function databasesOf(dir: string): Promise<string[]> {
  const env = open({ path: dir, maxDbs: 16 });
  const names = [...env.getKeys({})].map(String).sort();
  await env.close();
  return names;
}

/** The directory opened again: nothing left to migrate, the databases of layouts 3 and 4. */
async function reopenedUnmigrated(dir: string): Promise<EmbeddedStore> {
  expect(await databasesOf(dir)).toEqual(LAYOUT_3_DATABASES);
  const again: MigrationReport[] = [];
  const reopened = new EmbeddedStore({ dataDir: dir, onMigrated: (r) => again.push(r) });
  await reopened.ready;
  expect(again).toEqual([]);
  return reopened;
}

async function expectFixtureContent(store: EmbeddedStore, groups = expected): Promise<void> {
  expect(new Set(await store.listGroups())).toEqual(new Set(groups.map((g) => g.group)));
  for (const g of groups) {
    expect(byPartition(await store.fetch(g.group, null)), JSON.stringify(g.group)).toEqual(
      byPartition(g.offsets),
    );
    expect(await store.getGroup(g.group)).toEqual(g.state);
    // Named partitions too, in the order asked, one of them never committed.
    const asked = [...g.offsets].reverse().map(({ topic, partition }) => ({ topic, partition }));
    asked.splice(1, 0, { topic: 'never', partition: 3 });
    expect(await store.fetch(g.group, asked)).toEqual([...g.offsets].reverse());
  }
}

describe('embedded store: a data directory written by the previous release (layout 1)', () => {
  it('is migrated on open: every group, offset and membership record reads as that release wrote it', async () => {
    const dir = copyOfFixture();
    const reports: MigrationReport[] = [];
    const store = new EmbeddedStore({ dataDir: dir, onMigrated: (r) => reports.push(r) });
    await store.ready;
    expect(reports).toEqual([{ from: 1, groups: 14, offsets: 13 * 9, unreadable: 0 }]);
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
    // Nothing of layouts 1 and 2 is left behind.
    expect(await databasesOf(dir)).toEqual(LAYOUT_3_DATABASES);
  });

  it('a migration cut short is redone from the start on the next open', async () => {
    const dir = copyOfFixture();
    // As if a first open crashed mid-copy: layout-2 databases hold a stale partial copy, no marker.
    const env = open({ path: dir, maxDbs: 16 });
    const v3 = openDatabases(env);
    await v3.groups.put(Buffer.alloc(32, 7), { n: 'half-copied', s: null });
    await v3.offsets.put(offsetKey(groupKey('orders-consumers'), 'orders', 0), Buffer.from('stale'));
    await env.close();
    const store = new EmbeddedStore({ dataDir: dir });
    await expectFixtureContent(store);
    expect(await store.listGroups()).not.toContain('half-copied');
    await store.close();
  });

  it('a directory of a newer layout is refused with a message that says so', async () => {
    const dir = join(root, `newer-${n++}`);
    const env = open({ path: dir, maxDbs: 16 });
    await env.openDB({ name: 'meta' }).put('layout', 5);
    await env.close();
    const store = new EmbeddedStore({ dataDir: dir });
    await expect(store.ready).rejects.toThrow(/layout 5.*reads layouts 1 to 4/);
    await expect(store.fetch('g', null)).rejects.toThrow(/layout 5/);
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

describe('embedded store: a data directory written by the previous release (layout 2)', () => {
  const layout2 = expectedOf(LAYOUT_2);
  const offsets = layout2.reduce((sum, g) => sum + g.offsets.length, 0);

  it('is migrated on open to one value per block of partitions, and reads as that release wrote it', async () => {
    const dir = copyOfFixture(LAYOUT_2);
    const reports: MigrationReport[] = [];
    const store = new EmbeddedStore({ dataDir: dir, onMigrated: (r) => reports.push(r) });
    await store.ready;
    expect(reports).toEqual([{ from: 2, groups: 0, offsets, unreadable: 0 }]);
    await expectFixtureContent(store, layout2);
    // A commit into a migrated block keeps the block's other partitions.
    const wide = layout2.find((g) => g.group === 'wide')!;
    const p129 = wide.offsets.find((o) => o.topic === 'wide-topic' && o.partition === 129)!;
    await store.commit({ group: 'wide', writes: [{ ...p129, offset: 42n }], requestId: 'after' });
    expect(byPartition(await store.fetch('wide', null))).toEqual(
      byPartition(wide.offsets.map((o) => (o === p129 ? { ...o, offset: 42n } : o))),
    );
    await store.close();
    const reopened = await reopenedUnmigrated(dir);
    expect((await reopened.fetch('wide', [{ topic: 'wide-topic', partition: 129 }]))[0]?.offset).toBe(42n);
    await reopened.close();
  });

  it('a copy cut short is redone; a crash after the mark only drops what is left of layout 2', async () => {
    const cut = copyOfFixture(LAYOUT_2);
    // Crashed mid-copy: offsets-v3 holds a stale partial value, the directory is still marked 2.
    let env = open({ path: cut, maxDbs: 16 });
    await openDatabases(env).offsets.put(offsetKey(groupKey('wide'), 'wide-topic', 0), Buffer.from('stale'));
    await env.close();
    let store = new EmbeddedStore({ dataDir: cut });
    await expectFixtureContent(store, layout2);
    await store.close();

    // Crashed after marking layout 3, before dropping offsets-v2.
    const marked = copyOfFixture(LAYOUT_2);
    store = new EmbeddedStore({ dataDir: marked });
    await store.ready;
    await store.close();
    env = open({ path: marked, maxDbs: 16 });
    await env
      .openDB({ name: 'offsets-v2', keyEncoding: 'binary' })
      .put(Buffer.alloc(68, 1), ['left', '1', 0, '', '0', '-1']);
    await env.close();
    const reports: MigrationReport[] = [];
    store = new EmbeddedStore({ dataDir: marked, onMigrated: (r) => reports.push(r) });
    await expectFixtureContent(store, layout2);
    expect(reports).toEqual([]);
    await store.close();
    expect(await databasesOf(marked)).toEqual(LAYOUT_3_DATABASES);
  });
});

describe('embedded store: a data directory written by the previous release (layout 3)', () => {
  const layout3 = expectedOf(LAYOUT_3);

  it('opens without a copy, reads as that release wrote it, and commits with read orders into its blocks', async () => {
    const dir = copyOfFixture(LAYOUT_3);
    const reports: MigrationReport[] = [];
    const store = new EmbeddedStore({ dataDir: dir, onMigrated: (r) => reports.push(r) });
    await store.ready;
    expect(reports).toEqual([{ from: 3, groups: 0, offsets: 0, unreadable: 0 }]);
    await expectFixtureContent(store, layout3);
    // Format-3 records have no order: nothing supersedes the first commit with one, which
    // rewrites the block in format 4 and keeps its other partitions.
    const wide = layout3.find((g) => g.group === 'wide')!;
    const p129 = wide.offsets.find((o) => o.topic === 'wide-topic' && o.partition === 129)!;
    const order = { instance: newInstanceId(), seq: 10 };
    expect(
      await store.commit({ group: 'wide', writes: [{ ...p129, offset: 42n }], requestId: 'after', order }),
    ).toEqual({ status: 'ok' });
    expect(
      await store.commit({
        group: 'wide',
        writes: [{ ...p129, offset: 7n }],
        requestId: 'older',
        order: { ...order, seq: 9 },
      }),
    ).toEqual({ status: 'ok', superseded: 1 });
    const now = wide.offsets.map((o) => (o === p129 ? { ...o, offset: 42n } : o));
    expect(byPartition(await store.fetch('wide', null))).toEqual(byPartition(now));
    await store.close();
    const reopened = await reopenedUnmigrated(dir);
    await expectFixtureContent(
      reopened,
      layout3.map((g) => (g.group === 'wide' ? { ...g, offsets: now } : g)),
    );
    await reopened.close();
  });
});
