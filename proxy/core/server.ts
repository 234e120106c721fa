/**
 * The proxy: a bootstrap listener plus one listener per broker, each client connection paired
 * with its own upstream connection to the broker that listener fronts.
 */
import net from 'node:net';
import os from 'node:os';
import tls from 'node:tls';
import { loadApiCodecs } from '../../protocol/codec-registry.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { AnyResponse } from '../../protocol/messages/api-info.js';
import { rewriteBrokerAddresses } from './address-rewrite.js';
import { ApiPlans } from './api-plan.js';
import { ApiVersionsPolicy } from './api-versions.js';
import { BrokerMap } from './broker-map.js';
import type { HostPort } from './broker-map.js';
import { bindProblem, BrokerListeners, listen, ListenError } from './broker-listeners.js';
import { ProxyConnection } from './connection.js';
import { RequestBufferPool } from './request-pool.js';
import type { ConnectionPolicy } from './connection.js';
import { ResponseBufferPool } from './response-backlog.js';
import { RELAY_DEFAULTS } from './defaults.js';
import type { ExposedBroker } from './fetch-stream.js';
import type { Logger } from '../common/log.js';
import { silentLogger } from '../common/log.js';
import { noopObserver } from './observer.js';
import type { ProxyObserver } from './observer.js';
import { connectUpstream } from './upstream-socket.js';
import { reuseAcceptedReads } from './reused-reads.js';
import { loadNativeRelay, NativeRelay } from './native-relay.js';
import type { ClientTls, ProxyOptions } from './proxy-options.js';

export class KafkaProxy {
  readonly brokers: BrokerMap;
  private readonly log: Logger;
  private readonly servers = new Map<string, net.Server>();
  private readonly listeners: BrokerListeners;
  private readonly connections = new Set<ProxyConnection>();
  /**
   * TLS connections accepted and not closed, their handshake ended or not: each holds a descriptor
   * from accept on, and one stopped mid-handshake holds it until the handshake timeout (120 s), so
   * --max-connections counts them from accept (500 half-open handshakes held 1,527 descriptors
   * before).
   */
  private tlsAccepted = 0;
  private readonly versions: ApiVersionsPolicy;
  /** The APIs whose frames the core or the extension decodes: their codecs load at start. */
  private readonly decodedApis: ReadonlySet<number>;
  private readonly observer: ProxyObserver;
  private readonly policy: ConnectionPolicy;
  private readonly requestBuffers: RequestBufferPool;
  private readonly responseBuffers: ResponseBufferPool;
  /** The native path, when the addon loaded and the connections are plain TCP both ways. */
  private readonly nativeRelay: NativeRelay | null;
  private bootstrapIndex = 0;
  private refused = 0;
  private acceptErrors = 0;
  private stopping = false;
  private listenPort: number;
  private advertisedHost: string;
  /** Client TLS of new listeners; replaceClientTls swaps it (certificate rotation). */
  private clientTls: ClientTls | null;

  constructor(private readonly opts: ProxyOptions) {
    this.log = opts.log ?? silentLogger;
    this.clientTls = opts.clientTls ?? null;
    this.observer = opts.observer ?? noopObserver;
    this.listenPort = opts.listen.port;
    this.advertisedHost = opts.advertisedHost ?? defaultAdvertisedHost(opts.listen.host);
    this.brokers = new BrokerMap(opts.listen.port, opts.brokerPorts);
    this.listeners = new BrokerListeners({
      host: opts.listen.host,
      localPort: (nodeId) => this.brokers.localPort(nodeId),
      option: (nodeId) => (opts.brokerPorts?.has(nodeId) ? 'broker-port' : 'listen'),
      create: (nodeId) => this.createServer(nodeId),
      bound: (nodeId, server) => {
        server.on('error', (err) => this.onServerError(err, nodeId));
        this.servers.set(`node-${nodeId}`, server);
      },
      log: this.log,
    });
    // Fetch answers are streamed: exposeBroker below learns a broker synchronously.
    const plans = new ApiPlans({ extension: opts.extension ?? null, streamFetch: true });
    this.versions = new ApiVersionsPolicy(opts.extension ?? null, plans.decoded);
    this.decodedApis = plans.decoded;
    this.requestBuffers = new RequestBufferPool(
      opts.maxBufferedRequestBytes ?? RELAY_DEFAULTS.maxBufferedRequestBytes,
    );
    this.responseBuffers = new ResponseBufferPool(
      opts.maxBufferedResponseBytes ?? RELAY_DEFAULTS.maxBufferedResponseBytes,
    );
    const maxFrameSize = opts.maxFrameSize ?? RELAY_DEFAULTS.maxFrameSize;
    const maxInFlight = opts.maxInFlight ?? RELAY_DEFAULTS.maxInFlight;
    // TLS on either side puts a layer between the bytes and the descriptors: JavaScript relays.
    const binding =
      opts.nativeRelay === false || opts.clientTls || opts.brokerTls ? null : loadNativeRelay().binding;
    this.nativeRelay =
      binding === null
        ? null
        : new NativeRelay(binding, {
            plans,
            maxFrameSize,
            maxInFlight,
            observer: this.observer,
            requestPool: this.requestBuffers,
            exposeBroker: (nodeId, upstream) => this.exposeBroker(nodeId, upstream),
          });
    this.policy = {
      log: this.log,
      maxFrameSize,
      maxInFlight,
      nativeRelay: this.nativeRelay,
      nativeAfterRequests: opts.nativeRelayAfter ?? RELAY_DEFAULTS.nativeRelayAfter,
      idleTimeoutMs: opts.idleTimeoutMs ?? RELAY_DEFAULTS.idleTimeoutMs,
      extension: opts.extension ?? null,
      plans,
      rewriteResponse: (response) => this.rewriteResponse(response),
      exposeBroker: (nodeId, upstream) => this.exposeBroker(nodeId, upstream),
      onClose: (conn) => {
        this.connections.delete(conn);
        this.observer.connectionClosed(conn.nodeId);
        opts.extension?.connectionClosed?.(conn.id);
      },
      observer: this.observer,
      requestBuffers: this.requestBuffers,
      responseBuffers: this.responseBuffers,
      requestTimeoutMs: opts.requestTimeoutMs ?? RELAY_DEFAULTS.requestTimeoutMs,
    };
  }

  /** The bootstrap address actually bound (the port is resolved when 0 was asked for). */
  get address(): HostPort {
    return { host: this.opts.listen.host, port: this.listenPort };
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  /** Memory held in incomplete request frames now, all client connections together. */
  get bufferedRequestBytes(): number {
    return this.requestBuffers.held;
  }

  /** Client connections not read now because the request buffer pool is exhausted. */
  get mutedConnections(): number {
    return this.requestBuffers.mutedCount;
  }

  /** Memory held in responses clients have not read yet, all client connections together. */
  get bufferedResponseBytes(): number {
    return this.responseBuffers.held;
  }

  /** Client connections relayed on the native path now. */
  get nativeConnections(): number {
    return this.nativeRelay?.pairs ?? 0;
  }

  /** Moves of client connections to the native path, and back to JavaScript, since the start. */
  get nativeHandovers(): { toNative: number; toJavaScript: number } {
    return {
      toNative: this.nativeRelay?.attached ?? 0,
      toJavaScript: this.nativeRelay?.handedBackTotal ?? 0,
    };
  }

  /** Whether connections can move to the native path (the addon loaded, no TLS). */
  get nativeRelayEnabled(): boolean {
    return this.nativeRelay !== null;
  }

  /**
   * Hands what the native path counted (bytes, answered requests) to the observer now; it does so
   * by itself at least once a second. Metrics call it before they are read.
   */
  flushNativeFigures(): void {
    this.nativeRelay?.flushStats();
  }

  /** Client connections closed at accept because of --max-connections, since the start. */
  get refusedConnections(): number {
    return this.refused;
  }

  async start(): Promise<void> {
    await loadApiCodecs(this.decodedApis);
    const server = this.createServer(null);
    try {
      await listen(server, this.opts.listen.host, this.opts.listen.port);
    } catch (err) {
      throw new ListenError('listen', this.opts.listen, null, bindProblem(err), { cause: err });
    }
    server.on('error', (err) => this.onServerError(err, null));
    this.listenPort = (server.address() as net.AddressInfo).port;
    // With port 0 the OS picked the bootstrap port; broker ports follow the one actually bound.
    this.brokers.setBasePort(this.listenPort);
    this.servers.set('bootstrap', server);
    this.log.info('listening', { role: 'bootstrap', host: this.opts.listen.host, port: this.listenPort });
    let found: { nodeId: number }[] = [];
    try {
      found = await this.discover();
    } catch (err) {
      // The cluster may come up after the proxy; brokers are learned from the first Metadata then.
      this.log.warn('cluster not reachable at start', { error: err });
    }
    const bound = await Promise.allSettled(found.map(({ nodeId }) => this.listeners.ensure(nodeId)));
    const failed = bound.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined && (this.opts.bindFailure ?? RELAY_DEFAULTS.bindFailure) === 'exit') {
      await this.stop();
      throw failed.reason;
    }
  }

  /**
   * Listeners that should be open and are not, one line each (empty when all are bound): what
   * readiness reports.
   */
  listenerProblems(): string[] {
    return this.listeners.problems();
  }

  /** Asks the cluster which brokers it has (and learns their addresses), opening no listener. */
  private async discover(): Promise<{ nodeId: number; address: HostPort }[]> {
    const found = await this.opts.discoverBrokers();
    for (const { nodeId, address } of found) this.brokers.learn(nodeId, address);
    return found;
  }

  /** Asks the cluster which brokers it has and opens a listener for each. */
  async refreshBrokers(): Promise<void> {
    const found = await this.discover();
    await Promise.all(found.map(({ nodeId }) => this.listeners.ensure(nodeId)));
  }

  /** Stops accepting, lets in-flight requests finish, then closes every connection. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.listeners.stop();
    const closing = [...this.servers.values()].map(
      (s) => new Promise<void>((resolve) => s.close(() => resolve())),
    );
    const timeout = this.opts.shutdownTimeoutMs ?? RELAY_DEFAULTS.shutdownTimeoutMs;
    await Promise.all([...this.connections].map((c) => c.drain(timeout)));
    this.nativeRelay?.stop();
    await Promise.all(closing);
    this.log.info('stopped');
  }

  /** Resolves true when the body was changed (so it must be re-encoded). */
  private async rewriteResponse(response: AnyResponse): Promise<boolean> {
    if (response.apiKey === ApiKey.ApiVersions) {
      this.versions.apply(response.body);
      return true;
    }
    const nodes: number[] = [];
    rewriteBrokerAddresses(response, (nodeId, upstream) => {
      this.brokers.learn(nodeId, upstream);
      nodes.push(nodeId);
      return { host: this.advertisedHost, port: this.brokers.localPort(nodeId) };
    });
    // The client may connect as soon as it reads the response: the listener must exist first. A
    // port that cannot be bound does not fail the response (the client can still use the other
    // brokers): it is logged, listed by readiness and retried.
    if (nodes.length === 0) return false;
    await Promise.all(nodes.map((n) => this.listeners.ensure(n).catch(() => undefined)));
    return true;
  }

  /**
   * The synchronous form of the rewriting above, for streamed Fetch responses: learns the broker
   * and tells its proxy address; `ready` is set while its listener is not open yet.
   */
  private exposeBroker(nodeId: number, upstream: HostPort): ExposedBroker {
    this.brokers.learn(nodeId, upstream);
    const exposed: ExposedBroker = { host: this.advertisedHost, port: this.brokers.localPort(nodeId) };
    if (!this.listeners.isListening(nodeId))
      exposed.ready = this.listeners.ensure(nodeId).catch(() => undefined);
    return exposed;
  }

  /**
   * New certificate, key and CA for client TLS (a rotated certificate): connections accepted from
   * now on, on every listener and on those opened later, use them; established ones keep theirs.
   * Whether client certificates are required is fixed by the listener: it needs a restart.
   */
  replaceClientTls(next: ClientTls): void {
    if (this.clientTls === null) throw new Error('the listeners serve plaintext: client TLS needs a restart');
    this.clientTls = { ...next, requireClientCert: this.clientTls.requireClientCert };
    const context = { key: next.key, cert: next.cert, ...(next.ca ? { ca: next.ca } : {}) };
    for (const server of this.servers.values()) (server as tls.Server).setSecureContext(context);
  }

  private createServer(nodeId: number | null): net.Server {
    const onSocket = (socket: net.Socket): void => this.accept(socket, nodeId);
    const clientTls = this.clientTls;
    if (clientTls) {
      const server = tls.createServer(
        {
          key: clientTls.key,
          cert: clientTls.cert,
          ca: clientTls.ca,
          requestCert: clientTls.requireClientCert,
          rejectUnauthorized: clientTls.requireClientCert,
          handshakeTimeout: this.opts.tlsHandshakeTimeoutMs ?? RELAY_DEFAULTS.tlsHandshakeTimeoutMs,
        },
        onSocket,
      );
      server.on('connection', (raw: net.Socket) => this.admitTls(raw));
      // Node only reports a handshake that timed out or failed (here): without this the socket
      // stays open, holding its place under maxConnections for as long as the client keeps it (a
      // ClientHello's first bytes and then nothing were still open after 10 minutes).
      server.on('tlsClientError', (_err: Error, socket: tls.TLSSocket) => socket.destroy());
      return server;
    }
    // Paused at accept, so that a plain TCP connection reads into a reused buffer from its first
    // byte (reused-reads.ts); the connection resumes it.
    return net.createServer({ pauseOnConnect: true }, onSocket);
  }

  /**
   * Errors of a listening socket after it is bound: failed accepts. When descriptors run out
   * (EMFILE, ENFILE) libuv already accepts and closes the connections it cannot keep, so clients
   * see them closed, and accepting resumes once descriptors are free; an error that surfaces anyway
   * must not reach the process as an unhandled 'error' event. The listener stays open.
   */
  private onServerError(err: NodeJS.ErrnoException, nodeId: number | null): void {
    this.acceptErrors++;
    if (this.acceptErrors === 1 || this.acceptErrors % 1000 === 0) {
      this.log.warn('accept failed', { node: nodeId, code: err.code, errors: this.acceptErrors, error: err });
    }
  }

  /** A TLS connection at accept, before its handshake: counted against the limit from now on. */
  private admitTls(raw: net.Socket): void {
    if (this.tlsAccepted >= this.maxConnections) {
      this.refuse(raw);
      return;
    }
    this.tlsAccepted++;
    raw.once('close', () => this.tlsAccepted--);
  }

  private get maxConnections(): number {
    return this.opts.maxConnections ?? RELAY_DEFAULTS.maxConnections;
  }

  private refuse(client: net.Socket): void {
    this.refused++;
    if (this.refused === 1 || this.refused % 1000 === 0) {
      this.log.warn('connection limit reached: refusing', {
        limit: this.maxConnections,
        refused: this.refused,
      });
    }
    client.destroy();
  }

  private accept(client: net.Socket, nodeId: number | null): void {
    if (this.stopping) {
      client.destroy();
      return;
    }
    // A connection storm must not exhaust memory or file descriptors: refuse beyond the limit
    // (clients retry with backoff, as against a broker).
    if (this.connections.size >= this.maxConnections) {
      this.refuse(client);
      return;
    }
    if (!this.opts.clientTls) reuseAcceptedReads(client);
    // The broker connection is opened by the connection itself when the client first needs it.
    const conn = new ProxyConnection(client, () => this.openUpstream(nodeId), nodeId, this.policy);
    this.connections.add(conn);
    this.observer.connectionOpened(nodeId);
    client.resume();
  }

  private async openUpstream(nodeId: number | null): Promise<net.Socket> {
    if (nodeId === null) {
      const targets = this.opts.bootstrapServers;
      let lastError: unknown;
      for (let i = 0; i < targets.length; i++) {
        const target = targets[this.bootstrapIndex++ % targets.length]!;
        try {
          return await this.connect(target);
        } catch (err) {
          lastError = err;
        }
      }
      throw lastError;
    }
    let target = this.brokers.upstreamOf(nodeId);
    if (!target) {
      // A client that remembers a broker port from before a proxy restart.
      await this.refreshBrokers();
      target = this.brokers.upstreamOf(nodeId);
      if (!target) throw new Error(`the cluster has no broker ${nodeId}`);
    }
    return this.connect(target);
  }

  private connect(target: HostPort): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const socket = connectUpstream(target, this.opts.brokerTls ?? null, { reuseReadBuffer: true });
      const event = this.opts.brokerTls ? 'secureConnect' : 'connect';
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`connect to ${target.host}:${target.port} timed out`));
      }, this.opts.requestTimeoutMs ?? RELAY_DEFAULTS.requestTimeoutMs);
      const connected = failOnErrorUntilConnected(socket, (err) => {
        clearTimeout(timer);
        socket.destroy();
        reject(err);
      });
      socket.once(event, () => {
        connected();
        clearTimeout(timer);
        resolve(socket);
      });
    });
  }
}

/**
 * Calls `fail` on an error of `socket` until the returned function is called. The listener stays
 * on the socket after that, doing nothing, holding neither `fail` nor what it holds (the connection's
 * own listener reports later errors): taking it off would delete a key of the socket's listener
 * table, which turns that object into a hash table, about 450 bytes for every broker connection
 * (bench/memory-probe.ts).
 */
function failOnErrorUntilConnected(socket: net.Socket, fail: (err: Error) => void): () => void {
  let onError: ((err: Error) => void) | null = fail;
  socket.on('error', (err) => onError?.(err));
  return () => {
    onError = null;
  };
}

function defaultAdvertisedHost(listenHost: string): string {
  if (listenHost === '0.0.0.0' || listenHost === '::' || listenHost === '') return os.hostname();
  return listenHost;
}
