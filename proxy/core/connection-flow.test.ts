// Flow control of one ProxyConnection on the fake-broker bed, on both relay paths: answers in request order whoever
// gives them, acks=0 Produce without a queue slot, --max-in-flight, drain; a client that does not
// read stops being read whoever answers it, a slow answer at the head never deadlocks the queue, a
// request of the proxy's own (askBroker) fails after its deadline, and the broker connection is
// opened only when the client first needs it. The bytes of requests (malformed frames, reused
// buffers, requests streamed as they arrive) are in connection-flow-frames.test.ts.
import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { encodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import { defaultMetadataResponse } from '../../protocol/messages/metadata-response.js';
import {
  brokerAnswer,
  fetchAnswer,
  flowBedOn,
  forwarded,
  gate,
  local,
  localExtension,
  produceNoAcks,
  RELAY_PATHS,
  sleep,
  until,
  ZERO_ID,
} from '../../test/harness/connection-flow-bed.js';
import type { ConnectionBed } from '../../test/harness/connection-bed.js';
import { answerIds } from '../../test/harness/frame-ids.js';
import type { ProxyExtension } from './extension.js';
import { CONNECTION_RESPONSE_BYTES } from './response-backlog.js';

describe.each(RELAY_PATHS)('on the $path path', ({ native }) => {
  const flowBed = flowBedOn(native);

  // Tests that move tens of MB through loopback get 30 s: the machine may be shared and loaded.
  let bed: ConnectionBed | null = null;
  afterEach(async () => {
    await bed?.stop();
    bed = null;
  });

  describe('a client that does not read', { timeout: 30_000 }, () => {
    test('locally answered requests stop being started; once it reads, every answer comes in order', async () => {
      const ext = localExtension({ bytes: 1_000_000 });
      bed = await flowBed((id) => brokerAnswer(id, 10), { extension: ext, maxInFlight: 1000 });
      bed.client.pause();
      const n = 60;
      bed.client.write(Buffer.concat(Array.from({ length: n }, (_, k) => local(k + 1))));
      await sleep(300);
      const startedEarly = ext.started;
      await sleep(300);
      // Stopped: what it holds is the kernel's socket buffers, ~1 MiB here and the answer that
      // passed it, not 60 answers of 1 MB.
      expect(ext.started).toBe(startedEarly);
      expect(ext.started).toBeLessThan(n / 2);
      bed.client.resume();
      await until(() => answerIds(bed!.received()).length === n, 'every answer', 30_000);
      expect(answerIds(bed.received())).toEqual(Array.from({ length: n }, (_, k) => k + 1));
    });

    test('requests it sends meanwhile are not read either (as a broker mutes a connection)', async () => {
      const ext = localExtension({ bytes: 500_000 });
      bed = await flowBed((id) => brokerAnswer(id, 10), { extension: ext });
      bed.client.pause();
      bed.client.write(Buffer.concat(Array.from({ length: 100 }, (_, k) => local(k + 1))));
      await sleep(300);
      const started = ext.started;
      const brokerBytes = bed.brokerWritten();
      // Forwarded requests behind them: not read, so the broker sees none of them.
      bed.client.write(Buffer.concat(Array.from({ length: 50 }, (_, k) => forwarded(101 + k))));
      await sleep(300);
      expect(ext.started).toBe(started);
      expect(bed.brokerWritten()).toBe(brokerBytes);
      bed.client.resume();
      await until(() => answerIds(bed!.received()).length === 150, 'every answer', 30_000);
      expect(answerIds(bed.received())).toEqual(Array.from({ length: 150 }, (_, k) => k + 1));
    });

    test('it is closed after idleTimeoutMs without reading, though answers are in flight', async () => {
      const ext = localExtension({ bytes: 1_000_000 });
      bed = await flowBed((id) => brokerAnswer(id, 10), { extension: ext, idleTimeoutMs: 500 });
      bed.client.pause();
      bed.client.write(Buffer.concat(Array.from({ length: 60 }, (_, k) => local(k + 1))));
      await sleep(1_500);
      // It sees the close once it reads what the kernel holds for it: a part of the answers.
      bed.client.resume();
      await bed.closed;
      expect(answerIds(bed.received()).length).toBeLessThan(60);
    });
  });

  describe('answers that wait behind a slow one', { timeout: 30_000 }, () => {
    test('a broker answer at the head: local answers behind it stop at the bound, none deadlocks', async () => {
      const ext = localExtension({ bytes: 300_000 });
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      bed = await flowBed((id) => (id === 1 ? held.then(() => brokerAnswer(id, 10)) : brokerAnswer(id, 10)), {
        extension: ext,
      });
      bed.client.write(Buffer.concat([forwarded(1), ...Array.from({ length: 20 }, (_, k) => local(k + 2))]));
      await sleep(300);
      // They wait for the head, in memory: started only up to the bound (and the one that passed it).
      expect(ext.started).toBeLessThanOrEqual(Math.ceil(CONNECTION_RESPONSE_BYTES / 300_000) + 1);
      release();
      await until(() => answerIds(bed!.received()).length === 21, 'every answer');
      expect(answerIds(bed.received())).toEqual(Array.from({ length: 21 }, (_, k) => k + 1));
    });

    test('a slow local answer at the head: broker answers behind it pile up only to the bound', async () => {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const ext = localExtension({ bytes: 1000, delay: (n) => (n === 1 ? held : Promise.resolve()) });
      const big = 400_000;
      const n = 80;
      bed = await flowBed((id) => brokerAnswer(id, big), { extension: ext });
      bed.client.write(Buffer.concat([local(1), ...Array.from({ length: n }, (_, k) => forwarded(k + 2))]));
      await sleep(500);
      // The broker is no longer read once ~1 MiB waits: it has sent what its socket buffers and
      // the proxy's took, far from the 32 MB asked for.
      expect(bed.brokerWritten()).toBeLessThan((n * big) / 2);
      expect(bed.received().length).toBe(0);
      release();
      await until(() => answerIds(bed!.received()).length === n + 1, 'every answer', 30_000);
      expect(answerIds(bed.received())).toEqual(Array.from({ length: n + 1 }, (_, k) => k + 1));
    });

    test('a local answer waiting for its own probe behind broker answers: the broker is read on', async () => {
      // Answer 1 is slow, so 20 broker answers of 400 KB pile up behind it and the broker is no
      // longer read; answer 2 then starts and probes, and its probe's answer comes after those 8 MB.
      const ext = localExtension({
        bytes: 1000,
        delay: (n) => (n === 1 ? sleep(200) : Promise.resolve()),
        probe: (n) => n === 2,
      });
      const probeAnswer = (id: number) =>
        encodeResponseFrame(ApiKey.Metadata, 1, id, defaultMetadataResponse());
      bed = await flowBed((id) => (id < 0 ? probeAnswer(id) : brokerAnswer(id, 400_000)), {
        extension: ext,
        requestTimeoutMs: 3_000,
      });
      const n = 22;
      bed.client.write(
        Buffer.concat([local(1), local(2), ...Array.from({ length: n - 2 }, (_, k) => forwarded(k + 3))]),
      );
      await until(() => answerIds(bed!.received()).length === n, 'every answer', 30_000);
      expect(answerIds(bed.received())).toEqual(Array.from({ length: n }, (_, k) => k + 1));
      expect(ext.probeErrors).toEqual([]);
    });
  });

  describe("a request of the proxy's own (askBroker)", () => {
    test('fails after requestTimeoutMs; its late answer is read and dropped, later answers are right', async () => {
      let release!: () => void;
      const frozen = new Promise<void>((r) => (release = r));
      const ext = localExtension({ bytes: 1000, probe: () => true });
      bed = await flowBed((id) => frozen.then(() => brokerAnswer(id, 10)), {
        extension: ext,
        requestTimeoutMs: 200,
      });
      const t0 = Date.now();
      bed.client.write(local(1));
      await until(() => answerIds(bed!.received()).length === 1, 'the answer');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
      expect(ext.probeErrors).toEqual([expect.stringMatching(/did not answer api 3 within 200 ms/)]);
      // The broker wakes up: the probe's late answer comes first, then the client's own.
      bed.client.write(forwarded(2));
      release();
      await until(() => answerIds(bed!.received()).length === 2, 'the forwarded answer');
      expect(answerIds(bed.received())).toEqual([1, 2]);
    });
  });

  describe('idleTimeoutMs', { timeout: 30_000 }, () => {
    test('closes a connection without traffic, not one whose traffic goes on', async () => {
      bed = await flowBed((id) => brokerAnswer(id, 10), { idleTimeoutMs: 400 });
      let closedAt = 0;
      void bed.closed.then(() => (closedAt = Date.now()));
      // Traffic every 100 ms for 1.2 s (three idle timeouts): the connection stays open.
      let quiet = 0;
      for (let id = 1; id <= 12; id++) {
        bed.client.write(forwarded(id));
        await until(() => answerIds(bed!.received()).length === id, `answer ${id}`);
        quiet = Date.now();
        await sleep(100);
      }
      expect(closedAt).toBe(0);
      if (native) expect(bed.nativeMoves().attached).toBeGreaterThan(0);
      await bed.closed;
      expect(closedAt - quiet).toBeGreaterThanOrEqual(350);
      expect(closedAt - quiet).toBeLessThan(5_000);
      expect(answerIds(bed.received())).toEqual(Array.from({ length: 12 }, (_, k) => k + 1));
    });
  });

  describe('the broker connection', () => {
    test('is opened by the first request that needs the broker, not by connecting or a partial request', async () => {
      bed = await flowBed((id) => brokerAnswer(id, 10), {});
      await sleep(100);
      expect(bed.brokerConnections()).toBe(0);
      const frame = forwarded(1);
      bed.client.write(frame.subarray(0, 10));
      await sleep(100);
      expect(bed.brokerConnections()).toBe(0);
      bed.client.write(Buffer.concat([frame.subarray(10), forwarded(2)]));
      await until(() => answerIds(bed!.received()).length === 2, 'both answers');
      expect(answerIds(bed.received())).toEqual([1, 2]);
      expect(bed.brokerConnections()).toBe(1);
    });

    test('a request the proxy answers without the broker opens none', async () => {
      const ext = localExtension({ bytes: 1000 });
      bed = await flowBed((id) => brokerAnswer(id, 10), { extension: ext });
      bed.client.write(local(1));
      await until(() => answerIds(bed!.received()).length === 1, 'the answer');
      expect(bed.brokerConnections()).toBe(0);
    });

    test('that cannot be opened closes the client connection', async () => {
      const closedPort = await new Promise<number>((resolve) => {
        const s = net.createServer();
        s.listen(0, '127.0.0.1', () => {
          const { port } = s.address() as net.AddressInfo;
          s.close(() => resolve(port));
        });
      });
      bed = await flowBed((id) => brokerAnswer(id, 10), {}, 1, closedPort);
      bed.client.write(forwarded(1));
      await bed.closed;
      expect(bed.received().length).toBe(0);
    });
  });

  // The response encoder is what local answers cost: make sure the test's answers are the size meant.
  test('fetchAnswer is about the size asked for', () => {
    const bytes = encodeResponseFrame(ApiKey.OffsetFetch, 1, 1, fetchAnswer(500_000)).length;
    expect(bytes).toBeGreaterThan(450_000);
    expect(bytes).toBeLessThan(550_000);
  });

  describe('the order of answers', { timeout: 30_000 }, () => {
    test('local answers between broker answers wait for the slow broker answer ahead of them', async () => {
      const ext = localExtension({ bytes: 100 });
      const first = gate();
      bed = await flowBed(
        (id) => (id === 1 ? first.opened.then(() => brokerAnswer(id, 10)) : brokerAnswer(id, 10)),
        { extension: ext },
      );
      bed.client.write(Buffer.concat([forwarded(1), local(2), forwarded(3), local(4), forwarded(5)]));
      await until(() => ext.started === 2, 'both local answers');
      await sleep(200);
      // Answered already, the local answers may not overtake the broker's answer to request 1.
      expect(answerIds(bed.received())).toEqual([]);
      first.open();
      await until(() => answerIds(bed!.received()).length === 5, 'every answer');
      expect(answerIds(bed.received())).toEqual([1, 2, 3, 4, 5]);
    });

    test('a Produce with acks=0 is sent to the broker and takes no place in the queue', async () => {
      bed = await flowBed((id) => (id === 2 ? null : brokerAnswer(id, 10)), {});
      bed.client.write(Buffer.concat([forwarded(1), produceNoAcks(2), forwarded(3)]));
      await until(() => answerIds(bed!.received()).length === 2, 'the two answers');
      expect(answerIds(bed.received())).toEqual([1, 3]);
      expect(bed.brokerRequests()).toBe(3);
      // More requests after it are answered: nothing waits for the answer that never comes.
      bed.client.write(forwarded(4));
      await until(() => answerIds(bed!.received()).length === 3, 'the answer after it');
      expect(answerIds(bed.received())).toEqual([1, 3, 4]);
    });
  });

  describe('requests the extension forwards after all', { timeout: 30_000 }, () => {
    test('keep their place among local and broker answers, with an acks=0 Produce in between', async () => {
      // OffsetFetch with an odd correlation id is answered locally, an even one forwarded.
      const ext: ProxyExtension = {
        name: 'test',
        apiKeys: new Set([ApiKey.OffsetFetch]),
        interceptsRequest: (apiKey) => apiKey === ApiKey.OffsetFetch,
        handleRequest: (info) =>
          Promise.resolve(
            info.correlationId % 2 === 1
              ? { action: 'respond', body: fetchAnswer(100) }
              : { action: 'forward' },
          ),
      };
      const first = gate();
      bed = await flowBed(
        (id) =>
          id === 5 ? null : id === 1 ? first.opened.then(() => brokerAnswer(id, 10)) : brokerAnswer(id, 10),
        { extension: ext },
      );
      bed.client.write(
        Buffer.concat([forwarded(1), local(2), local(3), forwarded(4), produceNoAcks(5), local(6), local(7)]),
      );
      await until(() => bed!.brokerRequests() === 5, 'the forwarded requests at the broker');
      expect(answerIds(bed.received())).toEqual([]);
      first.open();
      await until(() => answerIds(bed!.received()).length === 6, 'every answer');
      expect(answerIds(bed.received())).toEqual([1, 2, 3, 4, 6, 7]);
    });
  });

  describe('--max-in-flight', { timeout: 30_000 }, () => {
    test('at the limit the client is no longer read; as answers go out it is read again', async () => {
      const answers = gate();
      bed = await flowBed((id) => answers.opened.then(() => brokerAnswer(id, 10)), { maxInFlight: 2 });
      for (let id = 1; id <= 5; id++) {
        bed.client.write(forwarded(id));
        await sleep(50);
      }
      await sleep(300);
      // Two in flight: the others are in the client socket, not read by the proxy.
      expect(bed.brokerRequests()).toBe(2);
      expect(bed.connection().inFlight).toBe(2);
      answers.open();
      await until(() => answerIds(bed!.received()).length === 5, 'every answer');
      expect(answerIds(bed.received())).toEqual([1, 2, 3, 4, 5]);
      expect(bed.brokerRequests()).toBe(5);
    });
  });

  describe('drain', { timeout: 30_000 }, () => {
    test('waits for the answers in flight, delivers them, then closes the pair', async () => {
      const answer = gate();
      bed = await flowBed((id) => answer.opened.then(() => brokerAnswer(id, 10)), {});
      bed.client.write(Buffer.concat([forwarded(1), forwarded(2)]));
      await until(() => bed!.brokerRequests() === 2, 'both requests at the broker');
      let drained = false;
      const draining = bed
        .connection()
        .drain(10_000)
        .then(() => (drained = true));
      await sleep(200);
      expect(drained).toBe(false);
      answer.open();
      await draining;
      await bed.closed;
      expect(answerIds(bed.received())).toEqual([1, 2]);
    });

    test('reads a request part way through being streamed to its end, and answers it', async () => {
      bed = await flowBed((id) => brokerAnswer(id, 10), {});
      const big = encodeRequestFrame(
        { apiKey: ApiKey.Metadata, apiVersion: 1, correlationId: 2, clientId: 't' },
        {
          ...defaultMetadataRequest(),
          topics: Array.from({ length: 4_000 }, (_, i) => ({ topicId: ZERO_ID, name: `topic-${i}` })),
        },
      );
      // A first request opens the broker connection (a connection's first request is never streamed).
      bed.client.write(forwarded(1));
      await until(() => answerIds(bed!.received()).length === 1, 'the first answer');
      bed.client.write(big.subarray(0, 20_000));
      await sleep(100);
      const started = Date.now();
      const draining = bed.connection().drain(10_000);
      await sleep(100);
      bed.client.write(big.subarray(20_000));
      await draining;
      await bed.closed;
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(answerIds(bed.received())).toEqual([1, 2]);
    });

    test('gives up at its deadline and closes the pair', async () => {
      bed = await flowBed(() => new Promise<Buffer>(() => undefined), {});
      bed.client.write(forwarded(1));
      await until(() => bed!.brokerRequests() === 1, 'the request at the broker');
      const started = Date.now();
      await bed.connection().drain(300);
      await bed.closed;
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      expect(answerIds(bed.received())).toEqual([]);
    });
  });
});
