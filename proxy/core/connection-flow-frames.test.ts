// The request bytes of one ProxyConnection on the fake-broker bed, on both relay paths: malformed
// frames close the pair and only it, requests read into a reused buffer and requests streamed to
// the broker as they arrive (a Produce spanning reads among them) reach it unchanged and in order.
// Flow control (slow readers, answer order, drain) is in connection-flow.test.ts.
import { afterEach, describe, expect, test } from 'vitest';
import { encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import { defaultProduceRequest } from '../../protocol/messages/produce-request.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import {
  brokerAnswer,
  fetchAnswer,
  flowBedOn,
  forwarded,
  gate,
  local,
  localExtension,
  RELAY_PATHS,
  sleep,
  until,
} from '../../test/harness/connection-flow-bed.js';
import type { ConnectionBed } from '../../test/harness/connection-bed.js';
import { answerIds } from '../../test/harness/frame-ids.js';
import type { ProxyExtension, RequestDecision, RequestInfo } from './extension.js';
import { RequestBufferPool } from './request-pool.js';

describe.each(RELAY_PATHS)('on the $path path', ({ native }) => {
  const flowBed = flowBedOn(native);

  // Tests that move tens of MB through loopback get 30 s: the machine may be shared and loaded.
  let bed: ConnectionBed | null = null;
  afterEach(async () => {
    await bed?.stop();
    bed = null;
  });

  describe('malformed frames close the pair, and only it', { timeout: 30_000 }, () => {
    const closedFor = async (write: (b: ConnectionBed) => void): Promise<ConnectionBed> => {
      let closes = 0;
      const b = await flowBed((id) => brokerAnswer(id, 10), {
        extension: localExtension({ bytes: 100 }),
        onClose: () => closes++,
      });
      write(b);
      await b.closed;
      expect(closes).toBe(1);
      return b;
    };

    test('a negative request size', async () => {
      bed = await closedFor((b) => b.client.write(Buffer.from([0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0])));
      expect(bed.brokerConnections()).toBe(0);
    });

    test('a request larger than maxFrameSize', async () => {
      bed = await closedFor((b) => {
        const size = Buffer.alloc(4);
        size.writeInt32BE((1 << 24) + 1, 0);
        b.client.write(size);
      });
      expect(bed.brokerConnections()).toBe(0);
    });

    test('a truncated body of a request the proxy decodes', async () => {
      bed = await closedFor((b) => {
        const whole = local(1);
        const cut = whole.subarray(0, whole.length - 3);
        const frame = Buffer.from(cut);
        frame.writeInt32BE(cut.length - 4, 0);
        b.client.write(frame);
      });
      expect(answerIds(bed.received())).toEqual([]);
    });

    test('a broker answer whose correlation id is not the oldest in flight', async () => {
      let closes = 0;
      bed = await flowBed((id) => brokerAnswer(id + 1000, 10), { onClose: () => closes++ });
      bed.client.write(forwarded(1));
      await bed.closed;
      expect(closes).toBe(1);
      expect(answerIds(bed.received())).toEqual([]);
    });
  });

  describe('request bytes read into a reused buffer', { timeout: 30_000 }, () => {
    /** A DescribeConfigs v1 request with `body` bytes of its own after the header (never decoded). */
    function opaque(correlationId: number, bodyBytes: number): Buffer {
      const clientId = Buffer.from('t');
      const f = Buffer.allocUnsafe(4 + 10 + clientId.length + bodyBytes);
      f.writeInt32BE(f.length - 4, 0);
      f.writeInt16BE(ApiKey.DescribeConfigs, 4);
      f.writeInt16BE(1, 6);
      f.writeInt32BE(correlationId, 8);
      f.writeInt16BE(clientId.length, 12);
      clientId.copy(f, 14);
      for (let i = 14 + clientId.length; i < f.length; i++) f[i] = (i * 13 + correlationId) & 0xff;
      return f;
    }

    /**
     * Sends requests of `sizes` (cycled) in bursts of about `burst` bytes, one per event-loop turn,
     * and checks that the broker read each one unchanged.
     */
    async function check(sizes: number[], count: number, burst: number): Promise<void> {
      const sent: Buffer[] = [];
      for (let id = 1; id <= count; id++) sent.push(opaque(id, sizes[id % sizes.length]!));
      for (let i = 0; i < sent.length;) {
        const frames: Buffer[] = [];
        let bytes = 0;
        while (i < sent.length && bytes < burst) {
          bytes += sent[i]!.length;
          frames.push(sent[i++]!);
        }
        bed!.client.write(Buffer.concat(frames));
        await new Promise((r) => setImmediate(r));
      }
      await until(() => answerIds(bed!.received()).length === sent.length, 'every answer', 25_000);
      const frames = bed!.brokerFrames();
      expect(frames.length).toBe(sent.length);
      frames.forEach((f, i) => expect(f.equals(sent[i]!.subarray(4)), `request ${i + 1}`).toBe(true));
    }

    test('reach the broker unchanged, frames within reads and across them', async () => {
      bed = await flowBed((id) => brokerAnswer(id, 10), {}, 1, undefined, { recordRequests: true });
      await check([100, 5_000, 40_000, 70_000, 150_000, 700, 3_000, 1_500, 200, 6_000], 1_000, 64_000);
    });

    test('reach the broker unchanged while writes to it wait below the socket high-water mark', async () => {
      // Each burst's writes wait in the broker socket, below the point where the client is paused,
      // so the client is read again before the socket has taken them.
      bed = await flowBed((id) => brokerAnswer(id, 10), {}, 1, undefined, {
        recordRequests: true,
        brokerWritesTakeMs: 5,
      });
      await check([100, 700, 300, 1_500, 200], 3_000, 1_000);
    });
  });

  describe('a request streamed to the broker as it arrives', { timeout: 30_000 }, () => {
    test("is not split by a request of the proxy's own sent meanwhile", async () => {
      const probe = gate();
      const asked = gate();
      const ext: ProxyExtension = {
        name: 'test',
        apiKeys: new Set([ApiKey.OffsetFetch]),
        interceptsRequest: (apiKey: number) => apiKey === ApiKey.OffsetFetch,
        async handleRequest(info: RequestInfo): Promise<RequestDecision> {
          await probe.opened;
          const answer = info.askBroker!(ApiKey.Metadata, 1, { ...defaultMetadataRequest(), topics: [] });
          asked.open();
          await answer.catch(() => undefined);
          return { action: 'respond', body: fetchAnswer(100) };
        },
      };
      bed = await flowBed((id) => brokerAnswer(id, 10), { extension: ext }, 1, undefined, {
        recordRequests: true,
      });
      const big = encodeRequestFrame(
        { apiKey: ApiKey.Metadata, apiVersion: 1, correlationId: 3, clientId: 't' },
        {
          ...defaultMetadataRequest(),
          topics: Array.from({ length: 4_000 }, (_, i) => ({
            topicId: '00000000-0000-0000-0000-000000000000',
            name: `topic-${i}`,
          })),
        },
      );
      expect(big.length).toBeGreaterThan(40_000);
      // The big request's first bytes, then the proxy's own request, then the rest.
      // A first request opens the broker connection (a connection's first request is never streamed).
      bed.client.write(forwarded(1));
      await until(() => answerIds(bed!.received()).length === 1, 'the first answer');
      bed.client.write(Buffer.concat([local(2), big.subarray(0, 20_000)]));
      await sleep(100);
      probe.open();
      await asked.opened;
      await sleep(100);
      bed.client.write(big.subarray(20_000));
      await until(() => answerIds(bed!.received()).length === 3, 'the three answers');
      expect(answerIds(bed.received())).toEqual([1, 2, 3]);
      await until(() => bed!.brokerFrames().length === 3, 'the three requests at the broker');
      const [, first, second] = bed.brokerFrames();
      expect(first!.equals(big.subarray(4))).toBe(true);
      expect(second!.readInt16BE(0)).toBe(ApiKey.Metadata);
      expect(second!.readInt32BE(4)).toBeLessThan(0);
    });
  });

  describe('a Produce request that spans reads', { timeout: 30_000 }, () => {
    /** A Produce v9 request of about `bytes` bytes with a long transactional id (acks come after it). */
    const produce = (correlationId: number, acks: number, bytes: number): Buffer =>
      encodeRequestFrame(
        { apiKey: ApiKey.Produce, apiVersion: 9, correlationId, clientId: 't' },
        {
          ...defaultProduceRequest(),
          transactionalId: 'x'.repeat(3_000),
          acks,
          timeoutMs: 1000,
          topicData: [
            {
              name: 't',
              topicId: ZERO_UUID,
              partitionData: [{ index: 0, records: Buffer.alloc(bytes, correlationId) }],
            },
          ],
        },
      );

    test('streamed when answered and at most 64 KiB, else received whole: all reach the broker unchanged', async () => {
      bed = await flowBed((id) => (id === 3 ? null : brokerAnswer(id, 10)), {}, 1, undefined, {
        recordRequests: true,
      });
      const sent = [
        forwarded(1),
        produce(2, -1, 50_000),
        produce(3, 0, 40_000),
        produce(4, 1, 300_000),
        forwarded(5),
      ];
      const bytes = Buffer.concat(sent);
      // The first piece ends inside the transactional id: acks are not known yet.
      const cuts = [sent[0]!.length + 100, sent[0]!.length + 2_000];
      for (let at = cuts[1]! + 20_000; at < bytes.length; at += 20_000) cuts.push(at);
      // The first request opens the broker connection (a connection's first request is never streamed).
      bed.client.write(sent[0]!);
      await until(() => answerIds(bed!.received()).length === 1, 'the first answer');
      let from = sent[0]!.length;
      for (const cut of [...cuts, bytes.length]) {
        bed.client.write(bytes.subarray(from, cut));
        from = cut;
        await sleep(2);
      }
      await until(() => answerIds(bed!.received()).length === 4, 'the four answers');
      expect(answerIds(bed.received())).toEqual([1, 2, 4, 5]);
      await until(() => bed!.brokerFrames().length === 5, 'the five requests at the broker');
      bed
        .brokerFrames()
        .forEach((f, i) => expect(f.equals(sent[i]!.subarray(4)), `request ${i + 1}`).toBe(true));
      expect(bed.connection().inFlight).toBe(0);
    });

    test('over 64 KiB, in many reads among local answers: all intact and in order, on the native path', async () => {
      const pool = new RequestBufferPool(64 << 20);
      bed = await flowBed(
        (id) => brokerAnswer(id, 10),
        { extension: localExtension({ bytes: 100 }), requestBuffers: pool },
        1,
        undefined,
        { recordRequests: true },
      );
      const toBroker = [produce(2, -1, 300_000), produce(3, 1, 1 << 20), produce(5, -1, 200_000)];
      const sent = [forwarded(1), toBroker[0]!, toBroker[1]!, local(4), toBroker[2]!, produce(6, 1, 150_000)];
      bed.client.write(sent[0]!);
      await until(() => answerIds(bed!.received()).length === 1, 'the first answer');
      const bytes = Buffer.concat(sent.slice(1));
      for (let at = 0; at < bytes.length; at += 16_384) {
        bed.client.write(bytes.subarray(at, at + 16_384));
        await new Promise((r) => setImmediate(r));
      }
      await until(() => answerIds(bed!.received()).length === 6, 'the six answers', 25_000);
      expect(answerIds(bed.received())).toEqual([1, 2, 3, 4, 5, 6]);
      const atBroker = sent.filter((_, i) => i !== 3);
      await until(() => bed!.brokerFrames().length === atBroker.length, 'the requests at the broker');
      bed
        .brokerFrames()
        .forEach((f, i) => expect(f.equals(atBroker[i]!.subarray(4)), `request ${i + 1}`).toBe(true));
      expect(pool.charged).toBe(0);
      if (native) {
        // Handed back for the local answer only: the large requests were passed on natively, and
        // the connection is on the native path again at the end.
        const moves = bed.nativeMoves();
        expect(moves.attached - moves.handedBack).toBe(1);
      }
    });
  });
});
