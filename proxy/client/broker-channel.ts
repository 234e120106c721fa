/**
 * One persistent connection of the cluster client to one broker: requests pipelined with
 * correlation ids, API versions negotiated once per connection, SASL when configured. Every
 * failure is a ClusterRequestError with its code (cluster-error.ts).
 */
import type net from 'node:net';
import { apiCodecsLoaded, loadApiCodecs } from '../../protocol/codec-registry.js';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeResponseFrame, encodeRequestFrame, peekCorrelationId } from '../../protocol/frames.js';
import { defaultApiVersionsRequest } from '../../protocol/messages/api-versions-request.js';
import { ApiKey, getApiInfo } from '../../protocol/messages/api-info.js';
import type { KnownApiKey, RequestBody, ResponseBody } from '../../protocol/messages/api-info.js';
import type { HostPort } from '../core/broker-map.js';
import { connectUpstream } from '../core/upstream-socket.js';
import type { UpstreamTls } from '../core/upstream-socket.js';
import { PROXY_CLIENT_ID } from '../core/defaults.js';
import { authenticate, SaslError } from './sasl-client.js';
import type { SaslCredentials } from './sasl-client.js';
import { ownMaxVersion } from './own-versions.js';
import { ClusterRequestError } from './cluster-error.js';

/** A request body, or a function building it for the negotiated version (fields differ by version). */
export type BodyFor<K extends KnownApiKey> = RequestBody<K> | ((version: number) => RequestBody<K>);

/** The largest answer the proxy's own requests accept (a full Metadata of a big cluster fits). */
const MAX_RESPONSE_BYTES = 256 * 1024 * 1024;

interface InFlight {
  /** Decodes the answer for the request's api key and version and settles its promise. */
  answer(frame: Buffer): void;
  reject(err: ClusterRequestError): void;
  timer: NodeJS.Timeout;
}

export class BrokerChannel {
  private socket: net.Socket | null = null;
  private ready: Promise<void> | null = null;
  private readonly inFlight = new Map<number, InFlight>();
  private nextCorrelationId = 1;
  private versions = new Map<number, { min: number; max: number }>();

  constructor(
    readonly target: HostPort,
    private readonly tls: UpstreamTls | null,
    private readonly timeoutMs: number,
    private readonly sasl: SaslCredentials | null,
  ) {}

  /** The versions of `apiKey` the broker itself supports (codec or not), or undefined. */
  brokerRange(apiKey: number): { min: number; max: number } | undefined {
    return this.versions.get(apiKey);
  }

  /**
   * The version to use for `apiKey`: the highest the broker and the codec both know, within what
   * the proxy's own requests are written for (own-versions.ts).
   */
  versionFor(apiKey: number, atMost?: number): number {
    const broker = this.versions.get(apiKey);
    const codec = getApiInfo(apiKey)?.validVersions;
    if (!broker || !codec)
      throw new ClusterRequestError('UNSUPPORTED_API', `the broker does not support api ${apiKey}`);
    const max = Math.min(
      broker.max,
      codec.max,
      ownMaxVersion(apiKey) ?? Number.MAX_SAFE_INTEGER,
      atMost ?? Number.MAX_SAFE_INTEGER,
    );
    if (max < Math.max(broker.min, codec.min))
      throw new ClusterRequestError('UNSUPPORTED_API', `no common version for api ${apiKey}`);
    return max;
  }

  connect(): Promise<void> {
    if (this.ready) return this.ready;
    const deadline = Date.now() + this.timeoutMs;
    this.ready = new Promise<void>((resolve, reject) => {
      const socket = connectUpstream(this.target, this.tls);
      this.socket = socket;
      // A socket this channel has given up may still report (its 'close' comes after its 'error',
      // and a request may already have reconnected in between): only the current one may fail
      // the channel, or the stale one's close would destroy the new connection and its requests.
      const current = (): boolean => this.socket === socket;
      const splitter = new FrameSplitter({ maxFrameSize: MAX_RESPONSE_BYTES });
      socket.setNoDelay(true);
      socket.on('data', (chunk: Buffer) => {
        if (!current()) return;
        let frames: Buffer[];
        try {
          frames = splitter.push(chunk);
        } catch (err) {
          this.fail(ClusterRequestError.from(err, 'BAD_RESPONSE'));
          return;
        }
        for (const frame of frames) this.onResponse(frame);
      });
      socket.on('error', (err) => {
        const failure = ClusterRequestError.from(err, 'DISCONNECTED');
        if (current()) this.fail(failure);
        reject(failure);
      });
      socket.on('close', () => {
        if (current())
          this.fail(new ClusterRequestError('DISCONNECTED', `connection to ${this.describe()} closed`));
      });
      // ApiVersions v0 works on every broker; it also proves the connection is up. Its deadline
      // (and the SASL exchange's) is the connection's: a broker that accepts and never answers
      // fails the connect within timeoutMs.
      this.send(ApiKey.ApiVersions, 0, defaultApiVersionsRequest(), deadline)
        .then(async (response) => {
          this.versions = new Map(
            response.apiKeys.map((k) => [k.apiKey, { min: k.minVersion, max: k.maxVersion }]),
          );
          if (this.sasl) await authenticate((k, v, b) => this.send(k, v, b, deadline), this.sasl);
        })
        .then(resolve, (err: unknown) => {
          const failure = ClusterRequestError.from(
            err,
            err instanceof SaslError ? 'AUTHENTICATION_FAILED' : 'DISCONNECTED',
          );
          if (current()) this.fail(failure);
          reject(failure);
        });
    });
    this.ready.catch(() => undefined);
    return this.ready;
  }

  /** Sends one request, connecting first if needed, all by `deadline` (a Date.now() value). */
  async request<K extends KnownApiKey>(
    apiKey: K,
    body: BodyFor<K>,
    atMost: number | undefined,
    deadline: number,
  ): Promise<{ version: number; body: ResponseBody<K> }> {
    await withDeadline(this.connect(), deadline, () => `connect to ${this.describe()}`);
    const version = this.versionFor(apiKey, atMost);
    return {
      version,
      body: await this.send(apiKey, version, typeof body === 'function' ? body(version) : body, deadline),
    };
  }

  private send<K extends KnownApiKey>(
    apiKey: K,
    apiVersion: number,
    body: RequestBody<K>,
    deadline: number,
  ): Promise<ResponseBody<K>> {
    // An API's codec loads on its first request (codec-registry.ts), the connection's own
    // ApiVersions and SASL exchange included.
    if (!apiCodecsLoaded([apiKey]))
      return loadApiCodecs([apiKey]).then(() => this.send(apiKey, apiVersion, body, deadline));
    const socket = this.socket;
    if (!socket || socket.destroyed)
      return Promise.reject(new ClusterRequestError('DISCONNECTED', `not connected to ${this.describe()}`));
    const correlationId = this.nextCorrelationId++ & 0x7fffffff;
    const waitMs = Math.max(0, deadline - Date.now());
    return new Promise<ResponseBody<K>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.inFlight.delete(correlationId);
        reject(
          new ClusterRequestError(
            'TIMEOUT',
            `${this.describe()} did not answer api ${apiKey} within ${this.timeoutMs} ms`,
          ),
        );
      }, waitMs);
      const answer = (frame: Buffer): void => {
        try {
          resolve(decodeResponseFrame(frame, apiKey, apiVersion).body);
        } catch (err) {
          reject(ClusterRequestError.from(err, 'BAD_RESPONSE'));
        }
      };
      this.inFlight.set(correlationId, { answer, reject, timer });
      let frame: Buffer;
      try {
        frame = encodeRequestFrame({ apiKey, apiVersion, correlationId, clientId: PROXY_CLIENT_ID }, body);
      } catch (err) {
        clearTimeout(timer);
        this.inFlight.delete(correlationId);
        reject(ClusterRequestError.from(err, 'BAD_REQUEST'));
        return;
      }
      socket.write(frame);
    });
  }

  private onResponse(frame: Buffer): void {
    let correlationId: number;
    try {
      correlationId = peekCorrelationId(frame);
    } catch (err) {
      this.fail(ClusterRequestError.from(err, 'BAD_RESPONSE'));
      return;
    }
    const pending = this.inFlight.get(correlationId);
    if (!pending) return; // timed out already
    this.inFlight.delete(correlationId);
    clearTimeout(pending.timer);
    pending.answer(frame);
  }

  private fail(err: ClusterRequestError): void {
    for (const p of this.inFlight.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.inFlight.clear();
    this.socket?.destroy();
    this.socket = null;
    this.ready = null;
  }

  close(): void {
    this.fail(new ClusterRequestError('CLOSED', 'client closed'));
  }

  private describe(): string {
    return `${this.target.host}:${this.target.port}`;
  }
}

/**
 * `promise`, or a TIMEOUT ClusterRequestError naming `what()` once `deadline` (a Date.now()
 * value) has passed. The promise's own later failure is dropped.
 */
export function withDeadline<T>(promise: Promise<T>, deadline: number, what: () => string): Promise<T> {
  const waitMs = deadline - Date.now();
  promise.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new ClusterRequestError('TIMEOUT', `${what()}: no answer within the request timeout`)),
      Math.max(0, waitMs),
    );
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
