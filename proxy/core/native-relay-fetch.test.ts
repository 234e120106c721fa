// The native path's Fetch v16-18 walk (native/frames.h through native-relay.ts) on real loopback
// sockets: answers go to the client byte for byte as they arrive, cut anywhere, but for the
// NodeEndpoints at their end, which come back as the JavaScript walker (fetch-stream.ts) rewrites
// them; a malformed answer ends the pair as the JavaScript path ends it, and the addon's walk
// accepts exactly what the JavaScript one accepts. The addon must be built (npm run build).
import fc from 'fast-check';
import { afterEach, describe, expect, test } from 'vitest';
import { ProtocolError } from '../../protocol/errors.js';
import { decodeResponseFrame, encodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultFetchRequest } from '../../protocol/messages/fetch-request.js';
import type { FetchResponse, NodeEndpoint } from '../../protocol/messages/fetch-response.js';
import { FETCH_STREAM_VERSIONS, FetchResponseStream, rewriteFetchTail } from './fetch-stream.js';
import type { ExposeBrokerNow } from './fetch-stream.js';
import { rich } from '../../test/harness/fetch-answers.js';
import { binding, start, until, writeCut } from '../../test/harness/native-relay-bed.js';
import type { Bed } from '../../test/harness/native-relay-bed.js';

let bed: Bed | null = null;
afterEach(async () => {
  await bed?.stop();
  bed = null;
});

const fetchRequest = (correlationId: number, version: number): Buffer =>
  encodeRequestFrame(
    { apiKey: ApiKey.Fetch, apiVersion: version, correlationId, clientId: 'native-fetch' },
    defaultFetchRequest(),
  );

/** An answer with every part of the layout (aborted transactions, known and unknown tags, nulls). */
const body = (nodeEndpoints: NodeEndpoint[], first: number, perPartition = 300): FetchResponse =>
  rich(nodeEndpoints, undefined, { first, perPartition });

const exposeTo =
  (host: string, pending = false): ExposeBrokerNow =>
  (nodeId) => ({
    host,
    port: 40000 + nodeId,
    ...(pending ? { ready: new Promise<void>(() => undefined) } : {}),
  });

/** What the JavaScript walker sends for `frame` (or the error it throws), as the native path must. */
function javascriptWalk(frame: Buffer, version: number, expose: ExposeBrokerNow, mayWait = true): Buffer {
  const s = new FetchResponseStream(version);
  const sent = Buffer.from(s.push(Buffer.from(frame)));
  if (mayWait) return Buffer.concat([sent, s.finish(expose).tail]);
  // As NativeRelay.fetchTail asks: a broker not listening yet is dropped, not waited for.
  return Buffer.concat([sent, rewriteFetchTail(frame.subarray(s.safeBytes), expose, version, false).tail]);
}

/**
 * The client sends a Fetch request of each answer's version; the broker answers each once it has
 * read the requests, all its answers cut at `cuts`. Resolves once the client has `expected` bytes.
 */
async function exchange(b: Bed, versions: number[], answers: Buffer[], cuts: number[]): Promise<void> {
  const requests = Buffer.concat(versions.map((v, i) => fetchRequest(i + 1, v)));
  b.client.write(requests);
  await until(() => b.brokerBytes() >= requests.length, 'the requests at the broker');
  expect(b.brokerGot().equals(requests)).toBe(true);
  await writeCut(b.broker(), Buffer.concat(answers), cuts);
}

const versions = [16, 17, 18, 17, 18, 16];
const answersOf = (endpoints: NodeEndpoint[]): Buffer[] =>
  versions.map((v, i) => encodeResponseFrame(ApiKey.Fetch, v, i + 1, body(endpoints, 70_000 * (i % 3))));

describe('Fetch v16-18 answers on the native path', { timeout: 60_000 }, () => {
  test('every Fetch version the walker knows is one the addon walks', () => {
    expect(FETCH_STREAM_VERSIONS).toEqual({ min: 16, max: 18 });
  });

  test('without NodeEndpoints they go byte for byte, cut anywhere, and the pair stays native', async () => {
    bed = await start();
    const answers = answersOf([]);
    const all = Buffer.concat(answers);
    const cuts = [
      1,
      3,
      4,
      5,
      8,
      9,
      12,
      ...Array.from({ length: 60 }, (_, i) => (i * 7919 * 31) % all.length),
    ];
    await exchange(bed, versions, answers, cuts);
    await until(() => bed!.clientBytes() >= all.length, 'every answer');
    expect(bed.clientGot().equals(all)).toBe(true);
    expect(bed.handbacks).toEqual([]);
    expect(bed.ends).toEqual([]);
    expect(bed.pair().status().awaiting).toBe(0);
  });

  test('NodeEndpoints come back as the JavaScript walker rewrites them, to the same length', async () => {
    const expose = exposeTo('proxy.example');
    bed = await start({ exposeBroker: expose });
    const endpoints = [
      { nodeId: 2, host: 'broker-2.internal', port: 9092, rack: 'r1' },
      { nodeId: -1, host: 'none', port: 0, rack: null },
    ];
    const answers = answersOf(endpoints);
    const expected = Buffer.concat(answers.map((a, i) => javascriptWalk(a, versions[i]!, expose)));
    expect(expected.length).toBe(Buffer.concat(answers).length);
    // Cut inside the NodeEndpoints of the first answer too.
    await exchange(bed, versions, answers, [answers[0]!.length - 3, answers[0]!.length + 9]);
    await until(() => bed!.clientBytes() >= expected.length, 'every answer');
    expect(bed.clientGot().equals(expected)).toBe(true);
    const first = decodeResponseFrame(bed.clientGot().subarray(4, answers[0]!.length), ApiKey.Fetch, 16)
      .body as FetchResponse;
    expect(first.nodeEndpoints[0]).toMatchObject({ nodeId: 2, host: 'proxy.example', port: 40002 });
    expect(bed.ends).toEqual([]);
  });

  test('a broker whose listener is not open yet is dropped from NodeEndpoints, not waited for', async () => {
    const expose = exposeTo('proxy.example', true);
    bed = await start({ exposeBroker: expose });
    const answer = encodeResponseFrame(
      ApiKey.Fetch,
      17,
      1,
      body([{ nodeId: 3, host: 'b3', port: 1, rack: null }], 10),
    );
    await exchange(bed, [17], [answer], []);
    await until(() => bed!.clientBytes() >= answer.length, 'the answer');
    expect(bed.clientGot().equals(javascriptWalk(answer, 17, expose, false))).toBe(true);
    const got = decodeResponseFrame(bed.clientGot().subarray(4), ApiKey.Fetch, 17).body as FetchResponse;
    expect(got.nodeEndpoints).toEqual([]);
    expect(got.responses.length).toBe(2);
  });

  test('without a way to expose brokers, NodeEndpoints end the pair rather than reach the client', async () => {
    bed = await start();
    const answer = encodeResponseFrame(
      ApiKey.Fetch,
      18,
      1,
      body([{ nodeId: 3, host: 'b3', port: 1, rack: null }], 10),
    );
    await exchange(bed, [18], [answer], []);
    await until(() => bed!.ends.length > 0, 'the end');
    expect(bed.ends[0]!.end).toBe('bad response from broker');
    expect(bed.clientGot().includes(Buffer.from('b3'))).toBe(false);
  });

  test("the addon's walk finds the tail where the JavaScript walker does, and refuses what it refuses", () => {
    const expose = exposeTo('proxy.example');
    let refused = 0;
    for (const endpoints of [[], [{ nodeId: 2, host: 'broker-2', port: 9092, rack: null }]]) {
      const frame = encodeResponseFrame(ApiKey.Fetch, 18, 1, body(endpoints, 3, 1));
      // Every byte after the size prefix changed in a few ways, and the frame cut short.
      const variants: Buffer[] = [];
      for (let at = 4; at < frame.length; at++) {
        for (const change of [1, 0x80, 0x7f]) {
          const f = Buffer.from(frame);
          f[at] = f[at]! ^ change;
          variants.push(f);
        }
      }
      for (let len = 5; len < frame.length; len += 7) variants.push(resized(frame, len));
      for (const [i, f] of variants.entries()) {
        const payload = f.subarray(4);
        const native = binding.fetchWalk(payload, i % payload.length);
        const s = new FetchResponseStream(18);
        let pushed = true;
        try {
          s.push(Buffer.from(f));
        } catch (err) {
          expect(err).toBeInstanceOf(ProtocolError);
          pushed = false;
        }
        if (!pushed) {
          refused++;
          expect(native, `variant ${i}`).toBeLessThan(0);
          continue;
        }
        expect(native, `variant ${i}`).toBe(s.safeBytes - 4);
        const section = f.subarray(s.safeBytes);
        if (!binding.fetchTailUnchanged(section)) continue;
        // What the addon passes as written, the JavaScript walker passes as written too.
        expect(s.finish(expose).outcome, `variant ${i}`).toBe('unchanged');
      }
    }
    expect(refused).toBeGreaterThan(100);
  });

  test('the addon accepts exactly the answers the JavaScript walker accepts', async () => {
    const expose = exposeTo('proxy.example');
    const frame = encodeResponseFrame(
      ApiKey.Fetch,
      17,
      1,
      body([{ nodeId: 2, host: 'broker-2', port: 9092, rack: null }], 3, 1),
    );
    const cases = fc.sample(
      fc.record({
        at: fc.integer({ min: 8, max: frame.length - 1 }),
        byte: fc.integer({ min: 0, max: 255 }),
      }),
      { numRuns: 40, seed: 42 },
    );
    // Shortened and lengthened frames (their size prefix kept true) besides the mutated bytes.
    const frames = [
      ...cases.map(({ at, byte }) => {
        const f = Buffer.from(frame);
        f[at] = byte;
        return f;
      }),
      resized(frame, frame.length - 1),
      resized(frame, frame.length - 20),
      resized(frame, frame.length + 1),
    ];
    let accepted = 0;
    for (const f of frames) {
      let js: Buffer | null;
      try {
        js = javascriptWalk(f, 17, expose);
      } catch (err) {
        expect(err).toBeInstanceOf(ProtocolError);
        js = null;
      }
      bed = await start({ exposeBroker: expose });
      await exchange(bed, [17], [f], [f.length >> 1]);
      const b = bed;
      await until(() => b.ends.length > 0 || b.clientBytes() >= f.length, 'the answer or the end');
      if (js === null) {
        expect(b.ends.map((e) => e.end)).toEqual(['bad response from broker']);
      } else {
        accepted++;
        expect(b.ends).toEqual([]);
        expect(b.clientGot().equals(js)).toBe(true);
      }
      await b.stop();
      bed = null;
    }
    // Both kinds were tried.
    expect(accepted).toBeGreaterThan(3);
    expect(accepted).toBeLessThan(frames.length - 3);
  });
});

/** `frame` cut or padded with zeros to `length` bytes, its size prefix saying so. */
function resized(frame: Buffer, length: number): Buffer {
  const f = Buffer.alloc(length);
  frame.copy(f, 0, 0, Math.min(length, frame.length));
  f.writeInt32BE(length - 4, 0);
  return f;
}
