// One ProxyConnection between a real client socket and a fake broker on loopback, for tests of
// what the connection does to the bytes of responses (streaming, rewriting, passing through) and
// of its flow control (clients that do not read, a broker that answers late).
import net from 'node:net';
import { Duplex } from 'node:stream';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { peekRequestHeader } from '../../protocol/frames.js';
import { ApiPlans } from '../../proxy/core/api-plan.js';
import { ProxyConnection } from '../../proxy/core/connection.js';
import type { ConnectionPolicy } from '../../proxy/core/connection.js';
import { silentLogger } from '../../proxy/common/log.js';
import { noopObserver } from '../../proxy/core/observer.js';
import { connectUpstream } from '../../proxy/core/upstream-socket.js';
import { loadNativeRelay, NativeRelay } from '../../proxy/core/native-relay.js';
import { readSocket, reuseAcceptedReads } from '../../proxy/core/reused-reads.js';

export interface ConnectionBed {
  /** The client side of the proxy; `received` grows as bytes arrive. */
  client: net.Socket;
  received: () => Buffer;
  closed: Promise<void>;
  /** Connections the proxy opened to the fake broker so far. */
  brokerConnections: () => number;
  /** Bytes the fake broker has written so far. */
  brokerWritten: () => number;
  /** Requests the fake broker has read so far. */
  brokerRequests: () => number;
  /** Copies of the request frames the fake broker read (size prefix not included), with `recordRequests`. */
  brokerFrames: () => Buffer[];
  /** Times the connection moved to the native path, and was handed back from it (`opts.native`). */
  nativeMoves: () => { attached: number; handedBack: number };
  /** The ProxyConnection under test (once the client has connected). */
  connection: () => ProxyConnection;
  stop: () => Promise<void>;
}

/**
 * A fake broker answering every request with `responses(correlationId)` (a whole frame, size
 * prefix included; a promise of one delays it and every answer after it, as a busy broker would;
 * null: no answer, as for a Produce with acks=0),
 * `requestsPerWrite` answers per write, and a ProxyConnection in front of it with `policy` over
 * quiet defaults (no extension, nothing rewritten: plans for `policy.extension` alone unless
 * `policy.plans` is given). `brokerPort` replaces the fake broker's
 * address (e.g. a closed port). `opts.recordRequests` keeps copies of the requests the broker
 * reads; `opts.brokerWritesTakeMs` has every write of the proxy to the broker wait that long
 * before its bytes are taken (copied) and sent, as a socket whose kernel buffer is full does.
 * `opts.native` gives the connection the native path (native-relay.ts), which it takes after its
 * first request passed on unread (the addon must be built: the bed throws otherwise).
 */
export async function connectionBed(
  responses: (correlationId: number) => Buffer | Promise<Buffer> | null,
  policy: Partial<ConnectionPolicy>,
  requestsPerWrite = 1,
  brokerPort?: number,
  opts: { recordRequests?: boolean; brokerWritesTakeMs?: number; native?: boolean } = {},
): Promise<ConnectionBed> {
  const frames: Buffer[] = [];
  const sockets: net.Socket[] = [];
  let connections = 0;
  let written = 0;
  let requests = 0;
  let connection: ProxyConnection | null = null;
  const broker = net.createServer((s) => {
    sockets.push(s);
    connections++;
    s.on('error', () => undefined);
    const splitter = new FrameSplitter({ maxFrameSize: 1 << 24 });
    let batch: Buffer[] = [];
    // Answers after a delayed one, or after a write the socket did not take, wait their turn: the
    // broker then stops at what its socket takes, as a real one does.
    let delayed: Promise<void> | null = null;
    const send = (bytes: Buffer): Promise<void> | null => {
      written += bytes.length;
      if (s.write(bytes) || s.destroyed) return null;
      return new Promise((resolve) => {
        s.once('drain', resolve);
        s.once('close', resolve);
      });
    };
    s.on('data', (chunk: Buffer) => {
      for (const f of splitter.push(chunk)) {
        requests++;
        if (opts.recordRequests) frames.push(Buffer.from(f));
        const answer = responses(peekRequestHeader(f).correlationId);
        if (answer === null) continue;
        if (answer instanceof Promise || delayed !== null) {
          const before = delayed ?? Promise.resolve();
          delayed = before.then(async () => {
            await send(await answer);
          });
          continue;
        }
        batch.push(answer);
        if (batch.length === requestsPerWrite) {
          delayed = send(Buffer.concat(batch));
          batch = [];
        }
      }
    });
  });
  await new Promise<void>((r) => broker.listen(0, '127.0.0.1', r));
  const full: ConnectionPolicy = {
    log: silentLogger,
    maxFrameSize: 1 << 24,
    maxInFlight: 100,
    extension: null,
    rewriteResponse: () => Promise.resolve(false),
    observer: noopObserver,
    ...policy,
    plans:
      policy.plans ??
      new ApiPlans({
        extension: policy.extension ?? null,
        streamFetch: policy.exposeBroker !== undefined,
        rewrites: () => false,
      }),
  };
  if (opts.native) {
    const { binding, why } = loadNativeRelay();
    if (binding === null) throw new Error(`the native relay addon is ${why}`);
    full.nativeRelay = new NativeRelay(binding, {
      plans: full.plans,
      maxFrameSize: full.maxFrameSize,
      maxInFlight: full.maxInFlight,
      observer: full.observer,
      ...(full.requestBuffers ? { requestPool: full.requestBuffers } : {}),
    });
    full.nativeAfterRequests ??= 1;
  }
  // As the server accepts a client: paused, reading into a reused buffer (reused-reads.ts).
  const front = net.createServer({ pauseOnConnect: true }, (c) => {
    sockets.push(c);
    reuseAcceptedReads(c);
    const open = () =>
      new Promise<net.Socket>((resolve, reject) => {
        // As the server dials a broker: reads into a reused buffer (upstream-socket.ts).
        const port = brokerPort ?? (broker.address() as net.AddressInfo).port;
        const up = connectUpstream({ host: '127.0.0.1', port }, null, { reuseReadBuffer: true });
        sockets.push(up);
        const ms = opts.brokerWritesTakeMs;
        up.once('connect', () => resolve(ms === undefined ? up : slowWrites(up, ms)));
        up.once('error', reject);
      });
    connection = new ProxyConnection(c, open, null, full);
    c.resume();
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  const client = net.connect((front.address() as net.AddressInfo).port, '127.0.0.1');
  sockets.push(client);
  await new Promise<void>((r) => client.once('connect', r));
  const chunks: Buffer[] = [];
  client.on('data', (d: Buffer) => chunks.push(d));
  const closed = new Promise<void>((r) => client.once('close', () => r()));
  client.on('error', () => undefined);
  return {
    client,
    received: () => Buffer.concat(chunks),
    closed,
    brokerConnections: () => connections,
    brokerWritten: () => written,
    brokerRequests: () => requests,
    brokerFrames: () => frames,
    nativeMoves: () => ({
      attached: full.nativeRelay?.attached ?? 0,
      handedBack: full.nativeRelay?.handedBackTotal ?? 0,
    }),
    connection: () => {
      if (connection === null) throw new Error('no ProxyConnection yet');
      return connection;
    },
    stop: async () => {
      full.nativeRelay?.stop();
      for (const s of sockets) s.destroy();
      await Promise.all([broker, front].map((srv) => new Promise((r) => srv.close(r))));
    },
  };
}

/**
 * `up` behind a stream whose writes complete `ms` after they are made, the bytes taken (copied)
 * only then: what a write waiting in a full socket holds is still the caller's memory meanwhile.
 */
function slowWrites(up: net.Socket, ms: number): net.Socket {
  const slow = new Duplex({
    read() {},
    writev(chunks, cb) {
      setTimeout(() => {
        up.write(Buffer.concat(chunks.map((c) => c.chunk as Buffer)));
        cb();
      }, ms);
    },
    destroy(err, cb) {
      up.destroy();
      cb(err);
    },
  });
  readSocket(up, {
    readBytes: (d: Buffer, end: number) => {
      slow.push(Buffer.from(d.subarray(0, end)));
      return false;
    },
  });
  up.on('end', () => slow.push(null));
  up.on('close', () => slow.destroy());
  up.on('error', (err) => slow.destroy(err));
  return Object.assign(slow, { setNoDelay: () => slow }) as unknown as net.Socket;
}
