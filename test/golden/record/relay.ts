// A recording TCP relay in front of one bed broker: it splits both directions into frames, pairs
// each response with its request (responses come back in request order on a connection; Produce
// with acks=0 gets none) and hands every pair to a callback. ApiVersions responses are capped to
// the versions the codec knows, as the proxy does, so that clients never send a version the codec
// cannot decode; the pair is recorded as the broker sent it.
//
// SASL is not supported (after SaslHandshake v0 raw tokens follow): run the broker without it.

import net from 'node:net';

import { encodeResponseFrame, decodeResponseFrame, peekProduceAcks, peekRequestHeader } from '../../../protocol/frames.js';
import { FrameSplitter } from '../../../protocol/frame-splitter.js';
import { ApiKey, getApiCodec } from '../../../protocol/messages/index.js';
import type { ApiVersionsResponse } from '../../../protocol/messages/api-versions-response.js';
import { defaultApiVersionsResponse } from '../../../protocol/messages/api-versions-response.js';

export interface RecordedPair {
  /** The label the relay had when the client connected (which client this is). */
  client: string;
  apiKey: number;
  apiVersion: number;
  correlationId: number;
  /** Frames without their 4-byte size prefix, copied. */
  request: Buffer;
  /** As the broker sent it (for ApiVersions: before the relay capped it); null for Produce acks=0. */
  response: Buffer | null;
}

export interface Relay {
  host: string;
  port: number;
  /** Where new connections go; connections accepted before it is set wait for it. */
  setUpstream(host: string, port: number): void;
  /** The client label of connections accepted from now on. */
  setClient(name: string): void;
  /** Pairs that could not be followed (e.g. unknown correlation), for the report. */
  readonly problems: string[];
  close(): Promise<void>;
}

const MAX_FRAME = 64 * 1024 * 1024;
const UNSUPPORTED_VERSION = 35;
const FIRST_PRODUCE_OF_TRANSACTIONS_V2 = 12;

interface Pending {
  apiKey: number;
  apiVersion: number;
  correlationId: number;
  request: Buffer;
  /** Set when the relay answers itself (ApiVersions of a version the codec does not know). */
  local?: Buffer;
}

function sized(frame: Buffer): Buffer {
  const prefix = Buffer.allocUnsafe(4);
  prefix.writeInt32BE(frame.length, 0);
  return Buffer.concat([prefix, frame]);
}

/** Intersects every API's range with the codec's; drops APIs with nothing in common. */
export function capApiVersions(body: ApiVersionsResponse): void {
  if (body.errorCode !== 0) return;
  const out: ApiVersionsResponse['apiKeys'] = [];
  for (const entry of body.apiKeys) {
    const codec = getApiCodec(entry.apiKey)?.validVersions;
    if (!codec) continue;
    const min = Math.max(entry.minVersion, codec.min);
    const max = Math.min(entry.maxVersion, codec.max);
    if (min > max) continue;
    out.push({ ...entry, minVersion: min, maxVersion: max });
  }
  body.apiKeys = out;
  // As the proxy: with Produce below v12 a client must not use transactions v2 (KIP-890).
  const produce = out.find((e) => e.apiKey === ApiKey.Produce);
  if (produce && produce.maxVersion < FIRST_PRODUCE_OF_TRANSACTIONS_V2) {
    for (const f of body.finalizedFeatures ?? []) {
      if (f.name === 'transaction.version' && f.maxVersionLevel > 1) {
        f.maxVersionLevel = 1;
        f.minVersionLevel = Math.min(f.minVersionLevel, 1);
      }
    }
    for (const f of body.supportedFeatures ?? []) {
      if (f.name === 'transaction.version' && f.maxVersion > 1) {
        f.maxVersion = 1;
        f.minVersion = Math.min(f.minVersion, 1);
      }
    }
  }
}

function unsupportedApiVersions(correlationId: number): Buffer {
  const body = defaultApiVersionsResponse();
  body.errorCode = UNSUPPORTED_VERSION;
  body.apiKeys = [{ apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion: getApiCodec(ApiKey.ApiVersions)!.validVersions.max }];
  return encodeResponseFrame(ApiKey.ApiVersions, 0, correlationId, body);
}

export async function startRelay(onPair: (pair: RecordedPair) => void, host = '127.0.0.1'): Promise<Relay> {
  let upstream: { host: string; port: number } | undefined;
  const waiting: (() => void)[] = [];
  let client = 'unknown';
  const problems: string[] = [];
  const sockets = new Set<net.Socket>();

  const server = net.createServer((down) => {
    const label = client;
    sockets.add(down);
    down.on('close', () => sockets.delete(down));
    down.on('error', () => undefined);
    down.pause();
    const attach = () => {
      const up = net.connect({ host: upstream!.host, port: upstream!.port });
      sockets.add(up);
      up.on('close', () => {
        sockets.delete(up);
        down.destroy();
      });
      up.on('error', () => down.destroy());
      down.on('close', () => up.destroy());
      const queue: Pending[] = [];
      const fromClient = new FrameSplitter({ maxFrameSize: MAX_FRAME });
      const fromBroker = new FrameSplitter({ maxFrameSize: MAX_FRAME });

      // Local answers wait until every broker response before them has gone out.
      const flushLocal = () => {
        while (queue[0]?.local) {
          const p = queue.shift()!;
          down.write(p.local!);
        }
      };

      down.on('data', (chunk: Buffer) => {
        let frames: Buffer[];
        try {
          frames = fromClient.push(chunk);
        } catch (e) {
          problems.push(`${label}: client stream: ${String(e)}`);
          down.destroy();
          return;
        }
        for (const frame of frames) {
          const h = peekRequestHeader(frame);
          const request = Buffer.from(frame);
          const apiVersionsMax = getApiCodec(ApiKey.ApiVersions)!.validVersions.max;
          if (h.apiKey === ApiKey.ApiVersions && h.apiVersion > apiVersionsMax) {
            queue.push({ ...h, request, local: unsupportedApiVersions(h.correlationId) });
            flushLocal();
            continue;
          }
          if (h.apiKey === ApiKey.SaslHandshake) problems.push(`${label}: SASL is not supported by the relay`);
          let expectsResponse = true;
          if (h.apiKey === ApiKey.Produce) {
            try {
              expectsResponse = peekProduceAcks(frame) !== 0;
            } catch {
              // a malformed Produce: the broker closes the connection
            }
          }
          up.write(sized(frame));
          if (expectsResponse) queue.push({ ...h, request });
          else onPair({ client: label, ...h, request, response: null });
        }
      });

      up.on('data', (chunk: Buffer) => {
        let frames: Buffer[];
        try {
          frames = fromBroker.push(chunk);
        } catch (e) {
          problems.push(`${label}: broker stream: ${String(e)}`);
          down.destroy();
          return;
        }
        for (const frame of frames) {
          const p = queue.shift();
          const correlationId = frame.length >= 4 ? frame.readInt32BE(0) : -1;
          if (!p || p.local || p.correlationId !== correlationId) {
            problems.push(`${label}: response ${correlationId} does not match request ${p?.correlationId}`);
            down.destroy();
            return;
          }
          const response = Buffer.from(frame);
          let out = sized(frame);
          if (p.apiKey === ApiKey.ApiVersions) {
            try {
              const { body } = decodeResponseFrame(response, ApiKey.ApiVersions, p.apiVersion);
              capApiVersions(body);
              out = encodeResponseFrame(ApiKey.ApiVersions, p.apiVersion, correlationId, body);
            } catch (e) {
              // An error response (v0 body) to an unsupported version: pass it on as it is.
              problems.push(`${label}: ApiVersions v${p.apiVersion} response not capped: ${String(e)}`);
            }
          }
          down.write(out);
          onPair({ client: label, apiKey: p.apiKey, apiVersion: p.apiVersion, correlationId, request: p.request, response });
          flushLocal();
        }
      });
      down.resume();
    };
    if (upstream) attach();
    else waiting.push(attach);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const address = server.address() as net.AddressInfo;

  return {
    host,
    port: address.port,
    problems,
    setUpstream(h, port) {
      upstream = { host: h, port };
      for (const attach of waiting.splice(0)) attach();
    },
    setClient(name) {
      client = name;
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
