/**
 * Refused commits in the log, at a bounded rate: the first refusal of each reason is logged at
 * once, later ones are summed and logged at most once per interval per reason (so a store outage
 * under load writes a line every 10 s, not one per commit). Wraps the offset service's metrics,
 * which count every refusal.
 *
 * A refusal the protocol expects (a zombie fenced, a compare-and-set that lost) is `info`; one the
 * operator has to act on (store down, unknown topic, unauthorized, metadata too large) is `warn`.
 */
import type { Logger } from '../common/log.js';
import type { CommitRefusal } from './offset-commit.js';
import type { OffsetServiceMetrics } from './service.js';

export const REFUSAL_LOG_INTERVAL_MS = 10_000;

const EXPECTED: ReadonlySet<CommitRefusal> = new Set(['fence', 'cas']);

/** What each reason means, in the log line. */
const MEANING: Record<CommitRefusal, string> = {
  fence: 'a stale generation, member or epoch (fenced, as a broker does)',
  broker_unanswered:
    "the broker, asked on the client's behalf (authorization, member re-check), gave no usable answer in time: COORDINATOR_NOT_AVAILABLE, retriable",
  cas: 'a compare-and-set whose expected offset did not match',
  cas_transactional:
    "a compare-and-set on a group that commits transactionally (its offsets are the broker's, which has no compare-and-set): INVALID_TXN_STATE",
  unknown_topic: 'a topic or partition the cluster does not have (--unknown-topics reject)',
  too_large: 'metadata over 4096 characters',
  store_down: 'the offset store failed (unreachable, too slow, or refusing writes: storeError says which)',
  unauthorized: "the cluster's ACLs do not allow the client's principal",
};

interface Pending {
  partitions: number;
  commits: number;
  lastGroup: string;
  lastLogged: number;
  timer: NodeJS.Timeout | null;
}

export class RefusalLog implements OffsetServiceMetrics {
  private readonly pending = new Map<CommitRefusal, Pending>();

  constructor(
    private readonly inner: OffsetServiceMetrics | undefined,
    private readonly log: Logger,
    /** The store's current problem, named in store_down lines. */
    private readonly storeProblem: () => string | null,
    private readonly intervalMs = REFUSAL_LOG_INTERVAL_MS,
  ) {}

  commitAccepted(group: string, partitions: number): void {
    this.inner?.commitAccepted(group, partitions);
  }

  mirrored(ok: boolean): void {
    this.inner?.mirrored(ok);
  }

  commitSuperseded(group: string, partitions: number): void {
    this.inner?.commitSuperseded?.(group, partitions);
  }

  commitRefused(group: string, reason: CommitRefusal, partitions: number): void {
    this.inner?.commitRefused(group, reason, partitions);
    let p = this.pending.get(reason);
    if (p === undefined) {
      p = { partitions: 0, commits: 0, lastGroup: group, lastLogged: 0, timer: null };
      this.pending.set(reason, p);
    }
    p.partitions += partitions;
    p.commits++;
    p.lastGroup = group;
    const wait = p.lastLogged + this.intervalMs - Date.now();
    if (wait <= 0) this.flush(reason);
    else if (p.timer === null) {
      p.timer = setTimeout(() => this.flush(reason), wait);
      p.timer.unref();
    }
  }

  /** Logs what is pending now (at shutdown, and for tests). */
  flushAll(): void {
    for (const reason of this.pending.keys()) this.flush(reason);
  }

  private flush(reason: CommitRefusal): void {
    const p = this.pending.get(reason)!;
    if (p.timer !== null) clearTimeout(p.timer);
    p.timer = null;
    if (p.commits === 0) return;
    const fields: Record<string, unknown> = {
      reason,
      why: MEANING[reason],
      commits: p.commits,
      partitions: p.partitions,
      group: p.lastGroup.length > 200 ? `${p.lastGroup.slice(0, 200)}…` : p.lastGroup,
      ...(p.lastLogged > 0 ? { sinceSeconds: Math.round((Date.now() - p.lastLogged) / 1000) } : {}),
    };
    if (reason === 'store_down') {
      const problem = this.storeProblem();
      if (problem !== null) fields['storeError'] = problem;
    }
    if (EXPECTED.has(reason)) this.log.info('commits refused', fields);
    else this.log.warn('commits refused', fields);
    p.partitions = 0;
    p.commits = 0;
    p.lastLogged = Date.now();
  }
}
