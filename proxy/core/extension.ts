/**
 * The one extension point of the proxy core. Features that answer a request themselves (the
 * offset APIs) or watch responses (group membership) plug in here; the core knows nothing about
 * offsets.
 */
import type {
  AnyRequest,
  KnownApiKey,
  RequestBody,
  ResponseBody,
  ResponseBodyByApiKey,
} from '../../protocol/messages/api-info.js';
import type { AnyExchange } from '../../protocol/tagged-frames.js';

export interface VersionRange {
  min: number;
  max: number;
}

/** What the core tells an extension about one request. */
export interface RequestInfo {
  connectionId: string;
  apiKey: number;
  apiVersion: number;
  correlationId: number;
  /** The broker this connection is pinned to, or null on the bootstrap listener. */
  nodeId: number | null;
  /**
   * When the request was read from the client's socket, in this process's read order
   * (read-order.ts): a request with a lower number was read before. Absent in tests that build
   * RequestInfo by hand.
   */
  readSeq?: number;
  /**
   * Sends a request of the proxy's own to the broker on this client's connection, so the broker
   * answers it as it would answer the client (same principal, same ACLs). Resolves with the
   * decoded response body.
   */
  askBroker?: AskBroker;
}

/** With an API key literal (`ApiKey.DescribeGroups`) the request and the answer are typed. */
export type AskBroker = <K extends number>(
  apiKey: K,
  apiVersion: number,
  body: RequestBody<K>,
) => Promise<ResponseBody<K>>;

/** Any response body the codec knows. */
export type AnyResponseBody = ResponseBodyByApiKey[KnownApiKey];

/** A request and its broker's response, tagged with their API key (protocol/tagged-frames.ts). */
export type { AnyExchange };

export type RequestDecision =
  /** Send the request to the broker unchanged. */
  | { action: 'forward' }
  /** Answer it here with this response body (of the request's api), encoded at the request's version. */
  | { action: 'respond'; body: AnyResponseBody };

export interface ProxyExtension {
  readonly name: string;
  /** Every API key whose requests or responses this extension decodes (their versions get capped to the codec's). */
  readonly apiKeys: ReadonlySet<number>;
  /**
   * Asked once per (api key, version) when the proxy starts (api-plan.ts), not per request: the
   * answer may not change afterwards.
   */
  interceptsRequest?(apiKey: number, apiVersion: number): boolean;
  /**
   * The decoded body of an intercepted request, tagged with its API key. The core hands a connection's requests
   * over one at a time, the next once this one's decision has resolved (as a broker handles one
   * request of a connection at a time), and none while that connection's client has not read
   * what it was sent (response-backlog.ts).
   */
  handleRequest?(info: RequestInfo, request: AnyRequest): Promise<RequestDecision>;
  /**
   * A request handleRequest will answer, told as it is read (before it waits its turn behind the
   * connection's earlier requests). Each is then either handed to handleRequest or, when its
   * connection closes first, to requestDropped: an extension can tell which requests it read are
   * not answered yet, including those it has not been handed.
   */
  requestRead?(info: RequestInfo, request: AnyRequest): void;
  /** A request told to requestRead that will never be handed to handleRequest. */
  requestDropped?(info: RequestInfo, request: AnyRequest): void;
  /** Asked once per (api key, version) when the proxy starts, like interceptsRequest. */
  observesResponse?(apiKey: number, apiVersion: number): boolean;
  /**
   * Sees the decoded request and response (one exchange, tagged with its API key) before the
   * response goes to the client, and may
   * return a replacement response body. The client gets nothing until this resolves, so an
   * extension can record state (a group generation) before the client can act on it.
   */
  onResponse?(info: RequestInfo, exchange: AnyExchange): Promise<AnyResponseBody | undefined>;
  /**
   * The range this extension serves for `apiKey` whatever the broker supports (the proxy answers
   * those requests itself), or undefined to leave the broker's range as it is.
   */
  advertisedVersions?(apiKey: number, broker: VersionRange | undefined): VersionRange | undefined;
  /** A client connection closed (its `RequestInfo.connectionId`): per-connection state can go. */
  connectionClosed?(connectionId: string): void;
}
