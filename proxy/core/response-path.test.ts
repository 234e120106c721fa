// The way back on a real loopback socket: an answer at the head streamed to the client as the
// broker wrote it, answers in request order whoever gives them, an answer read whole handed to
// whoever awaits it, an answer nobody asked for closing the pair.
import net from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { recordingHost } from '../../test/harness/connection-parts.js';
import { noopObserver } from './observer.js';
import { ResponseBacklog } from './response-backlog.js';
import { ResponsePath } from './response-path.js';
import { ResponseQueue } from './response-queue.js';
import type { BrokerPending, LocalPending } from './response-queue.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanup.splice(0)) c();
});

/** A connected socket pair: `proxySide` is written by the response path, `received` what the client got. */
async function socketPair(): Promise<{ proxySide: net.Socket; received: () => Buffer }> {
  const chunks: Buffer[] = [];
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const port = address.port;
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const client = net.connect(port, '127.0.0.1');
  client.on('data', (c: Buffer) => chunks.push(c));
  const proxySide = await accepted;
  cleanup.push(() => {
    client.destroy();
    proxySide.destroy();
    server.close();
  });
  return { proxySide, received: () => Buffer.concat(chunks) };
}

async function pathBed() {
  const { proxySide, received } = await socketPair();
  const host = recordingHost();
  const queue = new ResponseQueue(100);
  const path = new ResponsePath(proxySide, host, queue, new ResponseBacklog(null), {
    maxFrameSize: 1 << 20,
    observer: noopObserver,
    watchesIdle: false,
  });
  return { host, queue, path, received };
}

/** A forwarded request: its answer streamed ('as-is') or read whole into `whole` ('decode'). */
function brokerPending(queue: ResponseQueue, correlationId: number, whole: Buffer[] | null): BrokerPending {
  const p: BrokerPending = {
    kind: 'broker',
    ...{ correlationId, apiKey: 3, apiVersion: 1, started: 0, out: null, outBytes: 0 },
    response: whole === null ? 'as-is' : 'decode',
    awaitingBroker: false,
    onResponse: (frame) => whole?.push(frame),
  };
  queue.add(p);
  queue.sent(p);
  return p;
}

function answer(correlationId: number, text: string): Buffer {
  const f = Buffer.alloc(8 + text.length);
  f.writeInt32BE(4 + text.length, 0);
  f.writeInt32BE(correlationId, 4);
  f.write(text, 8);
  return f;
}

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
}

test('an answer passed on as written streams to the client, split across reads', async () => {
  const { host, queue, path, received } = await pathBed();
  brokerPending(queue, 1, null);
  const bytes = answer(1, 'streamed answer');
  path.readBytes(bytes.subarray(0, 6), 6);
  expect(path.quiescent).toBe(false);
  path.readBytes(Buffer.from(bytes.subarray(6)), bytes.length - 6);
  await until(() => received().length === bytes.length);
  expect(received()).toEqual(bytes);
  expect(queue.inFlight).toBe(0);
  expect(path.quiescent).toBe(true);
  expect(host.flowUpdates).toBeGreaterThan(0);
});

test('answers go out in request order, whoever gives them; a whole answer goes to whoever awaits it', async () => {
  const { queue, path, received } = await pathBed();
  const whole: Buffer[] = [];
  const first = brokerPending(queue, 1, whole);
  const second: LocalPending = {
    kind: 'local',
    correlationId: 2,
    apiKey: 9,
    apiVersion: 1,
    started: 0,
    out: null,
    outBytes: 0,
  };
  queue.add(second);
  path.complete(second, [answer(2, 'local')]);
  await new Promise((r) => setTimeout(r, 20));
  expect(received().length).toBe(0);
  const bytes = answer(1, 'from the broker');
  path.readBytes(bytes, bytes.length);
  expect(whole.map((w) => w.subarray(4).toString())).toEqual(['from the broker']);
  path.complete(first, [answer(1, 'rewritten')]);
  await until(() => received().length > 0 && queue.inFlight === 0);
  expect(received()).toEqual(Buffer.concat([answer(1, 'rewritten'), answer(2, 'local')]));
});

test('an answer nobody asked for closes the pair', async () => {
  const { host, path } = await pathBed();
  const bytes = answer(7, 'unsolicited');
  path.readBytes(bytes, bytes.length);
  expect(host.closes.map((c) => c.reason)).toEqual(['bad response from broker']);
});
