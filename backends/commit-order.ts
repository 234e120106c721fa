/**
 * A commit's read order (CommitRequest.order): which proxy process read it from a client socket,
 * and when, as a number that only grows within that process. The stores keep, per partition, the
 * order of the commit that wrote the offset, and skip the writes of a commit the same process
 * read earlier ("later read wins", docs/design.md): such a commit was pending while the newer one
 * applied, and the broker, which handles a member's requests in the order it receives them, would
 * have applied it first. Without this an older commit that reaches the store late (queued behind
 * a paused connection, or a Redis script held by a frozen network hop) overwrites a newer,
 * acknowledged one.
 *
 * Only orders of one instance are compared: two processes' sequence numbers say nothing about
 * each other.
 */
import { randomBytes } from 'node:crypto';

export interface CommitOrder {
  /** The reading process: 16 lowercase hex digits, never all zero (newInstanceId). */
  instance: string;
  /** Taken when the request was read; grows within the process; a safe integer >= 1. */
  seq: number;
  /**
   * false: no commit of the group that this process read earlier could still write when this one
   * was handled (proxy/offsets/commits-in-progress.ts), so no older commit of this instance can
   * reach the store after this one, and a store may leave its order unrecorded (Redis does: the
   * orders are then read and written only around contention). Absent or true: record it. Either
   * way the commit itself is judged against the stored orders.
   */
  contended?: boolean;
}

export const INSTANCE_FORMAT = /^[0-9a-f]{16}$/;
/** The stored form of "no order" where a store keeps fixed-width fields (embedded-value.ts). */
export const NO_INSTANCE = '0000000000000000';

/** A random instance id (64 bits: two processes drawing the same one is not a concern). */
export function newInstanceId(): string {
  for (;;) {
    const id = randomBytes(8).toString('hex');
    if (id !== NO_INSTANCE) return id;
  }
}

/** Checks an order a store is given (the proxy's own; anything else is a caller's bug). */
export function checkOrder(order: CommitOrder | undefined): void {
  if (order === undefined) return;
  if (!INSTANCE_FORMAT.test(order.instance) || order.instance === NO_INSTANCE)
    throw new RangeError(`commit order instance ${JSON.stringify(order.instance)} is not 16 hex digits`);
  if (!Number.isSafeInteger(order.seq) || order.seq < 1)
    throw new RangeError(`commit order seq ${order.seq} is not a positive safe integer`);
}

/**
 * Whether a write of a commit read at `order` is superseded by the stored offset's `stored`
 * order: the same process read the stored one later. A commit without an order (the operator's
 * writes, an older caller) is never superseded, and one over an offset without an order neither.
 * Equal orders are one request (naming a partition twice) or its retry: not superseded.
 */
export function isSuperseded(order: CommitOrder | undefined, stored: CommitOrder | undefined): boolean {
  return (
    order !== undefined &&
    stored !== undefined &&
    stored.instance === order.instance &&
    stored.seq > order.seq
  );
}
