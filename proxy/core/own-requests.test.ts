// Requests of the proxy's own on a client's broker connection: negative correlation ids, the
// answer decoded for the caller, a deadline, a connection lost, and `quiescent` while any waits.
import { afterEach, expect, test, vi } from 'vitest';
import { decodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import { defaultMetadataResponse } from '../../protocol/messages/metadata-response.js';
import { recordingHost } from '../../test/harness/connection-parts.js';
import { noopObserver } from './observer.js';
import { OwnRequests } from './own-requests.js';
import type { OwnRequest } from './response-queue.js';

afterEach(() => vi.useRealTimers());

function ownBed(timeoutMs = 1000) {
  const host = recordingHost();
  const sent: OwnRequest[] = [];
  const frames: Buffer[] = [];
  const own = new OwnRequests(
    host,
    { sent: (a) => (a.kind === 'own' ? sent.push(a) : undefined) },
    { write: (buffers) => frames.push(...buffers) },
    noopObserver,
    timeoutMs,
  );
  return { host, sent, frames, own };
}

const metadata = () => ({ ...defaultMetadataRequest(), topics: [] });

test('asks with negative correlation ids and resolves with the decoded answer', async () => {
  const { host, sent, frames, own } = ownBed();
  const first = own.ask(ApiKey.Metadata, 1, metadata());
  const second = own.ask(ApiKey.Metadata, 1, metadata());
  expect(sent.map((s) => s.correlationId)).toEqual([-1, -2]);
  expect(frames.map((f) => decodeRequestFrame(f.subarray(4)).header.correlationId)).toEqual([-1, -2]);
  expect(own.quiescent).toBe(false);
  expect(own.waiting).toBe(true);
  expect(host.flowUpdates).toBe(2);
  const answer = { ...defaultMetadataResponse(), controllerId: 7 };
  sent[0]!.onResponse(encodeResponseFrame(ApiKey.Metadata, 1, -1, answer).subarray(4));
  await expect(first).resolves.toMatchObject({ controllerId: 7 });
  expect(own.quiescent).toBe(false);
  sent[1]!.onLost(new Error('connection closed: test'));
  await expect(second).rejects.toThrow('connection closed');
  expect(own.quiescent).toBe(true);
});

test('fails after its deadline; the answer that comes later is dropped', async () => {
  vi.useFakeTimers();
  const { host, sent, own } = ownBed(500);
  const asked = own.ask(ApiKey.Metadata, 1, metadata());
  const failed = expect(asked).rejects.toThrow('did not answer api 3 within 500 ms');
  vi.advanceTimersByTime(500);
  await failed;
  expect(own.quiescent).toBe(true);
  expect(host.flowUpdates).toBe(2);
  sent[0]!.onResponse(encodeResponseFrame(ApiKey.Metadata, 1, -1, defaultMetadataResponse()).subarray(4));
  expect(own.quiescent).toBe(true);
});

test('an answer that does not decode fails the request', async () => {
  const { sent, own } = ownBed();
  const asked = own.ask(ApiKey.Metadata, 1, metadata());
  sent[0]!.onResponse(Buffer.from([0, 0, 0, 1, 9]));
  await expect(asked).rejects.toThrow();
  expect(own.quiescent).toBe(true);
});
