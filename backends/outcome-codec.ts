/**
 * Commit outcomes as plain JSON-safe values (bigint as decimal strings), for stores that record
 * a request's outcome to answer a resend of it (embedded, Redis, ZooKeeper).
 */
import type { CommitOutcome, GuardErrorCode } from './store.js';

export type EncodedOutcome =
  /** n: CommitOutcome.superseded, when there were any. */
  | { s: 'ok'; n?: number }
  | { s: 'fenced'; e: number }
  | { s: 'txn' }
  | { s: 'cas'; m: { t: string; p: number; x: string; a: string }[] };

export function encodeOutcome(o: CommitOutcome): EncodedOutcome {
  switch (o.status) {
    case 'ok':
      return o.superseded === undefined ? { s: 'ok' } : { s: 'ok', n: o.superseded };
    case 'fenced':
      return { s: 'fenced', e: o.error };
    case 'transactional':
      return { s: 'txn' };
    case 'cas-mismatch':
      return {
        s: 'cas',
        m: o.mismatches.map((m) => ({
          t: m.topic,
          p: m.partition,
          x: String(m.expected),
          a: String(m.actual),
        })),
      };
  }
}

export function decodeOutcome(e: EncodedOutcome): CommitOutcome {
  switch (e.s) {
    case 'ok':
      return typeof e.n === 'number' && e.n > 0 ? { status: 'ok', superseded: e.n } : { status: 'ok' };
    case 'fenced':
      return { status: 'fenced', error: e.e as GuardErrorCode };
    case 'txn':
      return { status: 'transactional' };
    case 'cas':
      return {
        status: 'cas-mismatch',
        mismatches: e.m.map((m) => ({
          topic: m.t,
          partition: m.p,
          expected: BigInt(m.x),
          actual: BigInt(m.a),
        })),
      };
  }
}

/** Parses a stored decimal offset/timestamp; undefined when it is not one. */
export function parseDecimal(s: unknown): bigint | undefined {
  if (typeof s !== 'string' || !/^-?\d{1,20}$/.test(s)) return undefined;
  return BigInt(s);
}
