/**
 * Streams a Fetch response (v16/v17) to the client as its bytes arrive while still never letting
 * a broker address reach the client.
 *
 * Since v16 (KIP-951) a FetchResponse may end with the top-level tagged field NodeEndpoints (tag 0),
 * which names brokers by their real addresses. Everything before the top-level tagged-field section
 * (header, topics, partitions and their record batches: the bulk of the bytes) carries no address,
 * so `FetchResponseStream` walks the frame incrementally, chunk boundaries anywhere, and hands back
 * the bytes that may go to the client at once; only the small tagged-field section at the very end
 * is held. When the frame is complete, `finish` rewrites that section to exactly the same length
 * (the 4-byte size prefix went out first):
 *
 * - no NodeEndpoints (the usual case): the section goes out as the broker wrote it;
 * - NodeEndpoints rewritten to proxy addresses, if the result is not longer than the original,
 *   padded up to the original length with unknown tagged fields (clients skip unknown tags);
 * - otherwise NodeEndpoints is dropped (clients then refresh their metadata: correct, only slower)
 *   and the section is padded to the original length.
 *
 * Other top-level tags are kept as they are, in order. Every malformed byte sequence (including a
 * frame shorter or longer than its fields) raises ProtocolError; the walker accepts exactly what
 * the generated FetchResponse decoder accepts.
 */
import { ProtocolError } from '../../protocol/errors.js';
import type { ProtocolErrorCode } from '../../protocol/errors.js';
import { Reader } from '../../protocol/reader.js';
import type { TaggedField } from '../../protocol/reader.js';
import { Writer, sizeOfUvarint } from '../../protocol/writer.js';
import type { HostPort } from './broker-map.js';

/** The address a client must use for a broker, and (if not yet open) when its listener is up. */
export interface ExposedBroker extends HostPort {
  /** Resolves once the proxy listens on `port`; absent when it already does. */
  ready?: Promise<void>;
}

/** Learns a real broker and tells its proxy address synchronously (listener opening may follow). */
export type ExposeBrokerNow = (nodeId: number, upstream: HostPort) => ExposedBroker;

/**
 * Fetch versions whose answer layout the walker knows: v16 added NodeEndpoints, and v17 and v18
 * changed nothing in the answer (FetchResponse.json). A version the codec gains later is decoded
 * whole until it is checked and added here (fetch-stream.test.ts fails on the codec update).
 */
export const FETCH_STREAM_VERSIONS = { min: 16, max: 18 } as const;

export function canStreamFetch(apiVersion: number): boolean {
  return apiVersion >= FETCH_STREAM_VERSIONS.min && apiVersion <= FETCH_STREAM_VERSIONS.max;
}

/**
 * Tag of the padding fields: far above the tags Kafka assigns to FetchResponse (only 0 so far,
 * assigned from 0 upwards), still a one-byte varint. Above any tag the broker sent, if higher.
 */
export const PAD_TAG = 127;

// Grammar operations: a non-negative number skips that many bytes.
const VARINT = -1;
const TAIL = -2;
type Op = number;

const FETCH = 1;

function fail(code: ProtocolErrorCode, message: string, offset: number, apiVersion: number): ProtocolError {
  return new ProtocolError(code, message, offset).withApi(FETCH, apiVersion);
}

export type TailOutcome = 'unchanged' | 'rewritten' | 'dropped';

export interface FetchTail {
  /** The top-level tagged-field section to send, exactly as long as the broker's. */
  tail: Buffer;
  /** Resolves once every newly exposed broker's listener is open; null when nothing to wait for. */
  ready: Promise<void> | null;
  outcome: TailOutcome;
}

/**
 * Incremental walker over one Fetch v16/v17 response frame, its 4-byte size prefix included.
 * `push` every chunk in order; it returns the part that may be forwarded now (a view of the
 * chunk; what it keeps of the chunk, it copies). Once the last byte is in (`done`), `finish`
 * gives the rewritten tail.
 */
export class FetchResponseStream {
  /** Frame bytes consumed so far, size prefix included. */
  pos = 0;
  /** 4 + payload size, or -1 until the size prefix is in. */
  frameEnd = -1;
  private size = 0;
  private skipLeft = 0;
  private inTail = false;
  private vValue = 0;
  private vIndex = 0;
  private readonly tailParts: Buffer[] = [];
  private readonly grammar: Generator<Op, void, number>;

  constructor(readonly apiVersion: number) {
    if (!canStreamFetch(apiVersion)) {
      throw new ProtocolError(
        'UNSUPPORTED_VERSION',
        `cannot stream Fetch v${apiVersion}`,
        0,
        FETCH,
        apiVersion,
      );
    }
    this.grammar = fetchResponseGrammar(this);
  }

  /** True once every byte of the frame has been pushed. */
  get done(): boolean {
    return this.frameEnd >= 0 && this.pos === this.frameEnd;
  }

  /** Where the top-level tagged-field section starts (bytes before it are safe), or -1 if not yet known. */
  get safeBytes(): number {
    return this.inTail ? this.pos - this.tailLength() : -1;
  }

  private tailLength(): number {
    let n = 0;
    for (const b of this.tailParts) n += b.length;
    return n;
  }

  /** Feeds the next bytes of the frame; returns the part of `chunk` that may go to the client now. */
  push(chunk: Buffer): Buffer {
    const len = chunk.length;
    let off = 0;
    if (this.frameEnd < 0) {
      while (off < len && this.pos < 4) {
        this.size = this.size * 256 + chunk[off++]!;
        this.pos++;
      }
      if (this.pos < 4) return chunk;
      if (this.size > 0x7fffffff) {
        throw fail(
          'NEGATIVE_FRAME_SIZE',
          `negative response frame size ${this.size - 0x100000000}`,
          0,
          this.apiVersion,
        );
      }
      this.frameEnd = 4 + this.size;
      this.advance(0);
    }
    if (len - off > this.frameEnd - this.pos) {
      throw fail('BAD_LENGTH', `more bytes than the frame's ${this.size}`, this.pos, this.apiVersion);
    }
    let out = chunk;
    while (off < len) {
      if (this.inTail) {
        // A copy: the chunk's buffer may be read into again before the frame ends.
        this.tailParts.push(Buffer.from(chunk.subarray(off)));
        this.pos += len - off;
        out = chunk.subarray(0, off);
        break;
      }
      if (this.skipLeft > 0) {
        const n = Math.min(this.skipLeft, len - off);
        off += n;
        this.pos += n;
        this.skipLeft -= n;
        if (this.skipLeft === 0) this.advance(0);
        continue;
      }
      // An unsigned varint (at most 5 bytes, at most 32 bits), one byte at a time.
      const b = chunk[off++]!;
      this.pos++;
      if (this.vIndex === 4 && b > 0x0f) {
        throw fail('BAD_VARINT', 'unsigned varint does not fit in 32 bits', this.pos - 1, this.apiVersion);
      }
      this.vValue += (b & 0x7f) * 2 ** (7 * this.vIndex);
      if ((b & 0x80) !== 0) {
        this.vIndex++;
        continue;
      }
      const v = this.vValue;
      this.vValue = 0;
      this.vIndex = 0;
      this.advance(v);
    }
    if (this.pos === this.frameEnd && !this.inTail) {
      throw fail(
        'TRUNCATED',
        `response frame of ${this.size} bytes ends inside its fields`,
        this.pos,
        this.apiVersion,
      );
    }
    return out;
  }

  /** Runs the grammar until it asks for bytes. */
  private advance(value: number): void {
    for (;;) {
      const r = this.grammar.next(value);
      if (r.done === true) throw new Error('fetch response grammar ended before its tail');
      const op = r.value;
      if (op === VARINT) return;
      if (op === TAIL) {
        this.inTail = true;
        return;
      }
      if (op > this.frameEnd - this.pos) {
        throw fail(
          'TRUNCATED',
          `needed ${op} bytes at offset ${this.pos - 4}, only ${this.frameEnd - this.pos} left in the frame`,
          this.pos,
          this.apiVersion,
        );
      }
      if (op > 0) {
        this.skipLeft = op;
        return;
      }
      value = 0;
    }
  }

  /** Array counts are bounded by the bytes left in the frame, as the decoder bounds them. */
  checkCount(n: number): number {
    if (n > this.frameEnd - this.pos) {
      throw fail(
        'BAD_LENGTH',
        `array count ${n} exceeds the ${this.frameEnd - this.pos} bytes left`,
        this.pos,
        this.apiVersion,
      );
    }
    return n;
  }

  /** The tail, rewritten: see the module comment. Call once `done`. */
  finish(expose: ExposeBrokerNow): FetchTail {
    if (!this.done || !this.inTail) {
      throw fail('TRUNCATED', 'the fetch response is not complete', this.pos, this.apiVersion);
    }
    const section = this.tailParts.length === 1 ? this.tailParts[0]! : Buffer.concat(this.tailParts);
    return rewriteFetchTail(section, expose, this.apiVersion);
  }
}

/** The FetchResponse v16/v17 layout after the size prefix, as operations for the walker. */
function* fetchResponseGrammar(w: FetchResponseStream): Generator<Op, void, number> {
  yield 4; // correlation id
  yield* rawTags(w); // response header v1 tagged fields
  yield 10; // throttle_time_ms, error_code, session_id
  const topics = compactArray(w, yield VARINT);
  for (let t = 0; t < topics; t++) {
    yield 16; // topic_id
    const partitions = compactArray(w, yield VARINT);
    for (let p = 0; p < partitions; p++) {
      // partition_index, error_code, high_watermark, last_stable_offset, log_start_offset
      yield 30;
      const aborted = yield VARINT; // compact nullable array: 0 is null
      if (aborted > 0) {
        const n = w.checkCount(aborted - 1);
        for (let i = 0; i < n; i++) {
          yield 16; // producer_id, first_offset
          yield* rawTags(w);
        }
      }
      yield 4; // preferred_read_replica
      const records = yield VARINT; // compact nullable bytes: 0 is null
      if (records > 1) yield records - 1;
      yield* partitionTags(w);
    }
    yield* rawTags(w); // topic tagged fields
  }
  yield TAIL;
}

function compactArray(w: FetchResponseStream, n: number): number {
  if (n === 0) throw fail('UNEXPECTED_NULL', 'non-nullable compact array was null', w.pos, w.apiVersion);
  return w.checkCount(n - 1);
}

/** A tagged-field section whose fields are all skipped. */
function* rawTags(w: FetchResponseStream): Generator<Op, void, number> {
  const count = w.checkCount(yield VARINT);
  for (let i = 0; i < count; i++) {
    yield VARINT; // tag
    yield yield VARINT; // size, then its bytes
  }
}

/** Fixed bytes of the structs in PartitionData's known tags, before their own tagged fields. */
const PARTITION_TAG_FIXED = [
  12, // 0 DivergingEpoch: epoch int32, end_offset int64
  8, // 1 CurrentLeader: leader_id int32, leader_epoch int32
  12, // 2 SnapshotId: end_offset int64, epoch int32
];

/** PartitionData's tagged fields: the known ones must fill their size exactly, as the decoder checks. */
function* partitionTags(w: FetchResponseStream): Generator<Op, void, number> {
  const count = w.checkCount(yield VARINT);
  for (let i = 0; i < count; i++) {
    const tag = yield VARINT;
    const size = yield VARINT;
    const fixed = PARTITION_TAG_FIXED[tag];
    if (fixed === undefined) {
      yield size;
      continue;
    }
    if (size > w.frameEnd - w.pos) {
      throw fail('TRUNCATED', `tagged field of ${size} bytes runs past the frame`, w.pos, w.apiVersion);
    }
    const start = w.pos;
    yield fixed;
    yield* rawTags(w);
    if (w.pos - start !== size) {
      throw fail(
        'BAD_LENGTH',
        `partition tagged field ${tag} declares ${size} bytes, holds ${w.pos - start}`,
        start,
        w.apiVersion,
      );
    }
  }
}

// ---- the tail -----------------------------------------------------------------------------

interface Endpoint {
  nodeId: number;
  host: string;
  port: number;
  rack: string | null;
  tags: TaggedField[] | undefined;
}

function readEndpoints(data: Buffer): Endpoint[] {
  const r = new Reader(data);
  const n = r.compactArrayLength();
  const out: Endpoint[] = [];
  for (let i = 0; i < n; i++) {
    const nodeId = r.int32();
    const host = r.compactString();
    const port = r.int32();
    const rack = r.compactNullableString();
    out.push({ nodeId, host, port, rack, tags: r.rawTaggedFields() });
  }
  r.expectEnd();
  return out;
}

function writeEndpoints(endpoints: readonly Endpoint[]): Buffer {
  const w = new Writer(64 * endpoints.length + 8);
  w.compactArrayLength(endpoints.length);
  for (const e of endpoints) {
    w.int32(e.nodeId);
    w.compactString(e.host);
    w.int32(e.port);
    w.compactNullableString(e.rack);
    w.rawTaggedFields(e.tags);
  }
  return w.toBuffer();
}

function fieldSize(f: TaggedField): number {
  return sizeOfUvarint(f.tag) + sizeOfUvarint(f.data.length) + f.data.length;
}

/** The size `s` of a pad field of tag length `tagLen` taking exactly `k` bytes, or -1. */
function padSize(k: number, tagLen: number): number {
  for (let v = 1; v <= 5; v++) {
    const s = k - tagLen - v;
    if (s >= 0 && sizeOfUvarint(s) === v) return s;
  }
  return -1;
}

/**
 * `fields` (ascending tags) as a section of exactly `target` bytes, with one or two pad fields
 * after them if needed; null when it cannot be done: `fields` alone are longer, or 1 byte short
 * (2 when the pad tag takes two bytes, after a broker tag of 127 or more).
 */
export function encodeTaggedSection(fields: readonly TaggedField[], target: number): Buffer | null {
  let body = 0;
  let maxTag = -1;
  for (const f of fields) {
    body += fieldSize(f);
    maxTag = Math.max(maxTag, f.tag);
  }
  const write = (all: readonly TaggedField[]): Buffer => {
    const w = Writer.exact(target);
    w.uvarint(all.length);
    for (const f of all) w.rawTaggedField(f);
    return w.toBuffer();
  };
  if (sizeOfUvarint(fields.length) + body === target) return write(fields);
  const tag = Math.max(PAD_TAG, maxTag + 1);
  const pad = (t: number, s: number): TaggedField => ({ tag: t, data: Buffer.alloc(s) });
  const need1 = target - body - sizeOfUvarint(fields.length + 1);
  const s = padSize(need1, sizeOfUvarint(tag));
  if (s >= 0) return write([...fields, pad(tag, s)]);
  // A size the varint lengths skip over (e.g. 129): two pad fields.
  const need2 = target - body - sizeOfUvarint(fields.length + 2);
  for (let s1 = 0; s1 < 4; s1++) {
    const len1 = sizeOfUvarint(tag) + 1 + s1;
    const s2 = padSize(need2 - len1, sizeOfUvarint(tag + 1));
    if (s2 >= 0) return write([...fields, pad(tag, s1), pad(tag + 1, s2)]);
  }
  return null;
}

/**
 * Rewrites a FetchResponse's top-level tagged-field section (`section`, exactly as the broker sent
 * it) so that it names no broker, keeping its length. See the module comment. With `mayWait`
 * false (the native path cannot hold an answer back), NodeEndpoints naming a broker whose listener
 * is not open yet are dropped rather than rewritten.
 */
export function rewriteFetchTail(
  section: Buffer,
  expose: ExposeBrokerNow,
  apiVersion = 17,
  mayWait = true,
): FetchTail {
  const fields: TaggedField[] = [];
  const endpointsOf = new Map<number, Endpoint[]>();
  try {
    const r = new Reader(section);
    const count = r.taggedFieldCount();
    for (let k = 0; k < count; k++) {
      const tag = r.uvarint();
      const data = r.view(r.uvarint());
      if (tag === 0) endpointsOf.set(fields.length, readEndpoints(data));
      fields.push({ tag, data });
    }
    r.expectEnd();
  } catch (e) {
    if (e instanceof ProtocolError) e.withApi(FETCH, apiVersion);
    throw e;
  }

  const readies: Promise<void>[] = [];
  let changed = false;
  const rewritten = fields.map((f, i) => {
    const endpoints = endpointsOf.get(i);
    if (endpoints === undefined) return f;
    let any = false;
    for (const e of endpoints) {
      // As in address-rewrite: node -1 carries no usable address and stays as written.
      if (e.nodeId < 0) continue;
      const exposed = expose(e.nodeId, { host: e.host, port: e.port });
      e.host = exposed.host;
      e.port = exposed.port;
      if (exposed.ready) readies.push(exposed.ready);
      any = true;
    }
    if (!any) return f;
    changed = true;
    return { tag: f.tag, data: writeEndpoints(endpoints) };
  });
  if (!changed) return { tail: section, ready: null, outcome: 'unchanged' };

  const tail = encodeTaggedSection(rewritten, section.length);
  if (tail !== null && (mayWait || readies.length === 0)) {
    const ready = readies.length === 0 ? null : Promise.all(readies).then(() => undefined);
    return { tail, ready, outcome: 'rewritten' };
  }
  // Dropped: nobody waits for those listeners, but a failure to open one must not go unhandled.
  for (const p of readies) p.catch(() => undefined);
  const kept = fields.filter((f) => f.tag !== 0);
  const dropped = encodeTaggedSection(kept, section.length);
  if (dropped === null) {
    // Cannot happen: dropping frees at least 3 bytes, and any 2 or more can be padded.
    throw fail('CANNOT_PAD', `cannot pad a tagged section to ${section.length} bytes`, 0, apiVersion);
  }
  return { tail: dropped, ready: null, outcome: 'dropped' };
}
