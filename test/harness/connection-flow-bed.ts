// The fake-broker bed of the flow-control tests of one ProxyConnection (proxy/core/connection-flow*.test.ts):
// the requests they send, the answers the fake broker and a local extension give, and the two relay
// paths every flow runs on.
import { encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { defaultProduceRequest } from '../../protocol/messages/produce-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import type { ProxyExtension, RequestDecision, RequestInfo } from '../../proxy/core/extension.js';
import { connectionBed } from './connection-bed.js';
import type { ConnectionBed } from './connection-bed.js';

export const ZERO_ID = '00000000-0000-0000-0000-000000000000';
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function until(cond: () => boolean, what: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** A request the extension answers (OffsetFetch v1) and one it forwards (Metadata v1). */
export const local = (correlationId: number): Buffer =>
  encodeRequestFrame(
    { apiKey: ApiKey.OffsetFetch, apiVersion: 1, correlationId, clientId: 't' },
    { ...defaultOffsetFetchRequest(), groupId: 'g', topics: [{ name: 't', partitionIndexes: [0] }] },
  );
export const forwarded = (correlationId: number): Buffer =>
  encodeRequestFrame(
    { apiKey: ApiKey.Metadata, apiVersion: 1, correlationId, clientId: 't' },
    { ...defaultMetadataRequest(), topics: [] },
  );

/** A broker answer of `bytes` bytes (passed through, never decoded). */
export function brokerAnswer(correlationId: number, bytes: number): Buffer {
  const f = Buffer.alloc(8 + bytes, 1);
  f.writeInt32BE(4 + bytes, 0);
  f.writeInt32BE(correlationId, 4);
  return f;
}

/** An OffsetFetch v1 answer of about `bytes` bytes. */
export function fetchAnswer(bytes: number): OffsetFetchResponse {
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

/** Answers OffsetFetch itself with `answer()` (after `delay()`); counts the answers started. */
export function localExtension(opts: {
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

/** A Produce request with acks=0 (no answer comes from the broker). */
export const produceNoAcks = (correlationId: number): Buffer =>
  encodeRequestFrame(
    { apiKey: ApiKey.Produce, apiVersion: 9, correlationId, clientId: 't' },
    { ...defaultProduceRequest(), acks: 0, timeoutMs: 1000 },
  );

/** A gate: answers wait on `opened` until `open()`. */
export function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

// Every flow runs on the JavaScript path and on the native path (native-relay.ts): the native
// connection moves to it after its first request passed on unread, and hands it back for every
// frame the proxy reads, so each flow crosses between the two.
export const RELAY_PATHS = [
  { path: 'JavaScript', native: false },
  { path: 'native', native: true },
];

/** A connectionBed on the native relay path or the JavaScript one. */
export const flowBedOn =
  (native: boolean) =>
  (
    responses: Parameters<typeof connectionBed>[0],
    policy: Parameters<typeof connectionBed>[1],
    requestsPerWrite?: number,
    brokerPort?: number,
    opts: Parameters<typeof connectionBed>[4] = {},
  ): Promise<ConnectionBed> =>
    connectionBed(responses, policy, requestsPerWrite, brokerPort, { ...opts, native });
