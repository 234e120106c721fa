// Flow control of one ProxyConnection on the fake-broker bed: the broker connection is opened only
// when the client first needs it.
import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { encodeRequestFrame, encodeResponseFrame } from '../protocol/frames.js';
import { ApiKey } from '../protocol/messages/index.js';
import { defaultMetadataRequest } from '../protocol/messages/metadata-request.js';
import { defaultOffsetFetchRequest } from '../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../protocol/messages/offset-fetch-response.js';
import { connectionBed } from '../test/harness/connection-bed.js';
import type { ConnectionBed } from '../test/harness/connection-bed.js';
import type { ProxyExtension, RequestDecision, RequestInfo } from './extension.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** A request the extension answers (OffsetFetch v1) and one it forwards (Metadata v1). */
const local = (correlationId: number): Buffer =>
  encodeRequestFrame(
    { apiKey: ApiKey.OffsetFetch, apiVersion: 1, correlationId, clientId: 't' },
    { ...defaultOffsetFetchRequest(), groupId: 'g', topics: [{ name: 't', partitionIndexes: [0] }] },
  );
const forwarded = (correlationId: number): Buffer =>
  encodeRequestFrame(
    { apiKey: ApiKey.Metadata, apiVersion: 1, correlationId, clientId: 't' },
    { ...defaultMetadataRequest(), topics: [] },
  );

/** A broker answer of `bytes` bytes (passed through, never decoded). */
function brokerAnswer(correlationId: number, bytes: number): Buffer {
  const f = Buffer.alloc(8 + bytes, 1);
  f.writeInt32BE(4 + bytes, 0);
  f.writeInt32BE(correlationId, 4);
  return f;
}

/** An OffsetFetch v1 answer of about `bytes` bytes. */
function fetchAnswer(bytes: number): OffsetFetchResponse {
  const partitions = Math.max(1, Math.round(bytes / 1000));
  return {
    throttleTimeMs: 0,
    errorCode: 0,
    groups: [],
    topics: [
      {
        name: 't',
        partitions: Array.from({ length: partitions }, (_, p) => ({
          partitionIndex: p,
          committedOffset: 1n,
          committedLeaderEpoch: -1,
          metadata: 'x'.repeat(980),
          errorCode: 0,
        })),
      },
    ],
  };
}

/** Correlation ids of the whole frames in `bytes`. */
function correlationIds(bytes: Buffer): number[] {
  const ids: number[] = [];
  let at = 0;
  while (at + 8 <= bytes.length) {
    const size = bytes.readInt32BE(at);
    if (at + 4 + size > bytes.length) break;
    ids.push(bytes.readInt32BE(at + 4));
    at += 4 + size;
  }
  return ids;
}

/** Answers OffsetFetch itself with `answer()` (after `delay()`); counts the answers started. */
function localExtension(opts: {
  bytes: number;
  delay?: (n: number) => Promise<void>;
  /** Which answers (numbered from 1) ask the broker first, as an authorization probe does. */
  probe?: (n: number) => boolean;
}): ProxyExtension & { started: number; probeErrors: string[] } {
  const ext = {
    name: 'test',
    apiKeys: new Set([ApiKey.OffsetFetch]),
    started: 0,
    probeErrors: [] as string[],
    interceptsRequest: (apiKey: number) => apiKey === ApiKey.OffsetFetch,
    async handleRequest(info: RequestInfo): Promise<RequestDecision> {
      const n = ++ext.started;
      if (opts.probe?.(n)) {
        try {
          await info.askBroker!(ApiKey.Metadata, 1, { ...defaultMetadataRequest(), topics: [] });
        } catch (err) {
          ext.probeErrors.push((err as Error).message);
        }
      }
      await opts.delay?.(n);
      return { action: 'respond', body: fetchAnswer(opts.bytes) };
    },
  };
  return ext;
}

let bed: ConnectionBed | null = null;
afterEach(async () => {
  await bed?.stop();
  bed = null;
});

describe('the broker connection', () => {
  test('is opened by the first request that needs the broker, not by connecting or a partial request', async () => {
    bed = await connectionBed((id) => brokerAnswer(id, 10), {});
    await sleep(100);
    expect(bed.brokerConnections()).toBe(0);
    const frame = forwarded(1);
    bed.client.write(frame.subarray(0, 10));
    await sleep(100);
    expect(bed.brokerConnections()).toBe(0);
    bed.client.write(Buffer.concat([frame.subarray(10), forwarded(2)]));
    await until(() => correlationIds(bed!.received()).length === 2, 'both answers');
    expect(correlationIds(bed.received())).toEqual([1, 2]);
    expect(bed.brokerConnections()).toBe(1);
  });

  test('a request the proxy answers without the broker opens none', async () => {
    const ext = localExtension({ bytes: 1000 });
    bed = await connectionBed((id) => brokerAnswer(id, 10), { extension: ext });
    bed.client.write(local(1));
    await until(() => correlationIds(bed!.received()).length === 1, 'the answer');
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
    bed = await connectionBed((id) => brokerAnswer(id, 10), {}, 1, closedPort);
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
