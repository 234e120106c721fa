/**
 * The one shape of the offset APIs the proxy answers itself (OffsetCommit, OffsetFetch,
 * OffsetDelete): a handler takes the decoded request, its version and what it may use, and
 * resolves with the whole response; it never throws (a store failure is a Kafka error code in
 * the response). Each handler asks `authorize` first, as the broker checks ACLs before anything
 * else, so the service only wires a handler to its API.
 */
import type { OffsetStore } from '../../backends/store.js';
import type { Decision } from './authorizer.js';

/** Whether the client's principal may do this API's operation on the group and the topics. */
export type Authorize = (group: string, topics: string[]) => Promise<Decision>;

export interface HandlerDeps {
  store: OffsetStore;
  /** Absent with `--authorize off` (and in unit tests): everything is allowed. */
  authorize?: Authorize;
}

export type OffsetHandler<Req, Res, Deps extends HandlerDeps> = (
  req: Req,
  version: number,
  deps: Deps,
) => Promise<Res>;
