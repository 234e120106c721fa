// When a pair moves to the native path and how it comes back, with a stand-in for the addon on
// real loopback sockets: only after the streak and when every part is quiescent, with the
// requests awaiting answers handed over; back with those requests in their places and the
// broker's bytes read before the client's; a socket that cannot move is not asked again soon.
import net from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { silentLogger } from '../common/log.js';
import { recordingHost } from '../../test/harness/connection-parts.js';
import { ApiPlans } from './api-plan.js';
import { BrokerAnswers } from './broker-answers.js';
import type { BrokerLoss } from './close-reason.js';
import { FlowControl } from './flow-control.js';
import { NativeHandover } from './native-handover.js';
import type { NativePair, NativePending } from './native-relay.js';
import { ResponseBacklog } from './response-backlog.js';
import { ResponseQueue } from './response-queue.js';
import type { Pending } from './response-queue.js';
import { connectWithReusedReads, readSocket, reuseAcceptedReads } from './reused-reads.js';
import { LegacySaslExchange } from './sasl-legacy.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanup.splice(0)) c();
});

function portOf(server: net.Server): number {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** The proxy's two sockets, plain TCP reading into reused buffers, as the native path takes them. */
async function proxySockets(): Promise<{ client: net.Socket; broker: net.Socket }> {
  const ignore = { readBytes: () => false };
  const brokerServer = net.createServer((s) => cleanup.push(() => s.destroy()));
  const front = net.createServer({ pauseOnConnect: true });
  await new Promise<void>((r) => brokerServer.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  const accepted = new Promise<net.Socket>((r) => front.once('connection', r));
  const outside = net.connect(portOf(front), '127.0.0.1');
  const client = await accepted;
  expect(reuseAcceptedReads(client)).toBe(true);
  readSocket(client, ignore);
  client.resume();
  const broker = connectWithReusedReads({ host: '127.0.0.1', port: portOf(brokerServer) });
  readSocket(broker, ignore);
  await new Promise((r) => broker.once('connect', r));
  cleanup.push(() => {
    for (const s of [outside, client, broker]) s.destroy();
    front.close();
    brokerServer.close();
  });
  return { client, broker };
}

async function handoverBed(opts: { plainSockets?: boolean } = {}) {
  const { client, broker } = opts.plainSockets
    ? { client: new net.Socket(), broker: new net.Socket() }
    : await proxySockets();
  const lost: BrokerLoss[] = [];
  const host = Object.assign(recordingHost(), { brokerLost: (reason: BrokerLoss) => lost.push(reason) });
  const queue = new ResponseQueue(100);
  const backlog = new ResponseBacklog(null);
  const flow = new FlowControl(client, broker, backlog, { clientFull: false });
  const sink = { complete: () => undefined };
  const answers = new BrokerAnswers(host, sink, new LegacySaslExchange(), {
    extension: null,
    rewriteResponse: () => Promise.resolve(false),
  });
  const reads: string[] = [];
  const requests = {
    passedOnStreak: 0,
    resetStreak: () => (requests.passedOnStreak = 0),
    neverNative: () => (requests.passedOnStreak = -1),
    readBytes: (b: Buffer) => reads.push(`client ${b.toString()}`) < 0,
    admit: (p: Pending) => queue.add(p),
  };
  const part = { quiescent: true };
  const attached: NativePending[][] = [];
  const handBacks: number[] = [];
  const pair: NativePair = {
    handBack: () => handBacks.push(1),
    close: () => undefined,
    status: () => ({ idleMs: 0, awaiting: 0, unsentToClient: 0 }),
  };
  const handover = new NativeHandover({
    host,
    relay: {
      attach: (_host, _clientFd, _brokerFd, pending) => {
        attached.push([...pending]);
        return pair;
      },
    },
    after: 2,
    client,
    broker: { openSocket: broker },
    flow,
    queue,
    plans: new ApiPlans({ extension: null, streamFetch: true }),
    requests,
    responses: { readBytes: (b: Buffer) => reads.push(`broker ${b.toString()}`) < 0 },
    answers,
    parts: [part],
    log: silentLogger,
  });
  return { host, lost, client, broker, queue, requests, part, attached, handBacks, reads, answers, handover };
}

test('moves only after the streak, when every part is quiescent, with the requests awaiting answers', async () => {
  const { client, broker, queue, requests, part, attached, answers, handover } = await handoverBed();
  const p = answers.pending(
    { correlationId: 1, apiKey: 0, apiVersion: 9 },
    5,
    { response: 'as-is' },
    null,
    null,
  );
  queue.add(p);
  queue.sent(p);
  requests.passedOnStreak = 1;
  handover.maybeMove();
  expect(attached).toEqual([]);
  requests.passedOnStreak = 2;
  part.quiescent = false;
  handover.maybeMove();
  expect(attached).toEqual([]);
  part.quiescent = true;
  handover.maybeMove();
  expect(attached).toEqual([
    [{ correlationId: 1, apiKey: 0, apiVersion: 9, started: 5, walk: false, fetch: false }],
  ]);
  expect(handover.onNative).toBe(true);
  expect(handover.quiescent).toBe(false);
  expect(queue.inFlight).toBe(0);
  expect([client.isPaused(), broker.isPaused()]).toEqual([true, true]);
});

test('back from the native path: requests take their places again, the broker bytes read first', async () => {
  const { client, queue, requests, handBacks, reads, handover } = await handoverBed();
  requests.passedOnStreak = 2;
  handover.maybeMove();
  const back = handover.takeBack();
  expect(handBacks).toEqual([1]);
  handover.nativeHandedBack(Buffer.from('request'), Buffer.from('answer'), [
    { correlationId: 3, apiKey: 0, apiVersion: 9, started: 0 },
  ]);
  await back;
  expect(reads).toEqual(['broker answer', 'client request']);
  expect(queue.inFlight).toBe(1);
  expect(queue.head).toMatchObject({
    kind: 'broker',
    correlationId: 3,
    response: 'as-is',
    awaitingBroker: true,
  });
  expect(requests.passedOnStreak).toBe(0);
  expect(handover.onNative).toBe(false);
  expect(client.isPaused()).toBe(false);
});

test('sockets the native path cannot take: not asked again soon', async () => {
  const { requests, attached, handover } = await handoverBed({ plainSockets: true });
  requests.passedOnStreak = 2;
  handover.maybeMove();
  expect(attached).toEqual([]);
  expect(requests.passedOnStreak).toBeLessThan(0);
});

test("a socket's end on the native path: the broker's is a broker loss, the client's a close", async () => {
  const { host, lost, handover } = await handoverBed({ plainSockets: true });
  handover.nativeEnded('broker ended', undefined);
  handover.nativeEnded('client error', new Error('reset'));
  expect(lost).toEqual(['broker ended']);
  expect(host.closes.map((c) => c.reason)).toEqual(['client error']);
});
