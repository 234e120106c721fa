/**
 * What the parts of the store contract share: the suite's two stores over one backend, and the
 * helpers that make unique groups, request ids, writes and identities.
 */
import { newRequestId } from './request-id.js';
import type {
  CommitIdentity,
  CommitOutcome,
  GroupState,
  GroupUpdate,
  OffsetStore,
  OffsetWrite,
  PartitionOffset,
} from './store.js';

/**
 * The suite's stores: two instances over one backend, opened by runStoreContract's beforeAll (so
 * read them inside a test, not where it is declared), and the factory for more.
 */
export class ContractStores {
  private first: OffsetStore | undefined;
  private second: OffsetStore | undefined;

  constructor(readonly makeStore: () => Promise<OffsetStore>) {}

  async open(): Promise<void> {
    this.first = await this.makeStore();
    this.second = await this.makeStore();
  }

  async close(): Promise<void> {
    await this.first?.close();
    await this.second?.close();
  }

  get store(): OffsetStore {
    return opened(this.first);
  }

  get other(): OffsetStore {
    return opened(this.second);
  }
}

function opened(store: OffsetStore | undefined): OffsetStore {
  if (store === undefined) throw new Error('the contract reads its stores before beforeAll opened them');
  return store;
}

export const MAX_INT64 = 2n ** 63n - 1n;
let seq = 0;
export const uniqueGroup = (label: string): string =>
  `ct-${label}-${process.pid}-${Date.now().toString(36)}-${seq++}`;
/** A request id as the proxy issues them (time-ordered, backends/request-id.ts). */
export const rid = (): string => newRequestId();
/** A request id of any other form: the contract needs ids unique, nothing more. */
export const otherRid = (): string =>
  `r-${process.pid}-${Date.now().toString(36)}-${seq++}-${Math.random().toString(36).slice(2)}`;

/** One partition write with the contract's defaults (commit time 1_700_000_000_000). */
export function write(
  topic: string,
  partition: number,
  offset: bigint,
  extra: Partial<OffsetWrite> = {},
): OffsetWrite {
  return {
    topic,
    partition,
    offset,
    leaderEpoch: -1,
    metadata: '',
    commitTimestamp: 1_700_000_000_000n,
    expireTimestamp: -1n,
    ...extra,
  };
}

export const ident = (
  generationIdOrMemberEpoch: number,
  memberId = '',
  groupInstanceId: string | null = null,
  requestVersion = 9,
): CommitIdentity => ({
  generationIdOrMemberEpoch,
  memberId,
  groupInstanceId,
  requestVersion,
});

export const sortOffsets = (xs: PartitionOffset[]): PartitionOffset[] =>
  [...xs].sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));

/** Member order and absent-vs-undefined fields are not part of the contract. */
export function normalizeState(s: GroupState | null): GroupState | null {
  if (s === null) return null;
  const members = s.members
    .map((m) => ({
      memberId: m.memberId,
      groupInstanceId: m.groupInstanceId,
      ...(m.memberEpoch === undefined ? {} : { memberEpoch: m.memberEpoch }),
      ...(m.rank === undefined ? {} : { rank: m.rank }),
    }))
    .sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0));
  return { ...s, members };
}

export const outcomeOf = (code: number | null): CommitOutcome =>
  code === null ? { status: 'ok' } : { status: 'fenced', error: code as never };

/** Applies group updates in order, as the proxy would. */
export async function applyUpdates(store: OffsetStore, group: string, updates: GroupUpdate[]): Promise<void> {
  for (const u of updates) await store.updateGroup(group, u);
}
