/**
 * Where the ZooKeeper store keeps what under its chroot (Kafka 0.8's layout: see
 * zookeeper-store.ts), how names become path segments, and what its znodes hold.
 */
import type { Stat } from 'node-zookeeper-client';
import type { CommitOrder } from './commit-order.js';
import { StoreCorruptError } from './errors.js';
import { parseDecimal } from './outcome-codec.js';
import type { GroupState, OffsetWrite, TopicPartition } from './store.js';

/** A znode as read: its data (undefined when empty) and its Stat. */
export interface Read {
  data: Buffer | undefined;
  stat: Stat;
}

/** Percent-encodes what ZooKeeper does not allow in a path segment, plus '%' and '/'. */
export function encodeSegment(name: string): string {
  if (name === '') return '%';
  if (name === '.' || name === '..') return name.replace(/\./g, '%2E');
  let out = '';
  for (const ch of name) {
    const cp = ch.codePointAt(0)!;
    const forbidden =
      ch === '%' ||
      ch === '/' ||
      cp < 0x20 ||
      (cp >= 0x7f && cp <= 0x9f) ||
      (cp >= 0xd800 && cp <= 0xf8ff) ||
      cp >= 0xfff0;
    out += forbidden ? encodeURIComponent(ch) : ch;
  }
  return out;
}

export function decodeSegment(segment: string): string {
  return segment === '%' ? '' : decodeURIComponent(segment);
}

/** Identifies a partition within one commit. */
export const tpKey = (tp: TopicPartition): string => `${tp.topic}\u0000${tp.partition}`;

/**
 * The metadata znode's content for a write: what Kafka 0.8's plain offset znode cannot hold, and
 * `r`, the read order of the commit (commit-order.ts), when it has one. The offset znode stays a
 * plain decimal number, as its readers (Burrow, CMAK) expect.
 */
export const metaData = (w: OffsetWrite, order?: CommitOrder): Buffer =>
  Buffer.from(
    JSON.stringify({
      o: String(w.offset),
      e: w.leaderEpoch,
      m: w.metadata,
      c: String(w.commitTimestamp),
      x: String(w.expireTimestamp),
      ...(order === undefined ? {} : { r: `${order.instance}:${order.seq}` }),
    }),
  );

const ORDER_TEXT = /^([0-9a-f]{16}):(\d{1,16})$/;

/**
 * The read order of the commit that wrote a partition: from its metadata znode, when that one
 * describes the offset znode as read (the same offset; else it is left over, or beside a Kafka
 * 0.8 consumer's offset, and says nothing). Undefined when there is none, or it is not ours.
 */
export function storedOrder(offsetRead: Read | null, metaRead: Read | null): CommitOrder | undefined {
  if (offsetRead === null || metaRead === null) return undefined;
  let meta: { o?: unknown; r?: unknown };
  try {
    meta = JSON.parse(metaRead.data?.toString('utf8') ?? '') as { o?: unknown; r?: unknown };
  } catch {
    return undefined;
  }
  if (typeof meta !== 'object' || meta === null || typeof meta.r !== 'string') return undefined;
  if (meta.o !== offsetRead.data?.toString('utf8').trim()) return undefined;
  const m = ORDER_TEXT.exec(meta.r);
  return m === null ? undefined : { instance: m[1]!, seq: Number(m[2]) };
}

/** The paths of one store's znodes under its chroot (`root`, '' for none). */
export class ZooKeeperZnodes {
  constructor(readonly root: string) {}

  /** Where the groups are: what Kafka 0.8 layout readers (Burrow, CMAK) watch. */
  get consumers(): string {
    return `${this.root}/consumers`;
  }
  group(g: string): string {
    return `${this.consumers}/${encodeSegment(g)}`;
  }
  offset(g: string, tp: TopicPartition): string {
    return `${this.group(g)}/offsets/${encodeSegment(tp.topic)}/${tp.partition}`;
  }
  meta(g: string, tp: TopicPartition): string {
    return `${this.group(g)}/kop-offset-meta/${encodeSegment(tp.topic)}/${tp.partition}`;
  }
  state(g: string): string {
    return `${this.group(g)}/kop-state`;
  }
  requestMarker(g: string, requestId: string): string {
    return `${this.group(g)}/kop-requests/${encodeSegment(requestId)}`;
  }
  get leases(): string {
    return `${this.root}/kop-leases`;
  }
  lease(name: string): string {
    return `${this.leases}/${encodeSegment(name)}`;
  }
  get counts(): string {
    return `${this.root}/kop-counts`;
  }
  count(name: string): string {
    return `${this.counts}/${encodeSegment(name)}`;
  }
  /** The store's marker: under the chroot, beside consumers/, written once, gone with the chroot. */
  get storeMarker(): string {
    return `${this.root}/kop-marker`;
  }
}

export function parseState(group: string, read: Read | null): GroupState | null {
  if (read === null) return null;
  try {
    const s = JSON.parse(read.data?.toString('utf8') ?? '') as GroupState;
    if (typeof s === 'object' && s !== null && Array.isArray(s.members)) return s;
  } catch {
    // fall through
  }
  throw new StoreCorruptError(group, 'kop-state znode is not a group record');
}

export function parseOffset(group: string, tp: TopicPartition, read: Read): bigint {
  const offset = parseDecimal(read.data?.toString('utf8').trim());
  if (offset === undefined)
    throw new StoreCorruptError(group, `offset znode of ${tp.topic}-${tp.partition} is not a decimal number`);
  return offset;
}

/** A lease znode's {h, u} (holder, end in ms since the epoch), or null if it is not ours. */
export function parseLease(read: Read): { h: string; u: number } | null {
  try {
    const v = JSON.parse(read.data?.toString('utf8') ?? '') as { h?: unknown; u?: unknown };
    return typeof v.h === 'string' && typeof v.u === 'number' ? { h: v.h, u: v.u } : null;
  } catch {
    // Not ours: a lease anyone may take.
    return null;
  }
}
