// The native relay's boundary with JavaScript and its Produce walks: objects the addon did not
// make are refused, a Node-API failure and an environment torn down mid-relay end pairs cleanly,
// the production build has no test-only entry points, and the addon's walks decide as the
// JavaScript ones. The relaying itself: native-relay.test.ts.

import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { afterEach, describe, expect, test } from 'vitest';
import { encodeRequestFrame, encodeResponseFrame, peekProduceAcks } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultProduceRequest } from '../../protocol/messages/produce-request.js';
import { loadNativeRelay, NativeRelay, nativePlan } from './native-relay.js';
import { noopObserver } from './observer.js';
import { produceResponseHasNodeEndpoints } from './produce-endpoints.js';
import { produceResponses } from '../../test/harness/produce-responses.js';
import { testingRelayFile } from '../../test/harness/native-testing-addon.js';
import { binding, opaque, plans, sleep, start, until } from '../../test/harness/native-relay-bed.js';
import type { Bed } from '../../test/harness/native-relay-bed.js';

let bed: Bed | null = null;
afterEach(async () => {
  await bed?.stop();
  bed = null;
});

describe("the addon's Produce walks decide as the JavaScript ones", () => {
  const flexibleVersions = [9, 10, 11];
  test('acks, for every version, client id and transactional id, and every prefix of the frame', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 3, max: 11 }),
        fc.integer({ min: -1, max: 1 }),
        fc.integer({ min: 0, max: 600 }),
        fc.option(fc.string({ maxLength: 40 }), { nil: null }),
        (version, acks, txn, clientId) => {
          const frame = encodeRequestFrame(
            { apiKey: ApiKey.Produce, apiVersion: version, correlationId: 1, clientId },
            {
              ...defaultProduceRequest(),
              transactionalId: txn > 0 ? 'y'.repeat(txn) : null,
              acks,
              timeoutMs: 5,
            },
          ).subarray(4);
          const flexible = flexibleVersions.includes(version);
          expect(binding.produceAcks(frame, version, flexible)).toBe(peekProduceAcks(frame));
          for (let cut = 8; cut < frame.length; cut += Math.max(1, Math.floor(frame.length / 40))) {
            const got = binding.produceAcks(frame.subarray(0, cut), version, flexible);
            let js: number | 'short';
            try {
              js = peekProduceAcks(frame.subarray(0, cut));
            } catch {
              js = 'short';
            }
            expect(got === -2 ? 'short' : got, `cut at ${cut}`).toBe(js);
          }
        },
      ),
      { numRuns: 300, seed: 951 },
    );
  });

  test('NodeEndpoints in Produce v10-13 answers, whole, cut short or with bytes after them', () => {
    fc.assert(
      fc.property(fc.constantFrom(10, 11, 12, 13), produceResponses, fc.nat(), (version, body, cut) => {
        const frame = encodeResponseFrame(ApiKey.Produce, version, 1, body).subarray(4);
        expect(binding.produceAnswerUnchanged(frame, version)).toBe(
          !produceResponseHasNodeEndpoints(frame, version),
        );
        // Whatever JavaScript refuses, the addon hands to it.
        expect(binding.produceAnswerUnchanged(frame.subarray(0, cut % frame.length), version)).toBe(false);
        expect(binding.produceAnswerUnchanged(Buffer.concat([frame, Buffer.from([0])]), version)).toBe(false);
      }),
      { numRuns: 500, seed: 10 },
    );
  });

  test('every plan the table gives the addon is one the connection passes on unread', () => {
    for (let api = 0; api < binding.maxApi; api++) {
      for (let v = 0; v < binding.maxVersion; v++) {
        const plan = plans.of(api, v);
        const bits = nativePlan(plan, api, v);
        if (bits === 0) continue;
        // Fetch v16+: passed on unread, its answer streamed through the Fetch walk (bits 3).
        const fetchStream = plan.kind === 'rewrite' && plan.answer.response === 'fetch-stream';
        expect(
          (plan.kind === 'relay' && plan.passedOnUnread) || (fetchStream && bits === 3),
          `${api} v${v}`,
        ).toBe(true);
      }
    }
    expect(nativePlan(plans.of(ApiKey.Fetch, 18), ApiKey.Fetch, 18)).toBe(3);
    expect(nativePlan(plans.of(ApiKey.Fetch, 15), ApiKey.Fetch, 15)).toBe(1);
    expect(nativePlan(plans.of(ApiKey.Metadata, 12), ApiKey.Metadata, 12)).toBe(0);
    expect(nativePlan(plans.of(ApiKey.ApiVersions, 3), ApiKey.ApiVersions, 3)).toBe(0);
    expect(nativePlan(plans.of(ApiKey.Produce, 9), ApiKey.Produce, 9)).toBe(1 | 4 | 8);
    expect(nativePlan(plans.of(ApiKey.Produce, 10), ApiKey.Produce, 10)).toBe(2 | 4 | 8);
    expect(nativePlan(plans.of(ApiKey.Produce, 8), ApiKey.Produce, 8)).toBe(1 | 4);
  });
});

describe('the boundary', () => {
  test('an object the addon did not make, or made as the other kind, is refused, not used', async () => {
    const relay = new NativeRelay(binding, {
      plans,
      maxFrameSize: 1 << 20,
      maxInFlight: 10,
      observer: noopObserver,
    });
    const context = (relay as unknown as { context: object }).context;
    const notOurs = [{}, Buffer.alloc(64), new Float64Array(8)];
    for (const wrong of notOurs) {
      expect(() => binding.attach(wrong, 1, 0, 1, new Float64Array(0))).toThrow(TypeError);
      expect(() => binding.handBack(wrong)).toThrow(TypeError);
      expect(() => binding.close(wrong)).toThrow(TypeError);
      expect(() => binding.status(wrong)).toThrow(TypeError);
      expect(() => binding.dispose(wrong)).toThrow(TypeError);
    }
    // Too few arguments: refused by count, before any is read.
    const call = binding as unknown as Record<string, (...args: unknown[]) => unknown>;
    for (const [name, args, expected] of [
      ['createContext', [], /createContext: 11 arguments expected/],
      ['attach', [context, 1, 0, 1], /attach: 5 arguments expected/],
      ['status', [], /native relay pair expected/],
      ['dispose', [], /dispose: a native relay context expected/],
    ] as const)
      expect(() => call[name]!(...args), name).toThrow(expected);
    // A context where a pair belongs.
    expect(() => binding.status(context)).toThrow(/native relay pair expected/);
    expect(() => binding.handBack(context)).toThrow(TypeError);
    relay.stop();
    // Disposed: it takes no more pairs (their ends could not be reported).
    expect(() => binding.attach(context, 1, 0, 1, new Float64Array(0))).toThrow(/disposed/);
  });

  test('a handback the addon cannot build ends the pair, reported once; JavaScript closes it', async () => {
    bed = await start();
    binding.failNextHandback((bed.relay as unknown as { context: object }).context);
    bed.client.write(opaque(1, 10));
    await until(() => bed!.brokerBytes() === opaque(1, 10).length, 'the request at the broker');
    bed.pair().handBack();
    await until(() => bed!.ends.length === 1, 'the end');
    expect(bed.ends[0]!.end).toBe('native relay failed');
    expect(bed.handbacks).toEqual([]);
    await sleep(50);
    expect(bed.ends).toHaveLength(1);
  });

  test('an environment torn down with a pair relaying: its handles are closed, nothing crashes', async () => {
    // A worker thread attaches a pair and is terminated: Node closes its loop, which must have no
    // handle of the addon left open (without the cleanup hook this is a segmentation fault).
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      const net = require('node:net');
      const b = require(workerData.addon);
      const stats = new Float64Array(b.statsHeader + 3 * b.statsSamples);
      const none = () => undefined;
      const ctx = b.createContext(new Uint8Array(b.maxApi * b.maxVersion), 1 << 20, 10,
        performance.now(), none, none, none, stats, 65536, () => true, none);
      let client;
      const server = net.createServer({ pauseOnConnect: true }, (accepted) => {
        globalThis.kept = [b.attach(ctx, 1, accepted._handle.fd, client._handle.fd, new Float64Array(0)), accepted];
        parentPort.postMessage('attached');
      });
      server.listen(0, '127.0.0.1', () => {
        client = net.connect(server.address().port, '127.0.0.1');
        client.pause();
      });`;
    const worker = new Worker(code, { eval: true, workerData: { addon: testingRelayFile() } });
    const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
    await new Promise<void>((resolve, reject) => {
      worker.once('message', () => resolve());
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(await exited).toBe(1); // terminated, not crashed (this process would be gone)
  });

  test('the production build has no test-only entry points', () => {
    const { binding: production, why } = loadNativeRelay();
    if (production === null) throw new Error(`the native relay addon is ${why}: run npm run build`);
    expect(Object.getOwnPropertyNames(production).sort()).toEqual([
      'attach',
      'close',
      'createContext',
      'dispose',
      'handBack',
      'maxApi',
      'maxVersion',
      'routeCStderr',
      'statsHeader',
      'statsSamples',
      'status',
    ]);
    expect(Object.getOwnPropertyNames(binding)).toEqual(
      expect.arrayContaining(['failNextHandback', 'produceAcks', 'produceAnswerUnchanged']),
    );
  });
});
