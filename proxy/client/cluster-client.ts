/**
 * The proxy's own client of the cluster, for what the offset service must ask the brokers itself:
 * metadata (which topics exist), group coordinators, a group's state, offsets the broker still
 * holds (migration, transactional groups), log-end offsets (lag), and mirrored commits.
 *
 * One persistent connection per broker, requests pipelined with correlation ids, and API versions
 * negotiated once per connection (the highest both the broker and the codec know), so it works
 * against Kafka 3.x and 4.x alike. Everything has a deadline of `timeoutMs` (--request-timeout-ms):
 * a connection (TCP, ApiVersions and SASL together), one request (its connection, and for `'any'`
 * every broker it tries, included), and the composite work done for one client request
 * (`within`: finding the coordinator, asking it, asking again once it moved).
 */
import type net from 'node:net';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeResponseFrame, encodeRequestFrame, peekCorrelationId } from '../../protocol/frames.js';
import type { ApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { defaultFindCoordinatorRequest } from '../../protocol/messages/find-coordinator-request.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import type { FindCoordinatorResponse } from '../../protocol/messages/find-coordinator-response.js';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import type { BrokerMap, HostPort } from '../core/broker-map.js';
import type { Logger } from '../common/log.js';
import { silentLogger } from '../common/log.js';
import { authenticate } from './sasl-client.js';
import type { SaslCredentials } from './sasl-client.js';
import { ownMaxVersion } from './own-versions.js';
import { connectUpstream } from '../core/upstream-socket.js';
import { PROXY_CLIENT_ID, RELAY_DEFAULTS } from '../core/defaults.js';
import type { UpstreamTls } from '../core/upstream-socket.js';

export class ClusterRequestError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ClusterRequestError';
  }
}

interface InFlight {
  apiKey: number;
  apiVersion: number;
  resolve(body: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/** A request body, or a function building it for the negotiated version (fields differ by version). */
export type BodyFor = unknown | ((version: number) => unknown);

class BrokerChannel {
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
    const codec = getApiCodec(apiKey)?.validVersions;
    if (!broker || !codec) throw new ClusterRequestError(`the broker does not support api ${apiKey}`);
    const max = Math.min(
      broker.max,
      codec.max,
      ownMaxVersion(apiKey) ?? Number.MAX_SAFE_INTEGER,
      atMost ?? Number.MAX_SAFE_INTEGER,
    );
    if (max < Math.max(broker.min, codec.min))
      throw new ClusterRequestError(`no common version for api ${apiKey}`);
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
      const splitter = new FrameSplitter({ maxFrameSize: 256 * 1024 * 1024 });
      socket.setNoDelay(true);
      socket.on('data', (chunk: Buffer) => {
        if (!current()) return;
        let frames: Buffer[];
        try {
          frames = splitter.push(chunk);
        } catch (err) {
          this.fail(err as Error);
          return;
        }
        for (const frame of frames) this.onResponse(frame);
      });
      socket.on('error', (err) => {
        if (current()) this.fail(err);
        reject(err);
      });
      socket.on('close', () => {
        if (current()) this.fail(new ClusterRequestError(`connection to ${this.describe()} closed`));
      });
      // ApiVersions v0 works on every broker; it also proves the connection is up. Its deadline
      // (and the SASL exchange's) is the connection's: a broker that accepts and never answers
      // fails the connect within timeoutMs.
      this.send(ApiKey.ApiVersions, 0, {}, deadline)
        .then(async (body) => {
          const response = body as ApiVersionsResponse;
          this.versions = new Map(
            response.apiKeys.map((k) => [k.apiKey, { min: k.minVersion, max: k.maxVersion }]),
          );
          if (this.sasl) await authenticate((k, v, b) => this.send(k, v, b, deadline), this.sasl);
        })
        .then(resolve, (err: unknown) => {
          if (current()) this.fail(err as Error);
          reject(err as Error);
        });
    });
    this.ready.catch(() => undefined);
    return this.ready;
  }

  /** Sends one request, connecting first if needed, all by `deadline` (a Date.now() value). */
  async request(
    apiKey: number,
    body: BodyFor,
    atMost: number | undefined,
    deadline: number,
  ): Promise<{ version: number; body: unknown }> {
    await withDeadline(this.connect(), deadline, () => `connect to ${this.describe()}`);
    const version = this.versionFor(apiKey, atMost);
    return {
      version,
      body: await this.send(apiKey, version, typeof body === 'function' ? body(version) : body, deadline),
    };
  }

  private send(apiKey: number, apiVersion: number, body: unknown, deadline: number): Promise<unknown> {
    const socket = this.socket;
    if (!socket || socket.destroyed)
      return Promise.reject(new ClusterRequestError(`not connected to ${this.describe()}`));
    const correlationId = this.nextCorrelationId++ & 0x7fffffff;
    const waitMs = Math.max(0, deadline - Date.now());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.inFlight.delete(correlationId);
        reject(
          new ClusterRequestError(
            `${this.describe()} did not answer api ${apiKey} within ${this.timeoutMs} ms`,
          ),
        );
      }, waitMs);
      this.inFlight.set(correlationId, { apiKey, apiVersion, resolve, reject, timer });
      try {
        socket.write(
          encodeRequestFrame({ apiKey, apiVersion, correlationId, clientId: PROXY_CLIENT_ID }, body),
        );
      } catch (err) {
        clearTimeout(timer);
        this.inFlight.delete(correlationId);
        reject(err as Error);
      }
    });
  }

  private onResponse(frame: Buffer): void {
    let correlationId: number;
    try {
      correlationId = peekCorrelationId(frame);
    } catch (err) {
      this.fail(err as Error);
      return;
    }
    const pending = this.inFlight.get(correlationId);
    if (!pending) return; // timed out already
    this.inFlight.delete(correlationId);
    clearTimeout(pending.timer);
    try {
      pending.resolve(decodeResponseFrame(frame, pending.apiKey, pending.apiVersion).body);
    } catch (err) {
      pending.reject(err as Error);
    }
  }

  private fail(err: Error): void {
    for (const p of this.inFlight.values()) {
      clearTimeout(p.timer);
      p.reject(
        err instanceof ClusterRequestError ? err : new ClusterRequestError(err.message, { cause: err }),
      );
    }
    this.inFlight.clear();
    this.socket?.destroy();
    this.socket = null;
    this.ready = null;
  }

  close(): void {
    this.fail(new ClusterRequestError('client closed'));
  }

  private describe(): string {
    return `${this.target.host}:${this.target.port}`;
  }
}

export interface ClusterClientOptions {
  bootstrapServers: HostPort[];
  brokers: BrokerMap;
  tls?: UpstreamTls | null;
  timeoutMs?: number;
  log?: Logger;
  /** Credentials of the proxy's own principal, for clusters that require SASL. */
  sasl?: SaslCredentials | null;
}

export class ClusterClient {
  private readonly channels = new Map<string, BrokerChannel>();
  private readonly log: Logger;
  private bootstrapIndex = 0;

  constructor(private readonly opts: ClusterClientOptions) {
    this.log = opts.log ?? silentLogger;
  }

  private channel(target: HostPort): BrokerChannel {
    const key = `${target.host}:${target.port}`;
    let ch = this.channels.get(key);
    if (!ch) {
      ch = new BrokerChannel(target, this.opts.tls ?? null, this.timeoutMs, this.opts.sasl ?? null);
      this.channels.set(key, ch);
    }
    return ch;
  }

  /** The deadline of every request, connect and `within` (--request-timeout-ms). */
  get timeoutMs(): number {
    return this.opts.timeoutMs ?? RELAY_DEFAULTS.requestTimeoutMs;
  }

  /**
   * Runs work of several requests done for one client request (find the coordinator, ask it,
   * maybe again) and fails it with ClusterRequestError once `timeoutMs` has passed, so the client
   * gets its answer in time whatever the brokers do. Work that goes on after that ends by its own
   * requests' deadlines; its result is dropped.
   */
  within<T>(what: string, work: () => Promise<T>): Promise<T> {
    return withDeadline(work(), Date.now() + this.timeoutMs, () => what);
  }

  /** Sends to broker `nodeId`, or to any reachable broker. Resolves with the decoded body and the version used. */
  async request<T>(
    target: number | 'any',
    apiKey: number,
    body: BodyFor,
    atMostVersion?: number,
  ): Promise<{ version: number; body: T }> {
    const deadline = Date.now() + this.timeoutMs;
    if (target !== 'any') {
      const address = this.opts.brokers.upstreamOf(target);
      if (!address) throw new ClusterRequestError(`unknown broker ${target}`);
      const r = await this.channel(address).request(apiKey, body, atMostVersion, deadline);
      return { version: r.version, body: r.body as T };
    }
    const candidates = [
      ...this.opts.bootstrapServers,
      ...this.opts.brokers.nodeIds().map((n) => this.opts.brokers.upstreamOf(n)!),
    ];
    let lastError: unknown;
    // One deadline for all of them: a frozen broker must not cost a deadline per candidate.
    for (let i = 0; i < candidates.length && Date.now() < deadline; i++) {
      const address = candidates[this.bootstrapIndex++ % candidates.length]!;
      try {
        const r = await this.channel(address).request(apiKey, body, atMostVersion, deadline);
        return { version: r.version, body: r.body as T };
      } catch (err) {
        lastError = err;
        this.log.debug('cluster request failed', { host: address.host, port: address.port, error: err });
      }
    }
    throw lastError instanceof Error ? lastError : new ClusterRequestError('no broker reachable');
  }

  /**
   * The versions of `apiKey` broker `target` supports as it says in ApiVersions, whether the
   * proxy's codecs know them or not (what a broker's version tells about its behaviour).
   */
  async brokerRange(target: number, apiKey: number): Promise<{ min: number; max: number } | undefined> {
    const address = this.opts.brokers.upstreamOf(target);
    if (!address) throw new ClusterRequestError(`unknown broker ${target}`);
    const ch = this.channel(address);
    await ch.connect();
    return ch.brokerRange(apiKey);
  }

  /** The version `request` would use for `apiKey` on any broker (for building version-specific bodies). */
  async versionFor(target: number | 'any', apiKey: number, atMost?: number): Promise<number> {
    const address = target === 'any' ? this.opts.bootstrapServers[0]! : this.opts.brokers.upstreamOf(target);
    if (!address) throw new ClusterRequestError(`unknown broker ${target}`);
    const ch = this.channel(address);
    await ch.connect();
    return ch.versionFor(apiKey, atMost);
  }

  /** Topic metadata (all topics when `topics` is null). */
  async metadata(topics: string[] | null): Promise<MetadataResponse> {
    const { body } = await this.request<MetadataResponse>('any', ApiKey.Metadata, {
      ...defaultMetadataRequest(),
      topics: topics === null ? null : topics.map((name) => ({ name, topicId: ZERO_UUID })),
      allowAutoTopicCreation: false,
    });
    for (const b of body.brokers) this.opts.brokers.learn(b.nodeId, { host: b.host, port: b.port });
    return body;
  }

  /** The node id of the group coordinator of `group`. */
  async coordinatorOf(group: string): Promise<number> {
    const { version, body } = await this.request<FindCoordinatorResponse>(
      'any',
      ApiKey.FindCoordinator,
      (v: number) =>
        v >= 4
          ? { ...defaultFindCoordinatorRequest(), keyType: 0, coordinatorKeys: [group] }
          : { ...defaultFindCoordinatorRequest(), key: group, keyType: 0 },
    );
    if (version >= 4) {
      const c = body.coordinators[0];
      if (!c || c.errorCode !== 0)
        throw new ClusterRequestError(`no coordinator for group ${group} (error ${c?.errorCode})`);
      this.opts.brokers.learn(c.nodeId, { host: c.host, port: c.port });
      return c.nodeId;
    }
    if (body.errorCode !== 0)
      throw new ClusterRequestError(`no coordinator for group ${group} (error ${body.errorCode})`);
    this.opts.brokers.learn(body.nodeId, { host: body.host, port: body.port });
    return body.nodeId;
  }

  /**
   * The coordinators of many groups: one FindCoordinator naming them all where the broker batches
   * keys (v4+, Kafka 3.0+), one per group before. Groups without a coordinator (an error for that
   * key) are left out.
   */
  async coordinatorsOf(groups: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (groups.length === 0) return out;
    if ((await this.versionFor('any', ApiKey.FindCoordinator)) < 4) {
      for (const g of groups) {
        try {
          out.set(g, await this.coordinatorOf(g));
        } catch {
          // no coordinator for this one now
        }
      }
      return out;
    }
    const { body } = await this.request<FindCoordinatorResponse>('any', ApiKey.FindCoordinator, {
      ...defaultFindCoordinatorRequest(),
      keyType: 0,
      coordinatorKeys: [...groups],
    });
    for (const c of body.coordinators) {
      if (c.errorCode !== 0) continue;
      this.opts.brokers.learn(c.nodeId, { host: c.host, port: c.port });
      out.set(c.key, c.nodeId);
    }
    return out;
  }

  close(): void {
    for (const ch of this.channels.values()) ch.close();
    this.channels.clear();
  }
}

/**
 * `promise`, or a ClusterRequestError naming `what()` once `deadline` (a Date.now() value) has
 * passed. The promise's own later failure is dropped.
 */
function withDeadline<T>(promise: Promise<T>, deadline: number, what: () => string): Promise<T> {
  const waitMs = deadline - Date.now();
  promise.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new ClusterRequestError(`${what()}: no answer within the request timeout`)),
      Math.max(0, waitMs),
    );
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new ClusterRequestError(String(err)));
      },
    );
  });
}
