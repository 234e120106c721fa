/**
 * The embedded store's layout 4: one LMDB environment with these sub-databases, keyed by raw bytes built in embedded-keys.ts (fixed-width digests of
 * the names, so any name Kafka accepts fits and every range is bounded by construction):
 *   offsets-v3       G ‖ T ‖ block → the topic and the offsets of its partitions p with
 *                    p >> 7 = block, each with the read order of the commit that wrote it
 *                    (embedded-value.ts)
 *   groups-v2        G → { n, s }  (the group name, its GroupState or null)
 *   requests-v3      I ‖ G → r  (recent commit outcomes, for idempotent resends, of requests
 *                    with a time-ordered id I: request-id.ts; sorted and swept by issue time)
 *   requests-v2      G ‖ R → { at, r }  (the same for any other request id)
 *   request-times-v2 at ‖ G ‖ R → 1  (requests-v2 by time, so expiry reads only what expires)
 *   meta             'layout' → 4
 * where G = digest(group), T = digest(topic), R = digest(requestId). Every group with offsets or
 * membership has a groups-v2 record, so listing groups walks that one database.
 */
import type { Database, RootDatabase } from 'lmdb';
import { StoreCorruptError } from './errors.js';
import type { EncodedOutcome } from './outcome-codec.js';
import type { GroupState } from './store.js';

/** A groups-v2 value. */
export interface GroupRecord {
  n: string;
  s: GroupState | null;
}

export interface EmbeddedDatabases {
  root: RootDatabase;
  /** offsets-v3: raw bytes both ways (embedded-value.ts encodes and decodes the values). */
  offsets: Database<Buffer, Buffer>;
  groups: Database<GroupRecord, Buffer>;
  /** Outcomes of requests with time-ordered ids, by id (issue time first) and group. */
  orderedRequests: Database<EncodedOutcome, Buffer>;
  requests: Database<{ at: number; r: EncodedOutcome }, Buffer>;
  requestTimes: Database<1, Buffer>;
  /**
   * 'layout' → 4; 'lease:<name>' → a lease's holder and end (ms since the epoch); 'marker' → the
   * store's marker (proxy/data-loss-watch.ts); 'count:<name>' → a shared count (addToCount).
   */
  meta: Database<number | string | { h: string; u: number }, string>;
}

/** Opens (creating if needed) the layout-4 databases of an LMDB environment. */
export function openDatabases(root: RootDatabase): EmbeddedDatabases {
  const binary = { keyEncoding: 'binary' as const };
  return {
    root,
    offsets: root.openDB({ name: 'offsets-v3', ...binary, encoding: 'binary' }),
    groups: root.openDB({ name: 'groups-v2', ...binary }),
    orderedRequests: root.openDB({ name: 'requests-v3', ...binary }),
    requests: root.openDB({ name: 'requests-v2', ...binary }),
    requestTimes: root.openDB({ name: 'request-times-v2', ...binary }),
    meta: root.openDB({ name: 'meta' }),
  };
}

/** A groups-v2 record, checked: a malformed one, or one naming another group, is corruption. */
export function readGroupRecord(db: EmbeddedDatabases, group: string, key: Buffer): GroupRecord | undefined {
  const r = db.groups.get(key) as unknown;
  if (r === undefined) return undefined;
  const rec = r as Partial<GroupRecord>;
  if (typeof rec !== 'object' || rec === null || typeof rec.n !== 'string')
    throw new StoreCorruptError(group, 'group record is malformed');
  if (rec.n !== group)
    throw new StoreCorruptError(group, `group record names group ${JSON.stringify(rec.n)}`);
  const s = rec.s;
  if (s === undefined || (s !== null && (typeof s !== 'object' || !Array.isArray(s.members))))
    throw new StoreCorruptError(group, 'group record is malformed');
  return rec as GroupRecord;
}
