/**
 * What the proxy core is given to run (KafkaProxy in server.ts): where it listens and relays, its
 * limits, TLS on either side, the extension, and how it learns the cluster's brokers.
 */
import type { HostPort } from './broker-map.js';
import type { ProxyExtension } from './extension.js';
import type { ProxyObserver } from './observer.js';
import type { UpstreamTls } from './upstream-socket.js';
import type { Logger } from '../common/log.js';

export interface ClientTls {
  key: Buffer;
  cert: Buffer;
  /** CA bundle for client certificates. */
  ca?: Buffer;
  requireClientCert: boolean;
}

export interface ProxyOptions {
  bootstrapServers: HostPort[];
  listen: HostPort;
  /** The host clients are told to use for every broker; default: the listen host, or this machine's name for a wildcard listen. */
  advertisedHost?: string;
  /** Explicit node id → proxy port mapping; other nodes get listen port + 1 + node id. */
  brokerPorts?: ReadonlyMap<number, number>;
  maxFrameSize?: number;
  maxInFlight?: number;
  /**
   * Relay plain TCP connections on the native path while they only pass frames on (native-relay.ts):
   * true (default) where the addon loads; false never.
   */
  nativeRelay?: boolean;
  /** Requests passed on unread in a row before a connection moves to the native path (default 16). */
  nativeRelayAfter?: number;
  /** Client connections at once (all listeners together); more are closed at accept. */
  maxConnections?: number;
  /**
   * A client connection with nothing in flight and no bytes either way for this long is closed,
   * and so is one whose client has read none of its answers for this long.
   */
  idleTimeoutMs?: number;
  /**
   * Memory for incomplete request frames, all client connections together (a broker's
   * queued.max.request.bytes); beyond it, connections sending large requests wait (RequestBufferPool).
   */
  maxBufferedRequestBytes?: number;
  /**
   * Memory for responses clients have not read, all client connections together; beyond it, a
   * connection holding any is not read until its client reads (response-backlog.ts).
   */
  maxBufferedResponseBytes?: number;
  clientTls?: ClientTls | null;
  /**
   * A client TLS handshake not finished this long after accept is closed, freeing its place under
   * maxConnections (default 10 s).
   */
  tlsHandshakeTimeoutMs?: number;
  brokerTls?: UpstreamTls | null;
  extension?: ProxyExtension | null;
  log?: Logger;
  /** How long shutdown waits for in-flight requests. */
  shutdownTimeoutMs?: number;
  /**
   * Deadline of the proxy's own requests, to the cluster and on clients' connections
   * (authorization probes), and of broker connects.
   */
  requestTimeoutMs?: number;
  observer?: ProxyObserver;
  /**
   * How the proxy learns the cluster's brokers itself (at start, and for a client that connects to
   * a broker port the proxy has not seen yet). The relay sends no request of its own for this: the
   * CLI passes its cluster client, which can authenticate; the test harness passes a Metadata
   * request through a cluster client of its own (test/harness/proxy.ts).
   */
  discoverBrokers: () => Promise<{ nodeId: number; address: HostPort }[]>;
  /**
   * A broker port that cannot be bound at start: 'exit' (default) makes start() reject with a
   * ListenError; 'unready' starts anyway. Either way an unbound port is listed by
   * `listenerProblems` (readiness) and binding it is retried every BIND_RETRY_MS.
   */
  bindFailure?: 'exit' | 'unready';
}
