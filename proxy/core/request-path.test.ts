// The way in, without sockets: each request goes where its plan says (forwarded with its place in
// the client's order, to the extension, answered or refused here, acks=0 with no place), a
// request spanning reads is streamed only when nothing of it is read, the count of requests
// passed on unread in a row, and --max-in-flight.
import { expect, test } from 'vitest';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultApiVersionsRequest } from '../../protocol/messages/api-versions-request.js';
import {
  defaultListOffsetsRequest,
  defaultListOffsetsTopic,
} from '../../protocol/messages/list-offsets-request.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { defaultProduceRequest } from '../../protocol/messages/produce-request.js';
import { recordingHost } from '../../test/harness/connection-parts.js';
import { ApiPlans } from './api-plan.js';
import { BrokerAnswers } from './broker-answers.js';
import type { PauseReason } from './flow-control.js';
import type { LocalAnswer } from './local-answers.js';
import { noopObserver } from './observer.js';
import { RequestPath } from './request-path.js';
import { ResponseQueue } from './response-queue.js';
import type { Pending } from './response-queue.js';
import { LegacySaslExchange } from './sasl-legacy.js';

function pathBed(opts: { brokerOpen?: boolean; maxInFlight?: number } = {}) {
  const host = recordingHost();
  const queue = new ResponseQueue(opts.maxInFlight ?? 100);
  const paused: PauseReason[] = [];
  const forwarded: { frame: Buffer; p: Pending | null; sized: Buffer | null }[] = [];
  const streamed: { bytes: Buffer; end: boolean }[] = [];
  const completed: { p: Pending; out: Buffer[] }[] = [];
  const locals: LocalAnswer[] = [];
  const sink = { complete: (p: Pending, out: Buffer[]) => completed.push({ p, out }) };
  const writes = {
    streaming: false,
    forward: (frame: Buffer, p: Pending | null, sized: Buffer | null = null) => {
      if (p !== null) queue.sent(p.kind === 'local' ? never() : p);
      forwarded.push({ frame: Buffer.from(frame), p, sized });
    },
    stream: (bytes: Buffer, end: boolean) => {
      writes.streaming = !end;
      streamed.push({ bytes: Buffer.from(bytes), end });
    },
  };
  const extension = {
    name: 'test',
    apiKeys: new Set([ApiKey.OffsetFetch]),
    interceptsRequest: (apiKey: number) => apiKey === ApiKey.OffsetFetch,
    handleRequest: () => Promise.resolve({ action: 'forward' as const }),
  };
  const legacySasl = new LegacySaslExchange();
  const path = new RequestPath({
    host,
    transientReads: true,
    maxFrameSize: 1 << 20,
    plans: new ApiPlans({ extension, streamFetch: true }),
    observer: noopObserver,
    requestBuffers: undefined,
    broker: {
      isOpen: opts.brokerOpen ?? true,
      holdsWrites: false,
      cork: () => undefined,
      uncork: () => true,
    },
    flow: {
      pause: (r) => paused.push(r),
      resume: () => undefined,
      isDraining: false,
      stopReadingClient: () => undefined,
    },
    writes,
    queue,
    sink,
    answers: new BrokerAnswers(host, sink, legacySasl, {
      extension,
      rewriteResponse: () => Promise.resolve(false),
    }),
    locals: { add: (a) => locals.push(a) },
    legacySasl,
  });
  const read = (...frames: Buffer[]) => {
    const bytes = Buffer.concat(frames);
    path.readBytes(bytes, bytes.length);
  };
  return { host, queue, paused, forwarded, streamed, completed, locals, path, read };
}

/** A ListOffsets request (passed on unread) of about `bytes` bytes. */
const listOffsets = (id: number, bytes: number) =>
  encodeRequestFrame(
    { apiKey: ApiKey.ListOffsets, apiVersion: 7, correlationId: id, clientId: 't' },
    { ...defaultListOffsetsRequest(), topics: [{ ...defaultListOffsetsTopic(), name: 't'.repeat(bytes) }] },
  );

function never(): never {
  throw new Error('a local answer is never written to the broker');
}

const metadata = (id: number) =>
  encodeRequestFrame(
    { apiKey: ApiKey.Metadata, apiVersion: 1, correlationId: id, clientId: 't' },
    { ...defaultMetadataRequest(), topics: [] },
  );
const offsetFetch = (id: number) =>
  encodeRequestFrame(
    { apiKey: ApiKey.OffsetFetch, apiVersion: 1, correlationId: id, clientId: 't' },
    { ...defaultOffsetFetchRequest(), groupId: 'g', topics: [] },
  );
const produce = (id: number, acks: number, bytes = 10) =>
  encodeRequestFrame(
    { apiKey: ApiKey.Produce, apiVersion: 9, correlationId: id, clientId: 't' },
    { ...defaultProduceRequest(), transactionalId: 'x'.repeat(bytes), acks, timeoutMs: 1000 },
  );

test('each request goes where its plan says, in the client order', () => {
  const { host, queue, forwarded, completed, locals, read } = pathBed();
  read(metadata(1), offsetFetch(2), produce(3, 0), produce(4, 1));
  expect(forwarded.map((f) => f.frame.readInt32BE(4))).toEqual([1, 3, 4]);
  // Whole in the read: forwarded as the read's view, size prefix and all.
  expect(forwarded[0]!.sized?.length).toBe(metadata(1).length);
  // acks=0: no answer comes, so no place.
  expect(forwarded[1]!.p).toBeNull();
  expect(locals.map((l) => [l.p.correlationId, l.request.apiKey, l.info.correlationId])).toEqual([
    [2, ApiKey.OffsetFetch, 2],
  ]);
  expect(queue.inFlight).toBe(3);
  expect(completed).toEqual([]);
  expect(host.closes).toEqual([]);
});

test('an ApiVersions above the proxy is answered here; a version never advertised closes the pair', () => {
  const { host, completed, read } = pathBed();
  const above = encodeRequestFrame(
    { apiKey: ApiKey.ApiVersions, apiVersion: 3, correlationId: 5, clientId: 't' },
    defaultApiVersionsRequest(),
  );
  above.writeInt16BE(99, 6);
  read(above);
  expect(host.closes).toEqual([]);
  const answer = Buffer.concat(completed[0]!.out).subarray(4);
  expect(decodeResponseFrame(answer, ApiKey.ApiVersions, 0).body.errorCode).toBe(35);
  const refused = metadata(6);
  refused.writeInt16BE(99, 6);
  read(refused);
  expect(host.closes.map((c) => c.reason)).toEqual(['malformed request']);
});

test('a request spanning reads is streamed when nothing of it is read, else received whole', () => {
  const { forwarded, streamed, queue, path, read } = pathBed();
  read(metadata(1)); // the broker connection is open: later requests may stream
  const big = listOffsets(2, 2_000);
  read(big.subarray(0, 100));
  expect(path.quiescent).toBe(false);
  read(big.subarray(100));
  expect(Buffer.concat(streamed.map((s) => s.bytes))).toEqual(big);
  expect(streamed.at(-1)!.end).toBe(true);
  expect(queue.inFlight).toBe(2);
  const local = offsetFetch(3);
  read(local.subarray(0, 20));
  read(local.subarray(20));
  expect(streamed.length).toBe(2);
  expect(forwarded.length).toBe(1);
  expect(path.quiescent).toBe(true);
});

test('no broker connection yet: the first request is received whole', () => {
  const { forwarded, streamed, read } = pathBed({ brokerOpen: false });
  const big = listOffsets(1, 2_000);
  read(big.subarray(0, 100));
  read(big.subarray(100));
  expect(streamed).toEqual([]);
  expect(forwarded.map((f) => f.frame.length)).toEqual([big.length - 4]);
});

test('requests passed on unread count in a row; one the proxy reads starts the count again', () => {
  const { path, read } = pathBed();
  read(produce(1, 1), produce(2, 1));
  expect(path.passedOnStreak).toBe(2);
  read(metadata(3));
  expect(path.passedOnStreak).toBe(0);
  read(produce(4, 1));
  path.neverNative();
  expect(path.passedOnStreak).toBeLessThan(0);
  path.resetStreak();
  expect(path.passedOnStreak).toBe(0);
});

test('--max-in-flight requests awaiting answers hold the client', () => {
  const { paused, read } = pathBed({ maxInFlight: 2 });
  read(produce(1, 1));
  expect(paused).toEqual([]);
  read(produce(2, 1));
  expect(paused).toEqual(['inflight']);
});
