// Requests the extension answers: one at a time per connection, none started while the client
// has not read what it was sent (except the one at the head, while the client reads), an answer
// keeping its place, a request forwarded after all keeping it too, a failing extension closing.
import { expect, test } from 'vitest';
import { decodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { defaultOffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import { recordingHost } from '../../test/harness/connection-parts.js';
import type { RequestDecision } from './extension.js';
import { LocalAnswers } from './local-answers.js';
import type { LocalAnswer } from './local-answers.js';
import { CONNECTION_RESPONSE_BYTES, ResponseBacklog } from './response-backlog.js';
import { ResponseQueue } from './response-queue.js';
import type { BrokerPending, LocalPending, Pending } from './response-queue.js';

function localsBed() {
  const host = recordingHost();
  const backlog = new ResponseBacklog(null);
  const queue = new ResponseQueue(100);
  const completed: { p: Pending; out: Buffer[] }[] = [];
  const forwarded: { frame: Buffer; p: BrokerPending | null }[] = [];
  const decisions: ((d: RequestDecision) => void)[] = [];
  const failures: ((err: Error) => void)[] = [];
  const locals = new LocalAnswers({
    host,
    flow: { pause: () => undefined },
    backlog,
    queue,
    sink: {
      // As the response path does: an answer written re-evaluates the flow, which starts the next.
      complete: (p, out) => {
        completed.push({ p, out });
        locals.start();
      },
    },
    answers: {
      pending: (h, started, answer): BrokerPending => ({
        kind: 'broker',
        ...{ correlationId: h.correlationId, apiKey: h.apiKey, apiVersion: h.apiVersion, started },
        out: null,
        outBytes: 0,
        response: answer.response,
        awaitingBroker: false,
        onResponse: () => undefined,
      }),
    },
    writes: { forward: (frame, p) => forwarded.push({ frame, p: p?.kind === 'broker' ? p : null }) },
    extension: {
      name: 'test',
      apiKeys: new Set([ApiKey.OffsetFetch]),
      handleRequest: () =>
        new Promise<RequestDecision>((resolve, reject) => {
          decisions.push(resolve);
          failures.push(reject);
        }),
    },
  });
  /** A request read and handed to the local answers, in the client's order. */
  const add = (correlationId: number): LocalPending => {
    const p: LocalPending = {
      kind: 'local',
      correlationId,
      apiKey: ApiKey.OffsetFetch,
      apiVersion: 1,
      started: 0,
      out: null,
      outBytes: 0,
    };
    queue.add(p);
    const a: LocalAnswer = {
      p,
      frame: Buffer.from(`request ${correlationId}`),
      info: host.requestInfo(p),
      request: { apiKey: ApiKey.OffsetFetch, body: defaultOffsetFetchRequest() },
      forwarded: { response: 'as-is' },
    };
    locals.add(a);
    return p;
  };
  return { host, backlog, queue, completed, forwarded, decisions, failures, locals, add };
}

const respond: RequestDecision = {
  action: 'respond',
  body: { ...defaultOffsetFetchResponse(), errorCode: 16 },
};
const settle = () => new Promise<void>((r) => setImmediate(r));

test('one runs at a time; each answer is encoded for its own request', async () => {
  const { completed, decisions, locals, add } = localsBed();
  const first = add(1);
  const second = add(2);
  expect(decisions.length).toBe(1);
  expect(locals.quiescent).toBe(false);
  decisions[0]!(respond);
  await settle();
  expect(completed.map((c) => c.p)).toEqual([first]);
  const frame = completed[0]!.out[0]!;
  expect(decodeResponseFrame(frame.subarray(4), ApiKey.OffsetFetch, 1).header.correlationId).toBe(1);
  expect(decisions.length).toBe(2);
  decisions[1]!(respond);
  await settle();
  expect(completed.map((c) => c.p)).toEqual([first, second]);
  expect(locals.quiescent).toBe(true);
});

test('forwarded after all: it keeps its place, now awaiting the broker', async () => {
  const { queue, forwarded, decisions, locals, add } = localsBed();
  add(7);
  decisions[0]!({ action: 'forward' });
  await settle();
  expect(forwarded.map((f) => f.frame.toString())).toEqual(['request 7']);
  expect(queue.head).toBe(forwarded[0]!.p);
  expect(queue.head?.kind).toBe('broker');
  expect(locals.quiescent).toBe(true);
});

test('none starts while the client has not read what it was sent, unless at the head while it reads', async () => {
  const { backlog, queue, decisions, locals, add } = localsBed();
  // Something before it holds the client's order, and a full connection's worth waits.
  queue.add({
    kind: 'local',
    correlationId: 0,
    apiKey: 3,
    apiVersion: 1,
    started: 0,
    out: null,
    outBytes: 0,
  });
  backlog.addWaiting(CONNECTION_RESPONSE_BYTES);
  add(1);
  expect(decisions.length).toBe(0);
  expect(locals.quiescent).toBe(false);
  backlog.addWaiting(-CONNECTION_RESPONSE_BYTES);
  locals.start();
  expect(decisions.length).toBe(1);
});

test('a failing extension closes the connection; closing drops what waits', async () => {
  const { host, failures, locals, add } = localsBed();
  add(1);
  add(2);
  failures[0]!(new Error('store down'));
  await settle();
  expect(host.closes.map((c) => c.reason)).toEqual(['extension failed']);
  locals.close();
  expect(locals.quiescent).toBe(true);
});
