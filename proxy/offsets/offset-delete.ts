/**
 * OffsetDelete. The broker decides: whether the group exists, whether it is a non-empty group of
 * another protocol type (NON_EMPTY_GROUP), and which topics a live group is subscribed to
 * (GROUP_SUBSCRIBED_TO_TOPIC, by its members' subscriptions, which only the broker knows for
 * certain: a member's join or heartbeat may have been missed by the store). So the request is
 * sent to the broker as the client sent it, on its connection, and the store follows the answer:
 * the partitions the broker deleted (or had nothing for) are deleted from the store too. A group
 * the broker does not have has no members there, so it is an empty group for the proxy when the
 * store holds it: its offsets are deleted (a transactional group's, whose offsets are the
 * broker's, keep the broker's answer). Without a broker to ask (unit tests) the store's record
 * decides: a group with live members is refused for every topic, the conservative side of the
 * broker's rule. A top-level error leaves an empty topic list.
 */
import type { OffsetStore } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetDeleteRequest } from '../../protocol/messages/offset-delete-request.js';
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import { storeFailureCode } from './kafka-errors.js';
import { emptyAtBroker } from './empty-at-broker.js';
import type { HandlerDeps, OffsetHandler } from './offset-handler.js';

const fail = (errorCode: number): OffsetDeleteResponse => ({ errorCode, throttleTimeMs: 0, topics: [] });

export interface DeleteDeps extends HandlerDeps {
  /**
   * The request sent to the broker as the client sent it, on its connection, and the broker's
   * answer. Absent (unit tests): the store's record decides, and a transactional group's delete is
   * COORDINATOR_NOT_AVAILABLE.
   */
  deleteAtBroker?: () => Promise<OffsetDeleteResponse>;
  /**
   * Whether the broker says the group has no members (BrokerLookups.groupIsEmpty), for when the
   * broker cannot be sent the request (`deleteAtBroker` absent): asked before a refusal for live
   * members stands. Absent: the store's record decides.
   */
  groupIsEmptyAtBroker?: (group: string) => Promise<boolean>;
}

/** Every version answers alike (v0 is the only one). */
export const handleOffsetDelete: OffsetHandler<
  OffsetDeleteRequest,
  OffsetDeleteResponse,
  DeleteDeps
> = async (req, _version, { store, authorize, deleteAtBroker, groupIsEmptyAtBroker }) => {
  // DELETE on the group, READ on the topics: asked first, as the broker does.
  const auth = authorize
    ? await authorize(
        req.groupId,
        req.topics.map((t) => t.name),
      )
    : null;
  if (auth && auth.groupError !== ErrorCode.NONE) return fail(auth.groupError);
  const denied = auth?.deniedTopics ?? new Set<string>();
  if (req.groupId === '') return fail(ErrorCode.INVALID_GROUP_ID);
  try {
    if (deleteAtBroker) return await decidedByBroker(req, store, deleteAtBroker, denied);
    const [state, offsets] = await Promise.all([store.getGroup(req.groupId), store.fetch(req.groupId, null)]);
    if (state === null && offsets.length === 0) return fail(ErrorCode.GROUP_ID_NOT_FOUND);
    if (state?.transactional) return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE);
    const live =
      (state?.members.length ?? 0) > 0 && !(await emptyAtBroker(store, req.groupId, groupIsEmptyAtBroker));
    return await deleteFromStore(req, store, denied, live ? ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC : null);
  } catch (err) {
    return fail(storeFailureCode(err));
  }
};

/**
 * The broker's answer, which the store follows. Unanswered: COORDINATOR_NOT_AVAILABLE, which
 * admin clients retry (a refusal or a deletion the broker did not make is never answered).
 */
async function decidedByBroker(
  req: OffsetDeleteRequest,
  store: OffsetStore,
  deleteAtBroker: () => Promise<OffsetDeleteResponse>,
  denied: ReadonlySet<string>,
): Promise<OffsetDeleteResponse> {
  const res = await deleteAtBroker().catch(() => null);
  if (res === null) return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE);
  if (res.errorCode === ErrorCode.GROUP_ID_NOT_FOUND) {
    // No members at the broker, and no offsets there: the broker would have kept the group for
    // offsets, which the proxy holds. Empty, then, if the store has it.
    const [state, offsets] = await Promise.all([store.getGroup(req.groupId), store.fetch(req.groupId, null)]);
    if ((state === null && offsets.length === 0) || state?.transactional) return res;
    return deleteFromStore(req, store, denied, null);
  }
  if (res.errorCode !== ErrorCode.NONE) return res;
  const deleted = res.topics.flatMap((t) =>
    t.partitions.flatMap((p) =>
      p.errorCode === ErrorCode.NONE ? [{ topic: t.name, partition: p.partitionIndex }] : [],
    ),
  );
  if (deleted.length > 0) await store.deleteOffsets(req.groupId, deleted);
  return res;
}

/**
 * Deletes the requested partitions the client may read from the store, or (`refusal`) none, every
 * partition answered with it.
 */
async function deleteFromStore(
  req: OffsetDeleteRequest,
  store: OffsetStore,
  denied: ReadonlySet<string>,
  refusal: number | null,
): Promise<OffsetDeleteResponse> {
  if (refusal === null) {
    await store.deleteOffsets(
      req.groupId,
      req.topics
        .filter((t) => !denied.has(t.name))
        .flatMap((t) => t.partitions.map((p) => ({ topic: t.name, partition: p.partitionIndex }))),
    );
  }
  return {
    errorCode: ErrorCode.NONE,
    throttleTimeMs: 0,
    topics: req.topics.map((t) => ({
      name: t.name,
      partitions: t.partitions.map((p) => ({
        partitionIndex: p.partitionIndex,
        errorCode: denied.has(t.name) ? ErrorCode.TOPIC_AUTHORIZATION_FAILED : (refusal ?? ErrorCode.NONE),
      })),
    })),
  };
}
