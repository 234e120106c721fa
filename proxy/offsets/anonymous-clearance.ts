/**
 * Anonymous commits (no member id, epoch -1: assign() consumers, admin tools) that the broker
 * accepted here recently, per group, in memory.
 *
 * The store's record shows a classic or KIP-848 group's members to every proxy instance, so its
 * atomic commit step refuses an anonymous commit while they are there. A streams group's members
 * are not in it (streams-groups.ts keeps what one instance saw): an instance that never saw the
 * group's StreamsGroupHeartbeat answers would accept an anonymous commit on the record's word,
 * where Kafka's coordinator answers UNKNOWN_MEMBER_ID while the group has members. So an
 * anonymous commit is the broker's to decide unless the broker accepted one for the group within
 * the last `ttlMs`: one verdict per group per window, not one per commit (assign() consumers
 * commit often, and the commit benchmarks are made of such commits). A streams group that gains
 * its first member elsewhere within the window is the difference left (docs/design.md).
 */

/** How long the broker's acceptance of a group's anonymous commit is taken as still holding. */
export const ANONYMOUS_CLEARANCE_MS = 10_000;

/** The most groups remembered; forgetting one only costs a broker check. */
const MAX_GROUPS = 100_000;

export class AnonymousClearance {
  private readonly until = new Map<string, number>();

  constructor(
    private readonly ttlMs: number = ANONYMOUS_CLEARANCE_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether the broker accepted an anonymous commit of the group within the window. */
  cleared(group: string): boolean {
    const until = this.until.get(group);
    return until !== undefined && this.now() < until;
  }

  /** The broker accepted an anonymous commit of the group just now. */
  accepted(group: string): void {
    if (this.until.size >= MAX_GROUPS && !this.until.has(group)) this.prune();
    this.until.set(group, this.now() + this.ttlMs);
  }

  /** The broker refused one, or the group was deleted: the next one is asked again. */
  forget(group: string): void {
    this.until.delete(group);
  }

  private prune(): void {
    const now = this.now();
    for (const [group, until] of this.until) if (until <= now) this.until.delete(group);
    if (this.until.size >= MAX_GROUPS) this.until.clear();
  }
}
