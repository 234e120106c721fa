/**
 * What the core reports as it runs, for metrics. Called on the hot path (per frame and per
 * chunk): implementations must be cheap, e.g. cache their labelled counters.
 */
export type AnsweredBy = 'proxy' | 'broker';
export type ByteDirection = 'client_in' | 'client_out' | 'broker_in' | 'broker_out';
export type RejectCause = 'too_large' | 'malformed' | 'unsupported_version' | 'broker_protocol';

export interface ProxyObserver {
  /** A client connection was accepted / closed. */
  connectionOpened(nodeId: number | null): void;
  connectionClosed(nodeId: number | null): void;
  /** The broker connection of a client connection was opened (on its first need) / closed. */
  brokerConnectionOpened(nodeId: number | null): void;
  brokerConnectionClosed(nodeId: number | null): void;
  upstreamConnectFailed(nodeId: number | null): void;
  /** A response went to the client; `seconds` since its request arrived. */
  responded(apiKey: number, apiVersion: number, answeredBy: AnsweredBy, seconds: number): void;
  bytes(direction: ByteDirection, count: number): void;
  frameRejected(cause: RejectCause): void;
}

export const noopObserver: ProxyObserver = {
  connectionOpened() {},
  connectionClosed() {},
  brokerConnectionOpened() {},
  brokerConnectionClosed() {},
  upstreamConnectFailed() {},
  responded() {},
  bytes() {},
  frameRejected() {},
};
