/**
 * The read order of requests: a number per request, taken when the request is read from its
 * client's socket, that grows across every connection of this process (RequestInfo.readSeq).
 * An extension that applies requests later than it read them (a queue behind a paused connection,
 * a store that delivers a write late) can tell which of two was read first; the offset store uses
 * it so that a commit read before a newer one never overwrites it (backends/commit-order.ts).
 */
let last = 0;

/** The next number: 1, 2, ... (a safe integer for longer than any process runs). */
export function nextReadSeq(): number {
  return ++last;
}
