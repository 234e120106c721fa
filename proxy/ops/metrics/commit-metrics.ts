/**
 * The offset service's counters. They count partitions, not requests: a commit of 12 partitions
 * that is refused adds 12. No group label: groups are unbounded (lag metrics carry the group, with
 * their own cardinality limit).
 */
import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';
import type { CommitRefusal } from '../../offsets/offset-commit.js';
import type { OffsetServiceMetrics } from '../../offsets/service.js';

/** Every reason, checked by the compiler: a reason missing here made counting it throw. */
const REASON_LIST = {
  fence: true,
  broker_unanswered: true,
  cas: true,
  cas_transactional: true,
  unknown_topic: true,
  too_large: true,
  store_down: true,
  unauthorized: true,
} satisfies Record<CommitRefusal, true>;
const REASONS = Object.keys(REASON_LIST) as CommitRefusal[];

type CounterChild = ReturnType<Counter['labels']>;

/** A child that exports 0 from the start, so rate() and alerts see the series before the first event. */
function zeroed(child: CounterChild): CounterChild {
  child.inc(0);
  return child;
}

export class CommitMetrics implements OffsetServiceMetrics {
  private readonly accepted: CounterChild;
  private readonly superseded: Counter;
  private readonly refused: CounterChild;
  private readonly reasons: Record<CommitRefusal, CounterChild>;
  private readonly mirroredOk: CounterChild;
  private readonly mirroredFailed: CounterChild;

  constructor(registry: Registry) {
    const commits = new Counter({
      name: 'kop_commits_total',
      help: 'Committed partitions answered by the proxy, by result (accepted, refused).',
      labelNames: ['result'],
      registers: [registry],
    });
    this.accepted = zeroed(commits.labels('accepted'));
    this.refused = zeroed(commits.labels('refused'));
    const refusals = new Counter({
      name: 'kop_commit_refusals_total',
      help: `Refused committed partitions, by reason (${REASONS.join(', ')}).`,
      labelNames: ['reason'],
      registers: [registry],
    });
    this.reasons = Object.fromEntries(REASONS.map((r) => [r, zeroed(refusals.labels(r))])) as Record<
      CommitRefusal,
      CounterChild
    >;
    const mirrored = new Counter({
      name: 'kop_mirrored_commits_total',
      help: "Accepted commits copied to the broker's group coordinator (--mirror-commits), by result (ok, failed).",
      labelNames: ['result'],
      registers: [registry],
    });
    this.superseded = new Counter({
      name: 'kop_commits_superseded_total',
      help:
        'Accepted committed partitions not written because a commit this proxy read later had written ' +
        'them (also counted as accepted in kop_commits_total).',
      registers: [registry],
    });
    this.superseded.inc(0);
    this.mirroredOk = zeroed(mirrored.labels('ok'));
    this.mirroredFailed = zeroed(mirrored.labels('failed'));
  }

  commitAccepted(_group: string, partitions: number): void {
    this.accepted.inc(partitions);
  }

  commitSuperseded(_group: string, partitions: number): void {
    this.superseded.inc(partitions);
  }

  commitRefused(_group: string, reason: CommitRefusal, partitions: number): void {
    this.refused.inc(partitions);
    this.reasons[reason].inc(partitions);
  }

  mirrored(ok: boolean): void {
    (ok ? this.mirroredOk : this.mirroredFailed).inc();
  }
}
