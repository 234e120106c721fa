/**
 * The store as clients, operators and lag see it after a topic was deleted and re-created under
 * its name: the broker deleted the older topic's committed offsets, so they are no offset here
 * too (topic-incarnations.ts decides which ones they are: `ofCurrentTopic`). Every reader goes
 * through this decorator: the offset service (OffsetFetch, its group views, the commit fence),
 * the admin HTTP API, the lag collector and the offsets CLI.
 *
 * Reads leave them out. A compare-and-set (`cas:<expected>` commits, `offsets set --expected`)
 * compares with what a read shows: an older topic's offset is "none" (-1). The store's atomic
 * step compares with the stored value, so the expectation is translated against it: -1 becomes
 * "still that older offset" (nothing committed since, as one atomic check), and any other value
 * cannot match (the partition shows none). A mismatch reports the offsets as a read shows them.
 *
 * The older offsets are hidden, not deleted (docs/design.md says why): the store has no
 * conditional delete, and a delete after the read could remove a commit to the new topic made
 * in between; a commit to the partition overwrites them.
 */
import { newRequestId } from '../../backends/request-id.js';
import { StoreDecorator } from '../../backends/store-decorator.js';
import type {
  CasMismatch,
  CommitOutcome,
  CommitRequest,
  OffsetStore,
  OffsetWrite,
  PartitionOffset,
  TopicPartition,
} from '../../backends/store.js';
import { ofCurrentTopic } from './topic-incarnations.js';
import type { HiddenBefore } from './topic-incarnations.js';

/** A commit whose "none" met an older offset deleted meanwhile is tried again, this often in all. */
const CAS_ATTEMPTS = 3;

const keyOf = (tp: TopicPartition): string => `${tp.partition}:${tp.topic}`;
const hasExpectation = (w: OffsetWrite): boolean => w.expectedOffset !== undefined;

export class OlderTopicsHidden extends StoreDecorator {
  /** `store` with older topics' offsets hidden; a store already wrapped is returned as it is. */
  static over(store: OffsetStore, hiddenBefore: HiddenBefore): OlderTopicsHidden {
    return store instanceof OlderTopicsHidden ? store : new OlderTopicsHidden(store, hiddenBefore);
  }

  constructor(
    inner: OffsetStore,
    private readonly hiddenBefore: HiddenBefore,
  ) {
    super(inner);
  }

  protected around<T>(_op: string, run: () => Promise<T>): Promise<T> {
    return run();
  }

  override async fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    const stored = await this.inner.fetch(group, partitions);
    if (stored.length === 0) return stored;
    const hidden = await this.hiddenBefore([...new Set(stored.map((o) => o.topic))]);
    return hidden.size === 0 ? stored : stored.filter((o) => ofCurrentTopic(o, hidden));
  }

  override async commit(request: CommitRequest): Promise<CommitOutcome> {
    // The hot path: a commit without compare-and-set is the store's as it is (no array built).
    if (!request.writes.some(hasExpectation)) return this.inner.commit(request);
    const cas = request.writes.filter(hasExpectation);
    const hidden = await this.hiddenBefore([...new Set(cas.map((w) => w.topic))]);
    const concerned = cas.filter((w) => hidden.has(w.topic));
    if (concerned.length === 0) return this.inner.commit(request);
    for (let attempt = 1; ; attempt++) {
      const older = await this.olderOffsets(request.group, concerned, hidden);
      const writes = request.writes.map((w) => againstStored(w, older.get(keyOf(w))));
      const requestId = attempt === 1 ? request.requestId : newRequestId();
      const outcome = await this.inner.commit({ ...request, writes, requestId });
      if (outcome.status !== 'cas-mismatch') return outcome;
      const mismatches = outcome.mismatches.map((m) => asRead(m, request.writes, older));
      // An older offset deleted between the read and the commit: "none" held after all.
      const deletedMeanwhile = mismatches.some((m) => m.expected === -1n && m.actual === -1n);
      if (!deletedMeanwhile || attempt >= CAS_ATTEMPTS) return { status: 'cas-mismatch', mismatches };
    }
  }

  /** The stored offsets of `writes`' partitions that are older topics' (by partition key). */
  private async olderOffsets(
    group: string,
    writes: readonly OffsetWrite[],
    hidden: ReadonlyMap<string, bigint>,
  ): Promise<Map<string, bigint>> {
    const stored = await this.inner.fetch(
      group,
      writes.map((w) => ({ topic: w.topic, partition: w.partition })),
    );
    const older = new Map<string, bigint>();
    for (const o of stored) if (!ofCurrentTopic(o, hidden)) older.set(keyOf(o), o.offset);
    return older;
  }
}

/**
 * The write with its expectation stated against the stored value, where that value is an older
 * topic's offset (`older`), which reads show as none.
 */
function againstStored(w: OffsetWrite, older: bigint | undefined): OffsetWrite {
  if (w.expectedOffset === undefined || older === undefined) return w;
  if (w.expectedOffset === -1n) return { ...w, expectedOffset: older };
  // Expecting an offset where a read shows none: a mismatch. The stored value is not expected;
  // if a commit replaces it meanwhile with the expected one, the store's check matches as a read
  // would then (-2 when the older offset is the expected one: no client commits -2).
  return w.expectedOffset === older ? { ...w, expectedOffset: older === -2n ? -3n : -2n } : w;
}

/** A mismatch as a read shows it: the client's expectation, an older offset as none. */
function asRead(
  m: CasMismatch,
  asked: readonly OffsetWrite[],
  older: ReadonlyMap<string, bigint>,
): CasMismatch {
  const was = older.get(keyOf(m));
  if (was === undefined) return m;
  const expected = asked.findLast((w) => keyOf(w) === keyOf(m))?.expectedOffset ?? m.expected;
  return { ...m, expected, actual: m.actual === was ? -1n : m.actual };
}
