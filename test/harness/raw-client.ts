// A bare Kafka wire client for tests that must control the exact bytes: pipelines written in one
// write, malformed frames, legacy SASL raw tokens. Frames are read with the project's own splitter
// and decoded with its codecs, so a test can check correlation ids and bodies.
import net from 'node:net';
import tls from 'node:tls';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import { defaultApiVersionsRequest } from '../../protocol/messages/api-versions-request.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';

export interface RawClientOptions {
  tls?: tls.ConnectionOptions;
}

export class RawClient {
  private readonly splitter = new FrameSplitter({ maxFrameSize: 64 * 1024 * 1024 });
  private readonly frames: Buffer[] = [];
  private waiter: (() => void) | null = null;
  private error: Error | null = null;
  /** Resolves when the peer closed (or reset) the connection. */
  readonly closed: Promise<void>;
  private isClosed = false;

  private constructor(readonly socket: net.Socket) {
    this.closed = new Promise((resolve) =>
      socket.once('close', () => {
        this.isClosed = true;
        this.wake();
        resolve();
      }),
    );
    socket.on('error', (err) => {
      this.error = err;
    });
    socket.on('data', (chunk: Buffer) => {
      try {
        this.frames.push(...this.splitter.push(chunk));
      } catch (err) {
        this.error = err as Error;
        socket.destroy();
      }
      this.wake();
    });
  }

  static connect(hostPort: string, opts: RawClientOptions = {}): Promise<RawClient> {
    const [host, port] = splitHostPort(hostPort);
    return new Promise((resolve, reject) => {
      const socket = opts.tls ? tls.connect({ host, port, ...opts.tls }) : net.connect({ host, port });
      socket.once(opts.tls ? 'secureConnect' : 'connect', () => {
        socket.removeListener('error', reject);
        resolve(new RawClient(socket));
      });
      socket.once('error', reject);
    });
  }

  get hasClosed(): boolean {
    return this.isClosed;
  }

  write(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  /** The next `count` response payloads (size prefix removed), or throws on close/timeout. */
  async read(count: number, timeoutMs = 10_000): Promise<Buffer[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.frames.length < count) {
      if (this.isClosed) {
        throw new Error(
          `connection closed after ${this.frames.length} of ${count} frames${this.error ? `: ${this.error.message}` : ''}`,
        );
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`only ${this.frames.length} of ${count} frames within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return this.frames.splice(0, count);
  }

  /** Resolves true if the peer closes within `timeoutMs`, false if the connection is still open. */
  async closesWithin(timeoutMs: number): Promise<boolean> {
    if (this.isClosed) return true;
    return Promise.race([
      this.closed.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), timeoutMs)),
    ]);
  }

  /** Sends one request and decodes its response. */
  async request<T>(apiKey: number, apiVersion: number, correlationId: number, body: unknown): Promise<T> {
    this.write(encodeRequestFrame({ apiKey, apiVersion, correlationId, clientId: 'raw-test' }, body));
    const [frame] = await this.read(1);
    const { header, body: response } = decodeResponseFrame(frame!, apiKey, apiVersion);
    if (header.correlationId !== correlationId) {
      throw new Error(`correlation id ${header.correlationId}, expected ${correlationId}`);
    }
    return response as T;
  }

  close(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}

export function splitHostPort(hostPort: string): [string, number] {
  const i = hostPort.lastIndexOf(':');
  return [hostPort.slice(0, i), Number(hostPort.slice(i + 1))];
}

// ---- request builders -----------------------------------------------------------------------------

export const metadataRequestBody = (topics: string[] | null = []) => ({
  topics: topics?.map((name) => ({ topicId: 'AAAAAAAAAAAAAAAAAAAAAA', name })) ?? null,
  allowAutoTopicCreation: false,
  includeClusterAuthorizedOperations: false,
  includeTopicAuthorizedOperations: false,
});

export function metadataRequest(version: number, correlationId: number): Buffer {
  return encodeRequestFrame(
    { apiKey: ApiKey.Metadata, apiVersion: version, correlationId, clientId: 'raw-test' },
    metadataRequestBody(),
  );
}

export function apiVersionsRequest(version: number, correlationId: number): Buffer {
  if (version > getApiCodec(ApiKey.ApiVersions)!.validVersions.max) {
    // Newer than any codec: hand-build a v3+-style header (flexible: client id + empty tagged fields)
    // and a body of two empty compact strings + no tags, as a future client would send.
    const body = Buffer.from([0x0a, ...Buffer.from('raw-test'), 0x00, 0x01, 0x01, 0x00]);
    const head = Buffer.alloc(8);
    head.writeInt16BE(ApiKey.ApiVersions, 0);
    head.writeInt16BE(version, 2);
    head.writeInt32BE(correlationId, 4);
    return withSize(Buffer.concat([head, body]));
  }
  return encodeRequestFrame(
    { apiKey: ApiKey.ApiVersions, apiVersion: version, correlationId, clientId: 'raw-test' },
    { ...defaultApiVersionsRequest(), clientSoftwareName: 'raw-test', clientSoftwareVersion: '1.0' },
  );
}

export function withSize(payload: Buffer): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(payload.length, 0);
  return Buffer.concat([size, payload]);
}

export function brokerAddresses(body: MetadataResponse): { nodeId: number; host: string; port: number }[] {
  return body.brokers.map((b) => ({ nodeId: b.nodeId, host: b.host, port: b.port }));
}

// ---- a minimal v2 record batch (for a raw Produce) ---------------------------------------------------

const CRC32C_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    table[i] = c >>> 0;
  }
  return table;
})();

function crc32c(buf: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of buf) crc = CRC32C_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function varint(n: number): Buffer {
  let z = (n << 1) ^ (n >> 31); // zigzag
  const out: number[] = [];
  z >>>= 0;
  while (z > 0x7f) {
    out.push((z & 0x7f) | 0x80);
    z >>>= 7;
  }
  out.push(z);
  return Buffer.from(out);
}

/** One uncompressed magic-2 batch holding one record with `value` and no key. */
export function recordBatch(value: string): Buffer {
  const v = Buffer.from(value);
  const recordBody = Buffer.concat([
    Buffer.from([0]), // attributes
    varint(0), // timestamp delta
    varint(0), // offset delta
    varint(-1), // null key
    varint(v.length),
    v,
    varint(0), // headers
  ]);
  const record = Buffer.concat([varint(recordBody.length), recordBody]);
  // From attributes to the end: what the CRC covers.
  const afterCrc = Buffer.alloc(2 + 4 + 8 + 8 + 8 + 2 + 4 + 4);
  const now = BigInt(Date.now());
  let o = 0;
  o = afterCrc.writeInt16BE(0, o); // attributes
  o = afterCrc.writeInt32BE(0, o); // last offset delta
  o = afterCrc.writeBigInt64BE(now, o);
  o = afterCrc.writeBigInt64BE(now, o);
  o = afterCrc.writeBigInt64BE(-1n, o); // producer id
  o = afterCrc.writeInt16BE(-1, o); // producer epoch
  o = afterCrc.writeInt32BE(-1, o); // base sequence
  afterCrc.writeInt32BE(1, o); // record count
  const crcPart = Buffer.concat([afterCrc, record]);
  const head = Buffer.alloc(8 + 4 + 4 + 1 + 4);
  head.writeBigInt64BE(0n, 0);
  head.writeInt32BE(4 + 1 + 4 + crcPart.length, 8); // batch length: from leader epoch on
  head.writeInt32BE(-1, 12);
  head.writeInt8(2, 16);
  head.writeUInt32BE(crc32c(crcPart), 17);
  return Buffer.concat([head, crcPart]);
}

export function produceRequest(
  version: number,
  correlationId: number,
  topic: string,
  acks: number,
  value: string,
): Buffer {
  return encodeRequestFrame(
    { apiKey: ApiKey.Produce, apiVersion: version, correlationId, clientId: 'raw-test' },
    {
      transactionalId: null,
      acks,
      timeoutMs: 10_000,
      topicData: [
        { name: topic, topicId: ZERO_UUID, partitionData: [{ index: 0, records: recordBatch(value) }] },
      ],
    },
  );
}
