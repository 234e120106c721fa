/**
 * Brings an embedded data directory to layout 4 (embedded-store.ts) when it opens, through
 * layouts 2 and 3: 1 → 2 → 3 → 4, each step marked in `meta` when it is complete.
 *
 * Layout 1 (releases before layout 2) kept `offsets` [group, topic, partition] → {o,e,m,c,x},
 * `groups` group → GroupState, and request records, all under lmdb-js's ordered-binary keys.
 * Reading it back key by key is sound with one exception: a name of 64 or more characters holding
 * NUL decodes as several array elements, since NUL is the array separator and such strings are
 * written unescaped. Those are rejoined with NUL, using the group names the directory lists to
 * tell where the group ends and the topic begins.
 *
 * Layout 2 (the release before layout 3) kept one offsets-v2 value per partition, a MessagePack
 * tuple [topic, offset, epoch, metadata, commit timestamp, expire timestamp] under G ‖ T ‖
 * partition; layout 3 keeps one offsets-v3 value per block of 128 partitions (embedded-value.ts).
 * The other layout-2 databases (groups-v2, requests-v2, request-times-v2) stay as they are.
 *
 * Layout 4 has layout 3's databases; its offsets values may be of format 4, whose records carry
 * the read order of the commit that wrote them (embedded-value.ts). Format-3 values stay readable
 * and are rewritten by the next commit into their block, so 3 → 4 copies nothing: the mark is
 * there so that a release that cannot read format 4 refuses the directory instead of reading its
 * new values as corrupt.
 *
 * Every copy runs in pages of write transactions, so a large directory neither holds the event
 * loop nor needs one huge transaction. Only the last step of a migration marks the directory with
 * its layout; a copy cut short (a crash) is thrown away and redone on the next open. Request
 * records are not copied from layout 1: they only matter for a resend within a running process.
 * The old databases are dropped last (after the mark; a crash before that drops them next time).
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Database, Key } from 'lmdb';
import { DIGEST_BYTES, groupKey, OFFSET_KEY_BYTES, offsetKey, partitionOf } from './embedded-keys.js';
import type { EmbeddedDatabases, GroupRecord } from './embedded-databases.js';
import { blockOf, encodeBlockWrites, mergeBlock } from './embedded-value.js';
import { parseDecimal } from './outcome-codec.js';
import type { GroupState, OffsetWrite } from './store.js';

/** The layout this release writes. */
export const LAYOUT = 4;
/** Layout 1 has no mark (undefined); 2 and 3 are migrated; a newer one is refused. */
export const readableLayout = (layout: unknown): boolean =>
  layout === undefined || layout === 2 || layout === 3 || layout === LAYOUT;
const LEGACY_DATABASES = ['offsets', 'groups', 'requests', 'request-times'];
const LAYOUT_2_OFFSETS = 'offsets-v2';
const PAGE = 5_000;

/** A layout-2 offsets value: [topic, offset, leader epoch, metadata, commit ts, expire ts]. */
type Layout2Value = [string, string, number, string, string, string];

/** A layout-1 offsets value (read as found; layout 2 checks its fields when it reads them). */
interface LegacyOffset {
  o: string;
  e: number;
  m: string;
  c: string;
  x: string;
}

export interface MigrationReport {
  /** The layout the directory had (1, 2 or 3). */
  from: number;
  groups: number;
  offsets: number;
  /** Keys or values that named no readable offset (left behind, counted). */
  unreadable: number;
}

/** A layout-1 name key: a string, or the pieces of a long name that held NUL. */
function legacyName(key: Key): string | undefined {
  if (typeof key === 'string') return key;
  if (Array.isArray(key) && key.every((k) => typeof k === 'string')) return key.join('\u0000');
  return undefined;
}

/** [group, topic, partition] of a layout-1 offsets key, rejoining names split at NUL. */
export function legacyOffsetKey(
  key: Key,
  knownGroups: ReadonlySet<string>,
): { group: string; topic: string; partition: number } | undefined {
  if (!Array.isArray(key) || key.length < 3) return undefined;
  const partition = key[key.length - 1];
  const names = key.slice(0, -1);
  if (typeof partition !== 'number' || !Number.isInteger(partition)) return undefined;
  if (!names.every((k): k is string => typeof k === 'string')) return undefined;
  if (names.length === 2) return { group: names[0]!, topic: names[1]!, partition };
  for (let split = 1; split < names.length; split++) {
    const group = names.slice(0, split).join('\u0000');
    if (knownGroups.has(group)) return { group, topic: names.slice(split).join('\u0000'), partition };
  }
  return { group: names[0]!, topic: names.slice(1).join('\u0000'), partition };
}

async function writeInPages<T>(
  db: EmbeddedDatabases,
  items: Iterable<T>,
  put: (item: T) => void,
): Promise<void> {
  let page: T[] = [];
  const flush = async (): Promise<void> => {
    const batch = page;
    page = [];
    await db.root.transaction(() => batch.forEach(put));
    await nextTurn();
  };
  for (const item of items) {
    page.push(item);
    if (page.length >= PAGE) await flush();
  }
  if (page.length > 0) await flush();
}

/**
 * Brings the directory to layout 4 and says what it copied (`from` is 4 when it already was, or
 * it is new). Only a directory marked by a complete step is ever read as that layout.
 */
export async function migrate(db: EmbeddedDatabases): Promise<MigrationReport> {
  const present = (): Set<string> =>
    new Set([...db.root.getKeys({})].filter((k): k is string => typeof k === 'string'));
  const report: MigrationReport = { from: LAYOUT, groups: 0, offsets: 0, unreadable: 0 };
  const layout = db.meta.get('layout');
  if (layout === undefined) {
    const legacy = LEGACY_DATABASES.filter((name) => present().has(name));
    if (legacy.length === 0) {
      // A new directory.
      await db.meta.put('layout', LAYOUT);
      return report;
    }
    report.from = 1;
    await migrateToLayout2(db, legacy, report);
  } else if (layout === 2) report.from = 2;
  else if (layout === 3) {
    // Nothing to copy (see above): the mark alone.
    report.from = 3;
    await db.meta.put('layout', LAYOUT);
  }
  if (db.meta.get('layout') !== LAYOUT) {
    const copied = { offsets: 0, unreadable: 0 };
    await migrateToLayout3(db, copied);
    // From layout 1 these are the offsets counted above once more.
    if (report.from === 2) Object.assign(report, copied);
  }
  // Marked, but a crash may have come before the layout-2 offsets were dropped.
  if (present().has(LAYOUT_2_OFFSETS)) await dropDatabases(db, [LAYOUT_2_OFFSETS]);
  return report;
}

/** offsets-v2, keys as raw bytes and values as lmdb-js's MessagePack (as layout 2 wrote them). */
const layout2Offsets = (db: EmbeddedDatabases): Database<Layout2Value, Buffer> =>
  db.root.openDB({ name: LAYOUT_2_OFFSETS, keyEncoding: 'binary' });

async function migrateToLayout2(
  db: EmbeddedDatabases,
  legacy: string[],
  report: MigrationReport,
): Promise<void> {
  const { root } = db;
  const offsetsV2 = layout2Offsets(db);
  if (legacy.length > 0) {
    for (const d of [offsetsV2, db.groups, db.requests, db.requestTimes]) await d.clearAsync();
    const oldGroups: Database<GroupState, Key> = root.openDB({ name: 'groups' });
    const oldOffsets: Database<LegacyOffset, Key> = root.openDB({ name: 'offsets' });
    const known = new Set<string>();
    await writeInPages(db, oldGroups.getRange({}), ({ key, value }) => {
      const name = legacyName(key);
      if (name === undefined) {
        report.unreadable++;
        return;
      }
      known.add(name);
      report.groups++;
      void db.groups.put(groupKey(name), { n: name, s: value ?? null } satisfies GroupRecord);
    });
    // Offsets of a group that had no state record: layout 2 lists groups from their records.
    const orphans = new Set<string>();
    await writeInPages(db, oldOffsets.getRange({}), ({ key, value }) => {
      const at = legacyOffsetKey(key, known);
      if (at === undefined || value === undefined) {
        report.unreadable++;
        return;
      }
      report.offsets++;
      const { o, e, m, c, x } = value;
      void offsetsV2.put(offsetKey(groupKey(at.group), at.topic, at.partition), [
        at.topic,
        o,
        e,
        m,
        c,
        x,
      ] satisfies Layout2Value);
      if (!known.has(at.group)) orphans.add(at.group);
    });
    await writeInPages(db, orphans, (name) => {
      report.groups++;
      void db.groups.put(groupKey(name), { n: name, s: null } satisfies GroupRecord);
    });
  }
  await db.meta.put('layout', 2);
  await root.flushed;
  await dropDatabases(db, legacy);
}

/** A layout-2 value as a write of layout 3; undefined when it is not one. */
function layout2Write(key: Buffer, value: unknown): OffsetWrite | undefined {
  if (key.length !== OFFSET_KEY_BYTES || !Array.isArray(value) || value.length !== 6) return undefined;
  const [t, o, e, m, c, x] = value as unknown[];
  const offset = parseDecimal(o);
  const commitTimestamp = parseDecimal(c);
  const expireTimestamp = parseDecimal(x);
  if (offset === undefined || commitTimestamp === undefined || expireTimestamp === undefined)
    return undefined;
  if (typeof t !== 'string' || typeof m !== 'string' || typeof e !== 'number' || (e | 0) !== e)
    return undefined;
  const partition = partitionOf(key);
  return { topic: t, partition, offset, leaderEpoch: e, metadata: m, commitTimestamp, expireTimestamp };
}

/**
 * The offsets of layout 2 as blocks of layout 3. Layout 2's keys sort by group, topic, then
 * partition, so each block's partitions come one after another: one block is built at a time.
 */
function* layout2Blocks(
  offsetsV2: Database<Layout2Value, Buffer>,
  counts: { offsets: number; unreadable: number },
): Generator<{ key: Buffer; value: Buffer }> {
  let prefix: Buffer | undefined;
  let block = 0;
  let writes: OffsetWrite[] = [];
  function* flush(): Generator<{ key: Buffer; value: Buffer }> {
    if (prefix === undefined || writes.length === 0) return;
    for (const b of encodeBlockWrites(writes)) {
      const key = Buffer.allocUnsafe(OFFSET_KEY_BYTES);
      prefix.copy(key, 0);
      key.writeUInt32BE((b.block ^ 0x80000000) >>> 0, DIGEST_BYTES * 2);
      yield { key, value: mergeBlock(undefined, b, '') };
    }
    writes = [];
  }
  for (const { key, value } of offsetsV2.getRange({})) {
    const write = layout2Write(key, value);
    if (write === undefined) {
      counts.unreadable++;
      continue;
    }
    const keyPrefix = key.subarray(0, DIGEST_BYTES * 2);
    if (prefix === undefined || !keyPrefix.equals(prefix) || blockOf(write.partition) !== block) {
      yield* flush();
      prefix = Buffer.from(keyPrefix);
      block = blockOf(write.partition);
    }
    writes.push(write);
    counts.offsets++;
  }
  yield* flush();
}

async function migrateToLayout3(
  db: EmbeddedDatabases,
  counts: { offsets: number; unreadable: number },
): Promise<void> {
  // A copy cut short by a crash is thrown away and redone.
  await db.offsets.clearAsync();
  const offsetsV2 = layout2Offsets(db);
  await writeInPages(db, layout2Blocks(offsetsV2, counts), ({ key, value }) => {
    void db.offsets.put(key, value);
  });
  await db.meta.put('layout', LAYOUT);
  await db.root.flushed;
}

async function dropDatabases(db: EmbeddedDatabases, names: string[]): Promise<void> {
  for (const name of names) await db.root.openDB({ name }).drop();
  await db.root.flushed;
}
