// The order of answers on one connection without sockets: broker answers and local answers in the
// client's order, correlation with the broker's order, streaming only at the head, requests of the
// proxy's own that never reach the client, --max-in-flight and drain.
import { describe, expect, test } from 'vitest';
import { ProtocolError } from '../../protocol/errors.js';
import type { ResponseHandling } from './api-plan.js';
import { ResponseQueue, answeredBy } from './response-queue.js';
import type { BrokerPending, LocalPending, OwnRequest, RawTokenPending } from './response-queue.js';

const place = (correlationId: number) => ({
  correlationId,
  apiKey: 3,
  apiVersion: 1,
  started: 0,
  out: null,
  outBytes: 0,
});

/** A forwarded request whose whole answer is recorded in `answers`. */
function broker(
  q: ResponseQueue,
  id: number,
  response: ResponseHandling = 'decode',
  answers?: number[],
): BrokerPending {
  const p: BrokerPending = {
    ...place(id),
    kind: 'broker',
    response,
    awaitingBroker: false,
    onResponse: (frame) => {
      answers?.push(frame.readInt32BE(0));
      q.answer(p, [frame]);
    },
  };
  q.add(p);
  q.sent(p);
  return p;
}

function local(q: ResponseQueue, id: number): LocalPending {
  const p: LocalPending = { ...place(id), kind: 'local' };
  q.add(p);
  return p;
}

/** A broker answer frame (without the size prefix) carrying `id`. */
const frame = (id: number): Buffer => {
  const b = Buffer.alloc(8);
  b.writeInt32BE(id, 0);
  return b;
};

/** The broker answers the oldest request owed, read whole. */
function brokerAnswers(q: ResponseQueue, id: number): void {
  expect(q.route(8, id)).toBe('whole');
  q.takeWhole().onResponse(frame(id));
}

/** The broker answers the oldest request owed with `payload` at hand: read whole. */
function brokerAnswersWith(q: ResponseQueue, id: number, payload: Buffer): void {
  expect(q.route(payload.length, id, payload)).toBe('whole');
  q.takeWhole().onResponse(payload);
}

/** Correlation ids of what can go to the client now, in order. */
function drainReady(q: ResponseQueue): number[] {
  const out: number[] = [];
  for (let p = q.takeReady(); p !== undefined; p = q.takeReady()) out.push(p.correlationId);
  return out;
}

describe('the client order', () => {
  test('a local answer mid-pipeline waits for the broker answer before it, then both go', () => {
    const q = new ResponseQueue(100);
    broker(q, 1);
    const l = local(q, 2);
    broker(q, 3);
    q.answer(l, [frame(2)]);
    expect(drainReady(q)).toEqual([]);
    brokerAnswers(q, 1);
    expect(drainReady(q)).toEqual([1, 2]);
    brokerAnswers(q, 3);
    expect(drainReady(q)).toEqual([3]);
    expect(q.idle).toBe(true);
  });

  test('local answers given out of order still go in request order', () => {
    const q = new ResponseQueue(100);
    const a = local(q, 1);
    const b = local(q, 2);
    const c = local(q, 3);
    q.answer(c, [frame(3)]);
    q.answer(b, [frame(2)]);
    expect(drainReady(q)).toEqual([]);
    q.answer(a, [frame(1)]);
    expect(drainReady(q)).toEqual([1, 2, 3]);
  });

  test('answer counts the bytes it is given', () => {
    const q = new ResponseQueue(100);
    const l = local(q, 1);
    expect(q.answer(l, [Buffer.alloc(4), Buffer.alloc(10)])).toBe(14);
    expect(q.takeReady()?.outBytes).toBe(14);
  });

  test('a local request forwarded after all keeps its place, now awaiting the broker', () => {
    const q = new ResponseQueue(100);
    const l = local(q, 1);
    const after = local(q, 2);
    q.answer(after, [frame(2)]);
    expect(q.headAwaitsBroker).toBe(false);
    const p: BrokerPending = {
      ...place(1),
      kind: 'broker',
      response: 'decode',
      awaitingBroker: false,
      onResponse: (f) => q.answer(p, [f]),
    };
    q.replace(l, p);
    q.sent(p);
    expect(q.head).toBe(p);
    expect(q.headAwaitsBroker).toBe(true);
    brokerAnswers(q, 1);
    expect(drainReady(q)).toEqual([1, 2]);
  });

  test('who answered, as metrics count it', () => {
    const q = new ResponseQueue(100);
    expect(answeredBy(local(q, 1))).toBe('proxy');
    expect(answeredBy(broker(q, 2))).toBe('broker');
  });
});

describe('correlation with the broker', () => {
  test('an answer with nothing owed is refused as UNSOLICITED', () => {
    const q = new ResponseQueue(100);
    local(q, 1);
    expect(() => q.route(8, 1)).toThrow(expect.objectContaining({ code: 'UNSOLICITED' }) as Error);
  });

  test('an answer whose correlation id is not the oldest owed is refused as OUT_OF_ORDER', () => {
    const q = new ResponseQueue(100);
    broker(q, 1);
    broker(q, 2);
    let err: unknown;
    try {
      q.route(8, 2);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ProtocolError);
    expect((err as ProtocolError).code).toBe('OUT_OF_ORDER');
  });

  test('a frame too short for a correlation id is out of order too', () => {
    const q = new ResponseQueue(100);
    broker(q, 1);
    expect(() => q.route(2, null)).toThrow(expect.objectContaining({ code: 'OUT_OF_ORDER' }) as Error);
  });

  test('a raw SASL token is matched by position, whatever its first bytes say', () => {
    const q = new ResponseQueue(100);
    const raw: RawTokenPending = {
      ...place(-1),
      kind: 'raw-token',
      awaitingBroker: false,
      onResponse: (f) => q.answer(raw, [f]),
    };
    q.add(raw);
    q.sent(raw);
    expect(q.route(8, 0x12345678)).toBe('whole');
    q.takeWhole().onResponse(frame(0x12345678));
    const sent = q.takeReady();
    expect(sent?.kind).toBe('raw-token');
  });

  test("a request of the proxy's own is answered in its turn and never reaches the client", () => {
    const q = new ResponseQueue(100);
    const own: string[] = [];
    broker(q, 1);
    const o: OwnRequest = {
      kind: 'own',
      correlationId: -1,
      onResponse: () => own.push('answered'),
      onLost: () => own.push('lost'),
    };
    q.sent(o);
    broker(q, 2);
    brokerAnswers(q, 1);
    expect(() => q.route(8, 2)).toThrow(expect.objectContaining({ code: 'OUT_OF_ORDER' }) as Error);
    brokerAnswers(q, -1);
    brokerAnswers(q, 2);
    expect(own).toEqual(['answered']);
    expect(drainReady(q)).toEqual([1, 2]);
    expect(q.idle).toBe(true);
  });

  test("closing fails the proxy's own requests still owed and drops every place", () => {
    const q = new ResponseQueue(100);
    const lost: string[] = [];
    broker(q, 1);
    q.sent({
      kind: 'own',
      correlationId: -1,
      onResponse: () => undefined,
      onLost: (e) => lost.push(e.message),
    });
    q.clear('client closed');
    expect(lost).toEqual(['connection closed: client closed']);
    expect(q.idle).toBe(true);
    expect(q.inFlight).toBe(0);
  });
});

describe('streaming', () => {
  test('an answer that may go as-is streams only at the head of the client order', () => {
    const q = new ResponseQueue(100);
    const l = local(q, 1);
    broker(q, 2, 'as-is');
    broker(q, 3, 'as-is');
    // Behind an unanswered local request: read whole, it cannot go yet.
    brokerAnswers(q, 2);
    q.answer(l, [frame(1)]);
    expect(drainReady(q)).toEqual([1, 2]);
    // Now at the head: streamed.
    expect(q.route(8, 3)).toBe('stream');
    expect(q.streaming?.correlationId).toBe(3);
    expect(q.headAwaitsBroker).toBe(true);
    expect(q.finishStream().correlationId).toBe(3);
    expect(q.streaming).toBeNull();
    expect(q.idle).toBe(true);
  });

  test('a Fetch answer to rewrite streams like one as-is; one to decode never streams', () => {
    const q = new ResponseQueue(100);
    broker(q, 1, 'fetch-stream');
    expect(q.route(8, 1)).toBe('stream');
    q.finishStream();
    broker(q, 2, 'decode');
    expect(q.route(8, 2)).toBe('whole');
  });

  test('a Produce answer to walk streams at the head only when whole at hand and unchanged', () => {
    const seen: number[] = [];
    // Unchanged when the payload's second int32 is 0 (a stand-in for "no NodeEndpoints").
    const q = new ResponseQueue(100, (a, payload) => {
      seen.push(a.correlationId);
      return payload.readInt32BE(4) === 0;
    });
    broker(q, 1, 'walk-produce');
    expect(q.route(8, 1, frame(1))).toBe('stream');
    q.finishStream();
    // Changed: read whole, to be decoded and rewritten.
    broker(q, 2, 'walk-produce');
    const changed = frame(2);
    changed.writeInt32BE(1, 4);
    brokerAnswersWith(q, 2, changed);
    expect(drainReady(q)).toEqual([2]);
    // Not at hand (the frame spans reads): whole, and not asked.
    broker(q, 3, 'walk-produce');
    brokerAnswers(q, 3);
    // Behind a local answer still owed: whole, and not asked.
    const l = local(q, 4);
    broker(q, 5, 'walk-produce');
    brokerAnswersWith(q, 5, frame(5));
    q.answer(l, [frame(4)]);
    expect(drainReady(q)).toEqual([3, 4, 5]);
    expect(seen).toEqual([1, 2]);
  });
});

describe('--max-in-flight', () => {
  test('full at the limit; an answer that goes out makes room', () => {
    const q = new ResponseQueue(2);
    const a = local(q, 1);
    expect(q.full).toBe(false);
    local(q, 2);
    expect(q.full).toBe(true);
    expect(q.inFlight).toBe(2);
    q.answer(a, [frame(1)]);
    // Answered is not enough: it must have gone to the client.
    expect(q.full).toBe(true);
    expect(drainReady(q)).toEqual([1]);
    expect(q.full).toBe(false);
  });

  test('answers that are owed by the broker only (own requests) take no place', () => {
    const q = new ResponseQueue(1);
    q.sent({ kind: 'own', correlationId: -1, onResponse: () => undefined, onLost: () => undefined });
    expect(q.full).toBe(false);
    expect(q.idle).toBe(false);
  });
});

describe('drain', () => {
  test('resolves at once when nothing is owed to the client', async () => {
    const q = new ResponseQueue(10);
    await q.whenEmpty(60_000);
  });

  test('resolves when the last answer owed goes, not before', async () => {
    const q = new ResponseQueue(10);
    broker(q, 1);
    const l = local(q, 2);
    let done = false;
    const drained = q.whenEmpty(60_000).then(() => (done = true));
    brokerAnswers(q, 1);
    drainReady(q);
    await Promise.resolve();
    expect(done).toBe(false);
    q.answer(l, [frame(2)]);
    drainReady(q);
    await drained;
    expect(done).toBe(true);
  });

  test('resolves when a streamed answer was the last one', async () => {
    const q = new ResponseQueue(10);
    broker(q, 1, 'as-is');
    const drained = q.whenEmpty(60_000);
    q.route(8, 1);
    q.finishStream();
    await drained;
  });

  test('gives up after its deadline', async () => {
    const q = new ResponseQueue(10);
    local(q, 1);
    const started = Date.now();
    await q.whenEmpty(50);
    expect(Date.now() - started).toBeGreaterThanOrEqual(40);
    expect(q.inFlight).toBe(1);
  });
});
