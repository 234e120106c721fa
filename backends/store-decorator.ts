/**
 * The base of OffsetStore decorators (metrics, health): every operation goes through `around`
 * with its name; the optional hooks and close are passed through.
 */
import type { Endpoint } from './connection-problem.js';
import type {
  CommitOutcome,
  CommitRequest,
  GroupState,
  GroupUpdate,
  OffsetStore,
  PartitionOffset,
  TopicPartition,
} from './store.js';

export const STORE_OPERATIONS = [
  'commit',
  'fetch',
  'delete_offsets',
  'delete_group',
  'list_groups',
  'get_group',
  'update_group',
  'lease',
  'release_lease',
  'ping',
] as const;
export type StoreOperation = (typeof STORE_OPERATIONS)[number];

export abstract class StoreDecorator implements OffsetStore {
  readonly kind: string;

  constructor(protected readonly inner: OffsetStore) {
    this.kind = inner.kind;
  }

  /** Runs one operation of the inner store. */
  protected abstract around<T>(op: StoreOperation, run: () => Promise<T>): Promise<T>;

  commit(request: CommitRequest): Promise<CommitOutcome> {
    return this.around('commit', () => this.inner.commit(request));
  }
  fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    return this.around('fetch', () => this.inner.fetch(group, partitions));
  }
  deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void> {
    return this.around('delete_offsets', () => this.inner.deleteOffsets(group, partitions));
  }
  deleteGroup(group: string): Promise<void> {
    return this.around('delete_group', () => this.inner.deleteGroup(group));
  }
  listGroups(): Promise<string[]> {
    return this.around('list_groups', () => this.inner.listGroups());
  }
  getGroup(group: string): Promise<GroupState | null> {
    return this.around('get_group', () => this.inner.getGroup(group));
  }
  updateGroup(group: string, update: GroupUpdate): Promise<void> {
    return this.around('update_group', () => this.inner.updateGroup(group, update));
  }
  lease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.around('lease', () => this.inner.lease(name, holder, ttlMs));
  }
  releaseLease(name: string, holder: string): Promise<void> {
    return this.around('release_lease', () => this.inner.releaseLease(name, holder));
  }
  ping(): Promise<void> {
    return this.around('ping', () => this.inner.ping());
  }
  recoverFromFault(err: unknown): boolean {
    return this.inner.recoverFromFault?.(err) ?? false;
  }
  connectionProblem(): string | null {
    return this.inner.connectionProblem?.() ?? null;
  }
  probeEndpoints(): Endpoint[] | null {
    return this.inner.probeEndpoints?.() ?? null;
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
