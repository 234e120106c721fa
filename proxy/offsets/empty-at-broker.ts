/**
 * A group the store believes has members, asked once more of the broker before a refusal for
 * live members stands: the members the proxy knows may have expired at the broker without
 * leaving (a session timeout sends no response the proxy could see). Used where the store's
 * record alone refuses: OffsetDelete without a broker connection (offset-delete.ts) and the
 * operators' commands (proxy/ops/admin/offsets-admin.ts).
 */
import { newRequestId } from '../../backends/request-id.js';
import type { CommitOutcome, CommitRequest, OffsetStore } from '../../backends/store.js';
import { GuardError } from '../../backends/store.js';

/**
 * Whether the broker says the group is empty. When it does, the store is told, so that a commit
 * without a member identity passes again. False when there is no broker to ask or it does not
 * answer.
 */
export async function emptyAtBroker(
  store: OffsetStore,
  group: string,
  groupIsEmptyAtBroker: ((group: string) => Promise<boolean>) | undefined,
): Promise<boolean> {
  if (!groupIsEmptyAtBroker || !(await groupIsEmptyAtBroker(group).catch(() => false))) return false;
  await store.updateGroup(group, { kind: 'empty' });
  return true;
}

/**
 * A commit with no member identity (generation -1, no member or instance id: assign() consumers
 * and admin tools) is refused while the group has members; before such a refusal stands, the
 * broker is asked once whether the group is really not empty (emptyAtBroker).
 */
export async function commitAnonymous(
  store: OffsetStore,
  request: CommitRequest,
  groupIsEmptyAtBroker: ((group: string) => Promise<boolean>) | undefined,
): Promise<CommitOutcome> {
  const outcome = await store.commit(request);
  if (outcome.status !== 'fenced' || outcome.error !== GuardError.UNKNOWN_MEMBER_ID) return outcome;
  if (!(await emptyAtBroker(store, request.group, groupIsEmptyAtBroker))) return outcome;
  return store.commit({ ...request, requestId: newRequestId() });
}
