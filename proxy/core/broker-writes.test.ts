// Writes to the broker in the order it must read them: nothing splits a request being streamed,
// what waited goes out after its last byte, a write the socket refuses holds the client.
import { expect, test } from 'vitest';
import { BrokerWrites } from './broker-writes.js';
import { noopObserver } from './observer.js';
import type { PauseReason } from './flow-control.js';
import type { Awaited, RawTokenPending } from './response-queue.js';

function writesBed(accepts = true) {
  const written: string[] = [];
  const broker = {
    holdsWrites: false,
    write(b: Buffer) {
      written.push(b.toString());
      return accepts;
    },
  };
  const paused: PauseReason[] = [];
  const sent: Awaited[] = [];
  const writes = new BrokerWrites(
    broker,
    { pause: (r) => paused.push(r) },
    { sent: (a) => sent.push(a) },
    noopObserver,
  );
  return { written, broker, paused, sent, writes };
}

test('a write while a request is streamed waits for its last bytes', () => {
  const { written, writes } = writesBed();
  writes.stream(Buffer.from('s1'), false);
  expect(writes.streaming).toBe(true);
  expect(writes.quiescent).toBe(false);
  writes.write([Buffer.from('own')]);
  writes.forward(Buffer.from('fwd'), null, Buffer.from('sized-fwd'));
  writes.stream(Buffer.from('s2'), true);
  expect(written).toEqual(['s1', 's2', 'own', 'sized-fwd']);
  expect(writes.streaming).toBe(false);
  expect(writes.quiescent).toBe(true);
});

test('forward: the answer is owed before the frame is written, with its size prefix when not sized', () => {
  const { written, sent, writes } = writesBed();
  const token: RawTokenPending = {
    kind: 'raw-token',
    correlationId: -1,
    apiKey: -1,
    apiVersion: -1,
    started: 0,
    out: null,
    outBytes: 0,
    awaitingBroker: false,
    onResponse: () => undefined,
  };
  writes.forward(Buffer.from('abc'), null);
  expect(sent).toEqual([]);
  expect(written).toEqual(['\0\0\0\x03', 'abc']);
  writes.forward(Buffer.from('def'), token, Buffer.from('sized'));
  expect(sent).toEqual([token]);
  expect(written.at(-1)).toBe('sized');
});

test('a write the broker socket does not take holds the client; bytes it holds are not quiescent', () => {
  const { paused, broker, writes } = writesBed(false);
  writes.write([Buffer.from('a')]);
  expect(paused).toEqual(['upstream']);
  writes.stream(Buffer.from('b'), true);
  expect(paused).toEqual(['upstream', 'upstream']);
  broker.holdsWrites = true;
  expect(writes.quiescent).toBe(false);
});
