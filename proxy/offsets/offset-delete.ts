/**
 * OffsetDelete answered from the store. The broker refuses deleting offsets of topics a live
 * group is subscribed to; the proxy does not track subscriptions, so it refuses deletion for any
 * group with live members (GROUP_SUBSCRIBED_TO_TOPIC), which is the conservative side of the
 * same rule. A top-level error leaves an empty topic list.
 */
import type { OffsetStore } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetDeleteRequest } from '../../protocol/messages/offset-delete-request.js';
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import type { Decision } from './authorizer.js';
import { storeFailureCode } from './kafka-errors.js';

export async function handleOffsetDelete(
  req: OffsetDeleteRequest,
  store: OffsetStore,
  auth?: Decision,
): Promise<OffsetDeleteResponse> {
  const fail = (errorCode: number): OffsetDeleteResponse => ({ errorCode, throttleTimeMs: 0, topics: [] });
  if (auth && auth.groupError !== ErrorCode.NONE) return fail(auth.groupError);
  const denied = auth?.deniedTopics ?? new Set<string>();
  if (req.groupId === '') return fail(ErrorCode.INVALID_GROUP_ID);
  try {
    const [state, offsets] = await Promise.all([store.getGroup(req.groupId), store.fetch(req.groupId, null)]);
    if (state === null && offsets.length === 0) return fail(ErrorCode.GROUP_ID_NOT_FOUND);
    const live = (state?.members.length ?? 0) > 0;
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
}
