/**
 * Groups the proxy keeps its own records in, inside the offset store, so that every backend and
 * layout holds them without a change to any of them: a record is one partition's committed offset
 * (compare-and-set on the offset, a metadata string, a commit timestamp), which every backend
 * keeps and shares between proxy instances.
 *
 * Clients and operators never see them: `InternalGroupsHidden` is the store as the offset APIs,
 * the group tools' views, the admin API, lag metrics and the offsets CLI use it. Listings leave
 * the internal groups out, and a client's request naming one finds an empty group that takes no
 * commit (docs/errors.md), so no client can read or overwrite the proxy's records through it.
 */
import { StoreDecorator } from './store-decorator.js';
import { GuardError } from './store.js';
import type {
  CommitOutcome,
  CommitRequest,
  GroupState,
  GroupUpdate,
  OffsetStore,
  PartitionOffset,
  TopicPartition,
} from './store.js';

/** Each topic's incarnation: its id and since when (proxy/offsets/topic-incarnations.ts). */
export const TOPIC_INCARNATIONS_GROUP = '__kop_topic_incarnations';

export function isInternalGroup(group: string): boolean {
  return group === TOPIC_INCARNATIONS_GROUP;
}

export class InternalGroupsHidden extends StoreDecorator {
  /** `store` without internal groups; a store already wrapped is returned as it is. */
  static over(store: OffsetStore): InternalGroupsHidden {
    return store instanceof InternalGroupsHidden ? store : new InternalGroupsHidden(store);
  }

  /** The store with the internal groups, for the proxy's own records. */
  get withInternalGroups(): OffsetStore {
    return this.inner;
  }

  protected around<T>(_op: string, run: () => Promise<T>): Promise<T> {
    return run();
  }

  override async listGroups(): Promise<string[]> {
    return (await this.inner.listGroups()).filter((g) => !isInternalGroup(g));
  }
  override commit(request: CommitRequest): Promise<CommitOutcome> {
    if (!isInternalGroup(request.group)) return this.inner.commit(request);
    // As a group that does not exist refuses a member's commit: nothing written.
    return Promise.resolve({ status: 'fenced', error: GuardError.GROUP_ID_NOT_FOUND });
  }
  override fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    return isInternalGroup(group) ? Promise.resolve([]) : this.inner.fetch(group, partitions);
  }
  override deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void> {
    return isInternalGroup(group) ? Promise.resolve() : this.inner.deleteOffsets(group, partitions);
  }
  override deleteGroup(group: string): Promise<void> {
    return isInternalGroup(group) ? Promise.resolve() : this.inner.deleteGroup(group);
  }
  override getGroup(group: string): Promise<GroupState | null> {
    return isInternalGroup(group) ? Promise.resolve(null) : this.inner.getGroup(group);
  }
  override updateGroup(group: string, update: GroupUpdate): Promise<void> {
    return isInternalGroup(group) ? Promise.resolve() : this.inner.updateGroup(group, update);
  }
}
