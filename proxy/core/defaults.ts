/**
 * The relay's defaults, written once. The server and its connections fall back to them when an
 * option is left out (tests, embedders); config.ts gives them as the defaults of its options, so
 * what --help and docs/configuration.md show is what runs.
 */
export const RELAY_DEFAULTS = {
  maxFrameSize: 100 * 1024 * 1024,
  maxInFlight: 1000,
  /** Requests passed on unread in a row before a connection moves to the native relay. */
  nativeRelayAfter: 16,
  maxConnections: 10_000,
  maxBufferedRequestBytes: 256 * 1024 * 1024,
  maxBufferedResponseBytes: 256 * 1024 * 1024,
  idleTimeoutMs: 600_000,
  requestTimeoutMs: 10_000,
  /** A client TLS handshake not finished this long after accept is closed (Node's own: 120 s). */
  tlsHandshakeTimeoutMs: 10_000,
  shutdownTimeoutMs: 10_000,
  bindFailure: 'exit',
} as const;

/** The client id of every request the proxy sends on its own behalf (broker logs and quotas see it). */
export const PROXY_CLIENT_ID = 'kafka-offset-proxy';
