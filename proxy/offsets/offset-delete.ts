/**
 * OffsetDelete answered from the store. The broker refuses deleting offsets of topics a live
 * group is subscribed to; the proxy does not track subscriptions, so it refuses deletion for any
 * group with live members (GROUP_SUBSCRIBED_TO_TOPIC), which is the conservative side of the
 * same rule. A top-level error leaves an empty topic list. A group that commits transactionally
 * has its offsets at the broker: the broker deletes them (and decides, subscriptions included),
 * and the store's older ones go too where the broker deleted.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetDeleteRequest } from '../../protocol/messages/offset-delete-request.js';
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import { storeFailureCode } from './kafka-errors.js';
import { emptyAtBroker } from './offset-commit.js';
import type { HandlerDeps, OffsetHandler } from './offset-handler.js';

export interface DeleteDeps extends HandlerDeps {
  /**
   * The request sent to the broker as the client sent it, on its connection, and the broker's
   * answer (for transactional groups). Absent (unit tests): COORDINATOR_NOT_AVAILABLE for them.
   */
  deleteAtBroker?: () => Promise<OffsetDeleteResponse>;
  /**
   * Whether the broker says the group has no members (BrokerLookups.groupIsEmpty): asked before a
   * refusal for live members stands, since the members the store knows may have expired at the
   * broker without a response the proxy saw. Absent: the store's record decides.
   */
  groupIsEmptyAtBroker?: (group: string) => Promise<boolean>;
}

/** Every version answers alike (v0 is the only one). */
export const handleOffsetDelete: OffsetHandler<
  OffsetDeleteRequest,
  OffsetDeleteResponse,
  DeleteDeps
> = async (req, _version, { store, authorize, deleteAtBroker, groupIsEmptyAtBroker }) => {
  const fail = (errorCode: number): OffsetDeleteResponse => ({ errorCode, throttleTimeMs: 0, topics: [] });
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
    const [state, offsets] = await Promise.all([store.getGroup(req.groupId), store.fetch(req.groupId, null)]);
    if (state === null && offsets.length === 0) return fail(ErrorCode.GROUP_ID_NOT_FOUND);
    if (state?.transactional) {
      const res = deleteAtBroker ? await deleteAtBroker().catch(() => null) : null;
      if (res === null) return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE);
      const deleted = res.topics.flatMap((t) =>
        t.partitions.flatMap((p) =>
          res.errorCode === ErrorCode.NONE && p.errorCode === ErrorCode.NONE
            ? [{ topic: t.name, partition: p.partitionIndex }]
            : [],
        ),
      );
      if (deleted.length > 0) await store.deleteOffsets(req.groupId, deleted);
      return res;
    }
    const live =
      (state?.members.length ?? 0) > 0 && !(await emptyAtBroker(store, req.groupId, groupIsEmptyAtBroker));
    if (!live) {
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
          errorCode: denied.has(t.name)
            ? ErrorCode.TOPIC_AUTHORIZATION_FAILED
            : live
              ? ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
              : ErrorCode.NONE,
        })),
      })),
    };
  } catch (err) {
    return fail(storeFailureCode(err));
  }
};
