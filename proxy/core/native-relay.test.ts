// The native path (native/relay.c through native-relay.ts) on real loopback sockets: a client, the
// proxy's two sockets handed to the addon, and a fake broker. Bytes pass both ways unchanged and in
// order, cut anywhere; every frame the proxy must read, and everything unexpected, hands the pair
// back at a frame boundary with nothing lost or repeated; backpressure holds both ways; the
// addon's Produce walks decide as the JavaScript ones do. The addon must be built (npm run build).
import type net from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, test } from 'vitest';
import { noopObserver } from './observer.js';
import { peekProduceAcks } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { RequestBufferPool } from './request-pool.js';
import type { ProxyObserver } from './observer.js';
import { answerIds, requestIds } from '../../test/harness/frame-ids.js';
import {
  answer,
  metadata,
  opaque,
  produce,
  produceAnswer,
  sleep,
  start,
  until,
  writeCut,
} from '../../test/harness/native-relay-bed.js';
import type { Bed } from '../../test/harness/native-relay-bed.js';

let bed: Bed | null = null;
afterEach(async () => {
  await bed?.stop();
  bed = null;
});

describe('frames passed on unread', { timeout: 60_000 }, () => {
  test('go both ways byte for byte and in order, cut anywhere; answers and bytes are counted', async () => {
    const responded: [number, number, number][] = [];
    const bytes = { client_in: 0, client_out: 0, broker_in: 0, broker_out: 0 };
    const observer: ProxyObserver = {
      ...noopObserver,
      responded: (apiKey, apiVersion, by, seconds) => {
        expect(by).toBe('broker');
        responded.push([apiKey, apiVersion, seconds]);
      },
      bytes: (direction, n) => (bytes[direction] += n),
    };
    bed = await start({ observer });
    const rng = fc.sample(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { numRuns: 1, seed: 19 })[0]!;
    let seed = rng;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const count = 300;
    // Requests up to 64 KiB, which are passed on as they arrive whatever the reads (larger ones
    // that span reads are JavaScript's: see 'a request over 64 KiB' below).
    const requests = Array.from({ length: count }, (_, i) =>
      opaque(i + 1, [0, 10, 700, 5_000, 30_000, 65_000][next(6)]!),
    );
    const answers = Array.from({ length: count }, (_, i) =>
      answer(i + 1, [0, 3, 900, 20_000, 1_000_000][next(5)]!),
    );
    const sent = Buffer.concat(requests);
    const cuts = Array.from({ length: 400 }, () => next(sent.length));
    // The broker answers each request as it has read it whole, its answers cut anywhere too.
    const splitter = new FrameSplitter({ maxFrameSize: 1 << 24 });
    let answered = 0;
    // One write after another: pieces of two answers never interleave.
    let writing = Promise.resolve();
    bed.broker().on('data', (d: Buffer) => {
      const whole = splitter.push(d).length;
      if (whole === 0) return;
      const out = Buffer.concat(answers.slice(answered, answered + whole));
      answered += whole;
      const cuts = [1, 5, 8, 9, next(out.length), next(out.length)];
      writing = writing.then(() => writeCut(bed!.broker(), out, cuts));
    });
    await writeCut(bed.client, sent, cuts);
    const expected = Buffer.concat(answers);
    await until(() => bed!.clientBytes() >= expected.length, 'every answer', 50_000);
    expect(bed.brokerGot().equals(sent)).toBe(true);
    expect(bed.clientGot().equals(expected)).toBe(true);
    expect(bed.handbacks).toEqual([]);
    bed.relay.flushStats();
    expect(responded.length).toBe(count);
    expect(responded.every(([k, v, s]) => k === ApiKey.DescribeConfigs && v === 1 && s >= 0 && s < 60)).toBe(
      true,
    );
    expect(bytes).toEqual({
      client_in: sent.length,
      broker_out: sent.length,
      broker_in: expected.length,
      client_out: expected.length,
    });
    expect(bed.pair().status()).toMatchObject({ awaiting: 0, unsentToClient: 0 });
  });

  test('a Produce with acks=0 takes no place: the answers after it match their requests', async () => {
    bed = await start();
    const frames = [
      produce(1, 9, 1, 1000),
      produce(2, 9, 0, 1000),
      produce(3, 3, -1, 2000, 10),
      produce(4, 3, 0, 10),
    ];
    bed.client.write(Buffer.concat(frames));
    await until(() => bed!.brokerBytes() === Buffer.concat(frames).length, 'the requests at the broker');
    expect(bed.pair().status().awaiting).toBe(2);
    bed.broker().write(Buffer.concat([answer(1, 10), answer(3, 10)]));
    await until(() => answerIds(bed!.clientGot()).length === 2, 'both answers');
    expect(answerIds(bed.clientGot())).toEqual([1, 3]);
    expect(bed.handbacks).toEqual([]);
  });

  test('a Produce v10 answer without NodeEndpoints goes as written, whole or cut', async () => {
    bed = await start();
    bed.client.write(Buffer.concat([produce(1, 10, 1, 100), produce(2, 10, -1, 100)]));
    await until(() => bed!.pair().status().awaiting === 2, 'both requests');
    const answers = Buffer.concat([produceAnswer(1, false), produceAnswer(2, false)]);
    await writeCut(bed.broker(), answers, [3, 9, 30]);
    await until(() => bed!.clientBytes() === answers.length, 'both answers');
    expect(bed.clientGot().equals(answers)).toBe(true);
    expect(bed.handbacks).toEqual([]);
  });
});

describe('the pair is handed back at a frame boundary', { timeout: 120_000 }, () => {
  test('at a frame the proxy reads: from its first byte, with the requests still awaiting answers', async () => {
    const counted = { client_in: 0, client_out: 0, broker_in: 0, broker_out: 0 };
    bed = await start({ observer: { ...noopObserver, bytes: (direction, n) => (counted[direction] += n) } });
    const before = [opaque(1, 100), opaque(2, 50_000), opaque(3, 10)];
    const rest = [metadata(4), opaque(5, 10)];
    bed.client.write(Buffer.concat([...before, ...rest]));
    await until(() => bed!.handbacks.length === 1, 'the handback');
    await until(() => bed!.brokerBytes() >= Buffer.concat(before).length, 'the requests at the broker');
    const [h] = bed.handbacks;
    expect(bed.brokerGot().equals(Buffer.concat(before))).toBe(true);
    expect(h!.pending.map((p) => p.correlationId)).toEqual([1, 2, 3]);
    expect(h!.pending.every((p) => p.apiKey === ApiKey.DescribeConfigs && p.apiVersion === 1)).toBe(true);
    // What the addon read and did not pass on, then what Node reads after it: the rest, whole.
    await sleep(100);
    expect(Buffer.concat([h!.client, bed.afterClient()]).equals(Buffer.concat(rest))).toBe(true);
    expect(h!.broker.length).toBe(0);
    expect(bed.relay.pairs).toBe(0);
    // The bytes handed back are JavaScript's to count, when it reads them.
    bed.relay.flushStats();
    expect(counted).toEqual({
      client_in: Buffer.concat(before).length,
      client_out: 0,
      broker_in: 0,
      broker_out: Buffer.concat(before).length,
    });
  });

  test('while an answer streams: that answer first goes whole to the client', async () => {
    bed = await start();
    bed.client.write(opaque(1, 10));
    await until(() => bed!.pair().status().awaiting === 1, 'the request');
    const big = answer(1, 300_000);
    bed.broker().write(big.subarray(0, 100_000));
    await until(() => bed!.clientBytes() > 0, 'the answer streaming');
    bed.client.write(metadata(2));
    await sleep(200);
    expect(bed.handbacks).toEqual([]);
    bed.broker().write(Buffer.concat([big.subarray(100_000), answer(9, 5)]));
    await until(() => bed!.handbacks.length === 1, 'the handback');
    await sleep(100);
    expect(bed.clientGot().equals(big)).toBe(true);
    const [h] = bed.handbacks;
    expect(h!.pending).toEqual([]);
    expect(Buffer.concat([h!.client, bed.afterClient()]).equals(metadata(2))).toBe(true);
    // The broker's bytes after that answer: handed back or read by Node afterwards, never lost.
    expect(Buffer.concat([h!.broker, bed.afterBroker()]).equals(answer(9, 5))).toBe(true);
  });

  test('while a request is passed on part way: at its end', async () => {
    bed = await start();
    const big = opaque(1, 60_000);
    bed.client.write(big.subarray(0, 20_000));
    await until(() => bed!.brokerBytes() >= 20_000, 'the first part at the broker');
    bed.pair().handBack();
    await sleep(100);
    expect(bed.handbacks).toEqual([]);
    bed.client.write(Buffer.concat([big.subarray(20_000), opaque(2, 5)]));
    await until(() => bed!.handbacks.length === 1, 'the handback');
    await sleep(100);
    expect(bed.brokerGot().equals(big)).toBe(true);
    const [h] = bed.handbacks;
    expect(h!.pending.map((p) => p.correlationId)).toEqual([1]);
    expect(Buffer.concat([h!.client, bed.afterClient()]).equals(opaque(2, 5))).toBe(true);
  });

  test('a request over 64 KiB that spans reads, pool exhausted: nothing of it passed on; one whole in a read is', async () => {
    const pool = new RequestBufferPool(1 << 20);
    bed = await start({ requestPool: pool });
    const whole = opaque(1, 100_000);
    bed.client.write(whole);
    await until(() => bed!.brokerBytes() === whole.length, 'the whole request at the broker');
    expect(bed.handbacks).toEqual([]);
    // Another connection's request holds the whole pool: this one must wait, muted by JavaScript.
    expect(pool.reserve(1 << 20)).toBe(true);
    const large = opaque(2, 100_000);
    bed.client.write(large.subarray(0, 10_000));
    await until(() => bed!.handbacks.length === 1, 'the handback');
    bed.client.write(large.subarray(10_000));
    await sleep(100);
    const [h] = bed.handbacks;
    expect(bed.brokerGot().equals(whole)).toBe(true);
    expect(Buffer.concat([h!.client, bed.afterClient()]).equals(large)).toBe(true);
    expect(h!.pending.map((p) => p.correlationId)).toEqual([1]);
    expect(pool.charged).toBe(1 << 20);
  });

  test('asked for between frames: at once, with what the pair was given and nothing read', async () => {
    const started = performance.now();
    bed = await start({
      pending: [{ correlationId: 7, apiKey: ApiKey.DescribeConfigs, apiVersion: 1, started }],
    });
    bed.pair().handBack();
    expect(bed.handbacks).toEqual([
      {
        client: Buffer.alloc(0),
        broker: Buffer.alloc(0),
        pending: [{ correlationId: 7, apiKey: ApiKey.DescribeConfigs, apiVersion: 1, started }],
      },
    ]);
  });

  test('an answer handed over with its request streams to the client', async () => {
    bed = await start({
      pending: [
        { correlationId: 7, apiKey: ApiKey.Produce, apiVersion: 10, started: performance.now(), walk: true },
      ],
    });
    bed.broker().write(produceAnswer(7, false));
    await until(() => bed!.clientBytes() === produceAnswer(7, false).length, 'the answer');
    expect(bed.handbacks).toEqual([]);
  });

  test('a Produce v10 answer with NodeEndpoints: with its request, for JavaScript to rewrite', async () => {
    bed = await start();
    bed.client.write(Buffer.concat([produce(1, 10, 1, 100), produce(2, 10, 1, 100)]));
    await until(() => bed!.pair().status().awaiting === 2, 'both requests');
    const withEndpoints = produceAnswer(1, true);
    await writeCut(bed.broker(), Buffer.concat([withEndpoints, produceAnswer(2, false)]), [5, 20]);
    await until(() => bed!.handbacks.length === 1, 'the handback');
    await sleep(100);
    const [h] = bed.handbacks;
    expect(bed.clientGot().length).toBe(0);
    expect(h!.pending.map((p) => p.correlationId)).toEqual([1, 2]);
    expect(
      Buffer.concat([h!.broker, bed.afterBroker()]).equals(
        Buffer.concat([withEndpoints, produceAnswer(2, false)]),
      ),
    ).toBe(true);
  });

  test('an answer out of order, a negative or oversized size, a header cut short: nothing of it passed on', async () => {
    const cases: [string, (b: Bed) => Promise<{ client?: Buffer; broker?: Buffer }>][] = [
      [
        'an answer to another correlation id',
        async (b) => {
          b.client.write(opaque(1, 10));
          await until(() => b.pair().status().awaiting === 1, 'the request');
          b.broker().write(answer(1000, 10));
          return { broker: answer(1000, 10) };
        },
      ],
      [
        'an answer nobody asked for',
        async (b) => {
          b.broker().write(answer(3, 10));
          return { broker: answer(3, 10) };
        },
      ],
      [
        'a negative request size',
        async (b) => {
          const bad = Buffer.from([0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0]);
          b.client.write(bad);
          return { client: bad };
        },
      ],
      [
        'a request over the frame size limit, its size prefix cut in two',
        async (b) => {
          const size = Buffer.alloc(4);
          size.writeInt32BE((1 << 24) + 1, 0);
          b.client.write(size.subarray(0, 2));
          await sleep(50);
          b.client.write(size.subarray(2));
          return { client: size };
        },
      ],
      [
        'a request shorter than a header',
        async (b) => {
          const short = Buffer.from([0, 0, 0, 6, 0, 32, 0, 1, 0, 0]);
          b.client.write(short);
          return { client: short };
        },
      ],
      [
        'a Produce whose acks lie past the first 512 bytes',
        async (b) => {
          const long = produce(1, 9, 1, 10, 3_000);
          await writeCut(b.client, long, [100, 300, 600]);
          return { client: long };
        },
      ],
      [
        'a Produce with a client id length below -1',
        async (b) => {
          const bad = produce(1, 3, 1, 10);
          bad.writeInt16BE(-5, 12);
          b.client.write(bad);
          return { client: bad };
        },
      ],
    ];
    for (const [name, run] of cases) {
      const b = await start();
      try {
        const expected = await run(b);
        await until(() => b.handbacks.length === 1, `the handback: ${name}`);
        await sleep(50);
        const [h] = b.handbacks;
        expect(
          Buffer.concat([h!.client, b.afterClient()]).equals(expected.client ?? Buffer.alloc(0)),
          name,
        ).toBe(true);
        expect(
          Buffer.concat([h!.broker, b.afterBroker()]).equals(expected.broker ?? Buffer.alloc(0)),
          name,
        ).toBe(true);
        expect(b.brokerGot().length === 0 || expected.client === undefined, name).toBe(true);
      } finally {
        await b.stop();
      }
    }
  });

  test('at any moment, nothing is lost or repeated either way', async () => {
    // Requests and answers flow; a handback is asked for at a random moment. Every byte either
    // went through the addon or is handed back or read by Node afterwards, in order.
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 120_000 }), { minLength: 5, maxLength: 30 }),
        fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 5, maxLength: 30 }),
        fc.integer({ min: 0, max: 30 }),
        async (requestSizes, answerSizes, handBackAfterMs) => {
          const b = await start();
          try {
            const requests = Buffer.concat(requestSizes.map((n, i) => opaque(i + 1, n)));
            const answers = Buffer.concat(answerSizes.map((n, i) => answer(i + 1, n)));
            const writing = writeCut(b.client, requests, [7, 5_000, 33_333, 100_000, 250_000]);
            // Answers for at most the requests sent: all of them cut into pieces.
            const answered = Math.min(requestSizes.length, answerSizes.length);
            const answerBytes = Buffer.concat(answerSizes.slice(0, answered).map((n, i) => answer(i + 1, n)));
            void answers;
            await until(
              () => b.pair().status().awaiting > 0 || b.handbacks.length > 0,
              'a request in flight',
            );
            const broker = writeCut(b.broker(), answerBytes, [3, 9, 12_345, 150_000]);
            await sleep(handBackAfterMs);
            b.pair().handBack();
            await writing;
            await broker;
            await until(() => b.handbacks.length === 1, 'the handback');
            await sleep(100);
            const [h] = b.handbacks;
            const clientSide = Buffer.concat([b.brokerGot(), h!.client, b.afterClient()]);
            const brokerSide = Buffer.concat([b.clientGot(), h!.broker, b.afterBroker()]);
            expect(clientSide.equals(requests)).toBe(true);
            expect(brokerSide.equals(answerBytes)).toBe(true);
            // What is still owed: the requests passed on whose answers did not go to the client.
            const passed = requestIds(b.brokerGot());
            const answeredIds = answerIds(b.clientGot());
            expect(h!.pending.map((p) => p.correlationId)).toEqual(passed.slice(answeredIds.length));
          } finally {
            await b.stop();
          }
        },
      ),
      { numRuns: 25, seed: 1919 },
    );
  });
});

/** Writes `bytes` in pieces of `piece` bytes, a turn of the event loop apart: many reads. */
async function writeSmall(socket: net.Socket, bytes: Buffer, piece: number): Promise<void> {
  const cuts: number[] = [];
  for (let at = piece; at < bytes.length; at += piece) cuts.push(at);
  await writeCut(socket, bytes, cuts);
}

describe('a request over 64 KiB that spans reads', { timeout: 60_000 }, () => {
  test.each([
    ['100 KB', 100_000],
    ['1 MiB', 1 << 20],
  ])(
    'of %s arriving in small reads: passed on as it arrives, whole, in order, its reservation let go',
    async (_, records) => {
      const pool = new RequestBufferPool(64 << 20);
      bed = await start({ requestPool: pool });
      const before = opaque(1, 100);
      const large = produce(2, 9, -1, records);
      const after = opaque(3, 100);
      bed.client.write(before);
      // Half of it, in pieces: the broker has its first bytes before the client sent the rest.
      const half = Math.floor(large.length / 2);
      await writeSmall(bed.client, large.subarray(0, half), 4096);
      await until(() => bed!.brokerBytes() === before.length + half, 'the first half at the broker');
      expect(bed.relay.reservations).toEqual({ count: 1, bytes: large.length });
      expect(pool.charged).toBe(large.length);
      await writeSmall(bed.client, Buffer.concat([large.subarray(half), after]), 1000);
      const sent = Buffer.concat([before, large, after]);
      await until(() => bed!.brokerBytes() === sent.length, 'every request at the broker');
      expect(bed.brokerGot().equals(sent)).toBe(true);
      expect(requestIds(bed.brokerGot())).toEqual([1, 2, 3]);
      expect(bed.handbacks).toEqual([]);
      expect(bed.relay.reservations).toEqual({ count: 0, bytes: 0 });
      expect(pool.charged).toBe(0);
      expect(bed.pair().status().awaiting).toBe(3);
      bed.broker().write(Buffer.concat([answer(1, 5), answer(2, 5), answer(3, 5)]));
      await until(() => answerIds(bed!.clientGot()).length === 3, 'the answers');
      expect(answerIds(bed.clientGot())).toEqual([1, 2, 3]);
    },
  );

  test('followed by a frame the proxy reads: handed back after its last byte, awaiting its answer first', async () => {
    bed = await start();
    const large = produce(1, 9, 1, 300_000);
    await writeSmall(bed.client, Buffer.concat([large, metadata(2)]), 8192);
    await until(() => bed!.handbacks.length === 1, 'the handback');
    await sleep(100);
    expect(bed.brokerGot().equals(large)).toBe(true);
    const [h] = bed.handbacks;
    // JavaScript answers the Metadata request after the Produce answer it awaits first.
    expect(h!.pending.map((p) => [p.correlationId, p.apiKey])).toEqual([[1, ApiKey.Produce]]);
    expect(Buffer.concat([h!.client, bed.afterClient()]).equals(metadata(2))).toBe(true);
  });

  test('over --max-frame-size: refused before any byte of it reaches the broker', async () => {
    const pool = new RequestBufferPool(64 << 20);
    bed = await start({ maxFrameSize: 200_000, requestPool: pool });
    const first = opaque(1, 150_000);
    const tooLarge = opaque(2, 300_000);
    await writeSmall(bed.client, first, 8192);
    await until(() => bed!.brokerBytes() === first.length, 'the first request');
    await writeSmall(bed.client, tooLarge.subarray(0, 50_000), 8192);
    await until(() => bed!.handbacks.length === 1, 'the handback');
    bed.client.write(tooLarge.subarray(50_000));
    await sleep(200);
    expect(bed.brokerGot().equals(first)).toBe(true);
    const [h] = bed.handbacks;
    expect(h!.client.subarray(0, 4).equals(tooLarge.subarray(0, 4))).toBe(true);
    expect(Buffer.concat([h!.client, bed.afterClient()]).equals(tooLarge)).toBe(true);
    expect(pool.charged).toBe(0);
  });

  test('a Produce with acks=0: passed on whole, no answer awaited; the next one answered', async () => {
    bed = await start();
    const frames = [produce(1, 9, 0, 500_000), produce(2, 3, 0, 200_000, 5), produce(3, 9, 1, 100)];
    await writeSmall(bed.client, Buffer.concat(frames), 16_384);
    await until(() => bed!.brokerBytes() === Buffer.concat(frames).length, 'the requests');
    expect(bed.brokerGot().equals(Buffer.concat(frames))).toBe(true);
    expect(peekProduceAcks(frames[0]!.subarray(4))).toBe(0);
    expect(bed.pair().status().awaiting).toBe(1);
    bed.broker().write(answer(3, 10));
    await until(() => answerIds(bed!.clientGot()).length === 1, 'the answer');
    expect(answerIds(bed.clientGot())).toEqual([3]);
    expect(bed.handbacks).toEqual([]);
    expect(bed.relay.reservations.count).toBe(0);
  });

  test('the client closing part way: the end is reported and the reservation let go', async () => {
    const pool = new RequestBufferPool(64 << 20);
    bed = await start({ requestPool: pool });
    const large = opaque(1, 500_000);
    await writeSmall(bed.client, large.subarray(0, 200_000), 8192);
    await until(() => bed!.brokerBytes() >= 100_000, 'its first part at the broker');
    expect(pool.charged).toBe(large.length);
    bed.client.end();
    await until(() => bed!.ends.length === 1, 'the end');
    expect(bed.ends[0]!.end).toBe('client ended');
    expect(pool.charged).toBe(0);
    expect(bed.relay.reservations.count).toBe(0);
    expect(bed.handbacks).toEqual([]);
    // Nothing but that request's bytes went to the broker.
    expect(large.subarray(0, bed.brokerGot().length).equals(bed.brokerGot())).toBe(true);
  });

  test('a broker that stops reading part way: the client stops being read; nothing is lost', async () => {
    bed = await start({ maxInFlight: 10_000, maxFrameSize: 64 << 20 });
    bed.broker().pause();
    // Larger than the kernel buffers between the client and the broker can take on this machine
    // (tcp_rmem's maximum is 32 MB: with 12 MB, autotuned buffers once took all of it).
    const large = opaque(1, 48 << 20);
    bed.client.write(large);
    await sleep(1_000);
    // Taken only up to the sockets' kernel buffers and one read of the addon's, not all of it.
    expect(bed.client.writableLength).toBeGreaterThan(0);
    expect(bed.relay.reservations.count).toBe(1);
    bed.broker().resume();
    await until(() => bed!.brokerBytes() === large.length, 'the whole request', 25_000);
    expect(bed.brokerGot().equals(large)).toBe(true);
    expect(bed.relay.reservations.count).toBe(0);
  });

  test('handed back while one is passed on part way: at its last byte, its reservation let go', async () => {
    const pool = new RequestBufferPool(64 << 20);
    bed = await start({ requestPool: pool });
    const large = opaque(1, 400_000);
    await writeSmall(bed.client, large.subarray(0, 100_000), 8192);
    await until(() => bed!.brokerBytes() >= 90_000, 'its first part at the broker');
    bed.pair().handBack();
    await sleep(100);
    expect(bed.handbacks).toEqual([]);
    await writeSmall(bed.client, Buffer.concat([large.subarray(100_000), opaque(2, 5)]), 8192);
    await until(() => bed!.handbacks.length === 1, 'the handback');
    await sleep(100);
    expect(bed.brokerGot().equals(large)).toBe(true);
    expect(bed.handbacks[0]!.pending.map((p) => p.correlationId)).toEqual([1]);
    expect(Buffer.concat([bed.handbacks[0]!.client, bed.afterClient()]).equals(opaque(2, 5))).toBe(true);
    expect(pool.charged).toBe(0);
  });
});

describe('ends and limits', { timeout: 120_000 }, () => {
  test('the client closing or the broker closing is reported, once', async () => {
    bed = await start();
    bed.client.end();
    await until(() => bed!.ends.length === 1, 'the end');
    expect(bed.ends[0]!.end).toBe('client ended');
    await bed.stop();
    bed = await start();
    bed.broker().destroy();
    await until(() => bed!.ends.length === 1, 'the end');
    expect(bed.ends[0]!.end).toMatch(/^broker (ended|error)$/);
    await sleep(50);
    expect(bed.ends.length).toBe(1);
  });

  test('at --max-in-flight the client is no longer read; as answers go out it is read again', async () => {
    bed = await start({ maxInFlight: 2 });
    for (let id = 1; id <= 5; id++) {
      bed.client.write(opaque(id, 10));
      await sleep(30);
    }
    await sleep(200);
    expect(requestIds(bed.brokerGot())).toEqual([1, 2]);
    bed.broker().write(answer(1, 5));
    // Read again: what waits in the socket, in one read (as the JavaScript path, the frames of a read go on).
    await until(() => requestIds(bed!.brokerGot()).length >= 3, 'the third request');
    bed.broker().write(Buffer.concat([answer(2, 5), answer(3, 5), answer(4, 5), answer(5, 5)]));
    await until(() => answerIds(bed!.clientGot()).length === 5, 'every answer');
    expect(answerIds(bed.clientGot())).toEqual([1, 2, 3, 4, 5]);
  });

  test('a broker that does not read: the client stops being read, and nothing is lost', async () => {
    // Unanswered requests: --max-in-flight must not be what stops the reads.
    bed = await start({ maxInFlight: 10_000 });
    bed.broker().pause();
    const requests = Buffer.concat(Array.from({ length: 1_000 }, (_, i) => opaque(i + 1, 60_000)));
    bed.client.write(requests);
    await sleep(1_000);
    // Taken only up to the sockets' kernel buffers and one read of the addon's, not 64 MB.
    expect(bed.client.writableLength).toBeGreaterThan(requests.length / 2);
    bed.broker().resume();
    await until(() => bed!.brokerBytes() === requests.length, 'every request', 25_000);
    expect(bed.brokerGot().equals(requests)).toBe(true);
  });

  test('a client that does not read: the broker stops being read, and nothing is lost', async () => {
    bed = await start();
    bed.client.pause();
    const n = 32;
    bed.client.write(Buffer.concat(Array.from({ length: n }, (_, i) => opaque(i + 1, 10))));
    await until(() => bed!.pair().status().awaiting === n, 'the requests');
    const answers = Buffer.concat(Array.from({ length: n }, (_, i) => answer(i + 1, 2_000_000)));
    bed.broker().write(answers);
    await sleep(1_000);
    expect(bed.broker().writableLength).toBeGreaterThan(answers.length / 2);
    expect(bed.pair().status().unsentToClient).toBeLessThanOrEqual(256 * 1024);
    bed.client.resume();
    await until(() => bed!.clientBytes() === answers.length, 'every answer', 25_000);
    expect(bed.clientGot().equals(answers)).toBe(true);
  });
});
