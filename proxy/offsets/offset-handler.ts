/**
 * The one shape of the offset APIs the proxy answers itself (OffsetCommit, OffsetFetch,
 * OffsetDelete): a handler takes the decoded request, its version and what it may use, and
 * resolves with the whole response; it never throws (a store failure is a Kafka error code in
 * the response). Each handler asks `authorize` first, as the broker checks ACLs before anything
 * else, so the service only wires a handler to its API.
 */
import type { OffsetStore } from '../../backends/store.js';
import type { RequestInfo } from '../core/extension.js';
import type { BrokerAuthorizer, Decision, Operation } from './authorizer.js';

/** Whether the client's principal may do this API's operation on the group and the topics. */
export type Authorize = (group: string, topics: string[]) => Promise<Decision>;

export interface HandlerDeps {
  store: OffsetStore;
  /** Absent with `--authorize off` (and in unit tests): everything is allowed. */
  authorize?: Authorize;
}

export type OffsetHandler<Req, Res, Deps extends Pick<HandlerDeps, 'authorize'>> = (
  req: Req,
  version: number,
  deps: Deps,
) => Promise<Res>;

/** A handler's `authorize` for this request's connection and operation (none with `--authorize off`). */
export function authorizeFor(
  authorizer: BrokerAuthorizer | null,
  info: RequestInfo,
  op: Operation,
): { authorize?: Authorize } {
  return authorizer ? { authorize: (g, topics) => authorizer.authorize(info, op, g, topics) } : {};
}
