/**
 * Brings an embedded data directory to layout 2 (embedded-store.ts) when it opens.
 *
 * Layout 1 (releases before layout 2) kept `offsets` [group, topic, partition] → {o,e,m,c,x},
 * `groups` group → GroupState, and request records, all under lmdb-js's ordered-binary keys.
 * Reading it back key by key is sound with one exception: a name of 64 or more characters holding
 * NUL decodes as several array elements, since NUL is the array separator and such strings are
 * written unescaped. Those are rejoined with NUL, using the group names the directory lists to
 * tell where the group ends and the topic begins.
 *
 * The copy runs in pages of write transactions, so a large directory neither holds the event loop
 * nor needs one huge transaction. Only the last step marks the directory as layout 2; a copy cut
 * short (a crash) is thrown away and redone on the next open. Request records are not copied:
 * they only matter for a resend within a running process. The layout-1 databases are dropped last.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Database, Key } from 'lmdb';
import { groupKey, offsetKey } from './embedded-keys.js';
import type { EmbeddedDatabases, GroupRecord, StoredValue } from './embedded-store.js';
import type { GroupState } from './store.js';

export const LAYOUT = 2;
const LEGACY_DATABASES = ['offsets', 'groups', 'requests', 'request-times'];
const PAGE = 5_000;

/** A layout-1 offsets value (read as found; layout 2 checks its fields when it reads them). */
interface LegacyOffset {
  o: string;
  e: number;
  m: string;
  c: string;
  x: string;
}

export interface MigrationReport {
  groups: number;
  offsets: number;
  /** Layout-1 keys that named no readable group, topic and partition (left behind, counted). */
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

export async function migrateToLayout2(db: EmbeddedDatabases): Promise<MigrationReport> {
  const { root } = db;
  const present = new Set([...root.getKeys({})].filter((k): k is string => typeof k === 'string'));
  const legacy = LEGACY_DATABASES.filter((name) => present.has(name));
  const report: MigrationReport = { groups: 0, offsets: 0, unreadable: 0 };
  if (db.meta.get('layout') === LAYOUT) {
    // Marked, but a crash came before the layout-1 databases were dropped.
    await dropLegacy(db, legacy);
    return report;
  }
  if (legacy.length > 0) {
    for (const d of [db.offsets, db.groups, db.requests, db.requestTimes]) await d.clearAsync();
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
      void db.offsets.put(offsetKey(groupKey(at.group), at.topic, at.partition), [
        at.topic,
        o,
        e,
        m,
        c,
        x,
      ] satisfies StoredValue);
      if (!known.has(at.group)) orphans.add(at.group);
    });
    await writeInPages(db, orphans, (name) => {
      report.groups++;
      void db.groups.put(groupKey(name), { n: name, s: null } satisfies GroupRecord);
    });
  }
  await db.meta.put('layout', LAYOUT);
  await root.flushed;
  await dropLegacy(db, legacy);
  return report;
}

async function dropLegacy(db: EmbeddedDatabases, names: string[]): Promise<void> {
  for (const name of names) await db.root.openDB({ name }).drop();
  await db.root.flushed;
}
