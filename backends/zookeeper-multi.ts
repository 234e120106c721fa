/**
 * Sizing and splitting of ZooKeeper multis. A ZooKeeper server drops the connection of a client
 * that sends a packet longer than its `jute.maxbuffer` (1 MB - 1 byte by default), and a follower
 * refuses a proposal much larger than it, so a multi that does not fit can never apply: retrying
 * it only loses the connection again. The store therefore estimates each multi from its jute
 * serialization and splits a commit that would not fit into several multis (zookeeper-commit.ts
 * says what each of them carries and how a split commit is retried).
 */
import type { Transaction } from 'node-zookeeper-client';

/** One operation of a multi, before it is handed to the library's Transaction. */
export type MultiOp =
  | { type: 'create'; path: string; data: Buffer }
  | { type: 'setData'; path: string; data: Buffer; version: number }
  | { type: 'check'; path: string; version: number };

/**
 * Default limit for one multi, in bytes as sent (length prefix included): below the server's
 * default 1,048,575 with room for what the server adds when it logs and forwards the transaction
 * (a few dozen bytes per multi) and for paths or data a little longer than estimated.
 */
export const DEFAULT_MAX_MULTI_BYTES = 900_000;

// jute encodings: int 4, long 8, boolean 1, string and buffer 4 + bytes, vector 4 + elements.
const MULTI_HEADER = 4 + 1 + 4; // type, done, err: before every op, and once more at the end
/** The ACL the library gives a create when none is passed: world:anyone, all permissions. */
const OPEN_ACL = 4 + 4 + (4 + 'world'.length) + (4 + 'anyone'.length);
const STAT = 8 + 8 + 8 + 8 + 4 + 4 + 4 + 8 + 4 + 4 + 8;
/** Request: length prefix, RequestHeader (xid, type), the end marker. */
const REQUEST_FRAME = 4 + 4 + 4 + MULTI_HEADER;
/** Response: length prefix, ReplyHeader (xid, zxid, err), the end marker. */
const RESPONSE_FRAME = 4 + 4 + 8 + 4 + MULTI_HEADER;

/**
 * Bytes one op adds to the request and to the response. The response counts too: a setData is
 * answered with a 68-byte Stat, more than a short setData request takes. A failed multi answers
 * every op with a 4-byte error code, which is never more than its success answer (a check's is
 * empty, so 4 is counted for it).
 */
export function opBytes(op: MultiOp): { request: number; response: number } {
  const path = 4 + Buffer.byteLength(op.path);
  switch (op.type) {
    case 'create':
      // path, data, acl, flags; answered with the path.
      return {
        request: MULTI_HEADER + path + 4 + op.data.length + OPEN_ACL + 4,
        response: MULTI_HEADER + path,
      };
    case 'setData':
      // path, data, version; answered with the Stat.
      return { request: MULTI_HEADER + path + 4 + op.data.length + 4, response: MULTI_HEADER + STAT };
    case 'check':
      return { request: MULTI_HEADER + path + 4, response: MULTI_HEADER + 4 };
  }
}

/** Request and response bytes of some ops, without the multi's frame. */
function opsBytes(ops: MultiOp[]): { request: number; response: number } {
  let request = 0;
  let response = 0;
  for (const op of ops) {
    const b = opBytes(op);
    request += b.request;
    response += b.response;
  }
  return { request, response };
}

/** The larger of the request and the response of one multi of these ops, in bytes. */
export function multiBytes(ops: MultiOp[]): number {
  const b = opsBytes(ops);
  return Math.max(REQUEST_FRAME + b.request, RESPONSE_FRAME + b.response);
}

/** What every multi of one commit starts with (the first may differ) and what the last ends with. */
export interface MultiFrame {
  firstHead: MultiOp[];
  head: MultiOp[];
  tail: MultiOp[];
}

export interface MultiPlan {
  ops: MultiOp[];
  /** Indexes (into `units`) of the units this multi carries. */
  units: number[];
}

/**
 * Packs `units` (each a group of ops that must stay in one multi, such as a partition's offset
 * and metadata znodes) in order into as few multis of at most `limit` bytes as fit. Every multi
 * starts with `head` (the first one with `firstHead`) and the last one ends with `tail`; room for
 * the tail is kept in each, so a list of units fits in one multi exactly when all of it does. A
 * unit larger than the limit on its own still gets a multi of its own (nothing smaller exists).
 */
export function splitMulti(units: MultiOp[][], frame: MultiFrame, limit: number): MultiPlan[] {
  const plans: MultiPlan[] = [{ ops: [...frame.firstHead], units: [] }];
  const open = (head: MultiOp[]) => {
    const b = opsBytes([...head, ...frame.tail]);
    return { request: REQUEST_FRAME + b.request, response: RESPONSE_FRAME + b.response };
  };
  let size = open(frame.firstHead);
  units.forEach((unit, i) => {
    const more = opsBytes(unit);
    let plan = plans.at(-1)!;
    const over = Math.max(size.request + more.request, size.response + more.response) > limit;
    if (over && plan.units.length > 0) {
      plan = { ops: [...frame.head], units: [] };
      plans.push(plan);
      size = open(frame.head);
    }
    plan.ops.push(...unit);
    plan.units.push(i);
    size.request += more.request;
    size.response += more.response;
  });
  plans.at(-1)!.ops.push(...frame.tail);
  return plans;
}

/** Adds the ops to a library Transaction, in order. */
export function toTransaction(tx: Transaction, ops: MultiOp[]): Transaction {
  for (const op of ops) {
    if (op.type === 'create') tx.create(op.path, op.data);
    else if (op.type === 'setData') tx.setData(op.path, op.data, op.version);
    else tx.check(op.path, op.version);
  }
  return tx;
}
