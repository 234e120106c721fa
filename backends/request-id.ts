/**
 * Request ids (CommitRequest.requestId) that sort by the time they were issued.
 *
 * The store contract needs them unique only (a resend is answered the first outcome). The
 * embedded store also keys its request records by them: random ids (v4 UUIDs, as before) put
 * every commit's record on a random leaf of that B-tree, so each write transaction dirtied (and
 * synced) one leaf per commit in it, and the sweep's removals did the same again. Ids that start
 * with their time are appended at the end of the tree and expire from its start.
 *
 * Format: 32 lowercase hex digits, 16 bytes:
 *   12 digits  the time it was issued (ms since the epoch, 48 bits: until the year 10889)
 *   12 digits  a random number drawn once per process (48 bits: processes, restarts included)
 *    8 digits  a counter of this process (wraps after 2^32 ids; with the time, unique)
 * Two processes share an id only if they drew the same random number and issued the same count
 * in the same millisecond.
 */
import { randomBytes } from 'node:crypto';

const TIME_DIGITS = 12;
const PROCESS_PART = randomBytes(6).toString('hex');
let counter = 0;

/** A new id, unique across processes and restarts, ordered by time within this process. */
export function newRequestId(): string {
  counter = (counter + 1) >>> 0;
  return (
    Date.now().toString(16).padStart(TIME_DIGITS, '0') + PROCESS_PART + counter.toString(16).padStart(8, '0')
  );
}

const FORMAT = /^[0-9a-f]{32}$/;

/**
 * The 16 bytes of an id of this format, whose first 6 are its time (big-endian); undefined for
 * any other string (ids of older releases, the operator's `admin-*` ids).
 */
export function timeOrderedIdBytes(requestId: string): Buffer | undefined {
  return FORMAT.test(requestId) ? Buffer.from(requestId, 'hex') : undefined;
}

/** The time (ms since the epoch) in the first 6 bytes of `timeOrderedIdBytes`. */
export const issuedAt = (idBytes: Uint8Array): number =>
  Buffer.from(idBytes.buffer, idBytes.byteOffset, 6).readUIntBE(0, 6);
