/**
 * The OffsetCommits this process read and has not finished, per group, by read order
 * (RequestInfo.readSeq): held from the moment a commit is read from its client's socket (before
 * it waits behind its connection's earlier requests) until its answer is built, when every store
 * write it made has a definitive outcome (a store reports an unknown outcome only once the write
 * can no longer apply: stores.md) or it was dropped unanswered with its connection.
 *
 * A commit is **contended** when another commit of its group read earlier is still held: only
 * then can an older commit of the group reach the store after it, and only then must the store
 * record its read order for "later read wins" (commit-order.ts, CommitOrder.contended). A commit
 * read earlier and not held any more can no longer write anything, and one read later is never
 * superseded by this one.
 *
 * One per process, as the read order and the instance id are (read-order.ts, offset-commit.ts).
 */
export class CommitsInProgress {
  /** group → the read orders of its commits held (each request has its own). */
  private readonly groups = new Map<string, Set<number>>();

  hold(group: string, seq: number): void {
    let held = this.groups.get(group);
    if (held === undefined) this.groups.set(group, (held = new Set()));
    held.add(seq);
  }

  release(group: string, seq: number): void {
    const held = this.groups.get(group);
    if (held === undefined) return;
    held.delete(seq);
    if (held.size === 0) this.groups.delete(group);
  }

  /** Whether a commit of `group` read before `seq` is still held. */
  contended(group: string, seq: number): boolean {
    const held = this.groups.get(group);
    if (held === undefined) return false;
    for (const s of held) if (s < seq) return true;
    return false;
  }

  /** Groups with a commit held (for tests: nothing may be left behind). */
  get size(): number {
    return this.groups.size;
  }
}

export const COMMITS_IN_PROGRESS = new CommitsInProgress();
