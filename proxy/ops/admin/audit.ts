/**
 * The audit trail of admin changes to stored offsets, over HTTP and through the `offsets` CLI:
 * one structured line per partition changed (or planned, for a dry run), naming who (the caller's
 * address and the token it presented, or "cli"), the group, topic and partition, the offset before
 * and after, force and dry-run, and the outcome; and one count per change: in
 * kop_admin_changes_total{route, result} (audit-metrics.ts) in the proxy that serves the HTTP API,
 * and for the CLI, a process that ends after one change, in the store (storeCountName), which
 * every proxy on it exports as kop_admin_cli_changes_total{route, result}.
 *
 * The old offset is read just before the change, not in the same atomic step: a consumer
 * committing in between (only possible with force) makes it stale. A refused or failed change is
 * audited too, so attempts are visible, not only successes.
 */
import { StoreCorruptError, StoreUnavailableError } from '../../../backends/errors.js';
import type { OffsetStore, PartitionOffset } from '../../../backends/store.js';
import type { Logger } from '../../common/log.js';
import { AdminError, GroupNotEmptyError } from './offsets-admin.js';

/** Who made a change. */
export interface AdminActor {
  /** The caller's address and port; null for the CLI (a local process). */
  remote: string | null;
  /** The name of the credential: the token's (`http-token`), or `cli`. */
  who: string;
  /** The CLI's operating-system user. */
  user?: string;
}

/** What was asked for: the kop_admin_changes_total route label. */
export type AdminRoute = 'set' | 'delete' | 'delete_group' | 'import';

/** How a change ended: the kop_admin_changes_total result label. */
export type AuditResult =
  | 'ok'
  | 'dry_run'
  | 'refused'
  | 'bad_input'
  | 'unavailable'
  | 'failed'
  /** No or a wrong token (HTTP 401). */
  | 'unauthorized'
  /** Writes are disabled: no token is configured (HTTP 403). */
  | 'forbidden';

export interface AdminChange {
  route: AdminRoute;
  actor: AdminActor;
  group: string;
  /** The partitions and the offset each gets (null: deleted); undefined: the whole group is deleted. */
  targets?: { topic: string; partition: number; to: bigint | null }[];
  force: boolean;
  dryRun: boolean;
}

/** Counts one audited change (a group of one request); see audit-metrics.ts. */
export type CountChange = (route: AdminRoute, result: AuditResult) => void;

/** The store count (OffsetStore.addToCount) of the CLI's changes with this route and result. */
export function storeCountName(route: AdminRoute, result: AuditResult): string {
  return `${CLI_COUNT_PREFIX}${route}:${result}`;
}

/** The route and result of a store count storeCountName made; null for any other count. */
export function parseStoreCountName(name: string): { route: string; result: string } | null {
  const m = /^admin_changes:cli:([a-z_]+):([a-z_]+)$/.exec(name);
  return m ? { route: m[1]!, result: m[2]! } : null;
}

const CLI_COUNT_PREFIX = 'admin_changes:cli:';

/** The event name of audit lines, for whoever filters them from a log. */
export const AUDIT_EVENT = 'admin change';

export class AdminAudit {
  constructor(
    private readonly log: Logger,
    private readonly count: CountChange = () => {},
  ) {}

  /**
   * Runs `apply` (the change itself, or a dry run's plan) and audits `changes` with its outcome.
   * A GroupNotEmptyError refuses the groups it names only (an import writes the others).
   */
  async audited<T>(store: OffsetStore, changes: AdminChange[], apply: () => Promise<T>): Promise<T> {
    // One group after the other: an import may name thousands, which must not all hit the store at once.
    const before: Before[] = [];
    for (const c of changes) before.push(await storedBefore(store, c));
    try {
      const value = await apply();
      changes.forEach((c, i) => this.write(c, before[i]!, c.dryRun ? 'dry_run' : 'ok'));
      return value;
    } catch (err) {
      changes.forEach((c, i) => {
        const result =
          err instanceof GroupNotEmptyError && !err.groups.includes(c.group)
            ? c.dryRun
              ? 'dry_run'
              : 'ok'
            : resultOf(err);
        this.write(c, before[i]!, result, result === 'ok' ? undefined : (err as Error).message);
      });
      throw err;
    }
  }

  /**
   * Audits a request the HTTP route guard refused before it reached the store (401: no or a wrong
   * token; 403: no token configured): nothing changed, the old offsets are not read.
   */
  denied(route: AdminRoute, actor: AdminActor, status: number, target: Record<string, string>): void {
    const result: AuditResult = status === 401 ? 'unauthorized' : 'forbidden';
    this.count(route, result);
    const partition = target['partition'] === undefined ? null : Number(target['partition']);
    this.log.warn(AUDIT_EVENT, {
      route,
      result,
      who: actor.who,
      remote: actor.remote,
      group: target['group'] ?? null,
      topic: target['topic'] ?? null,
      partition: Number.isInteger(partition) ? partition : null,
      old: null,
      new: null,
      force: null,
      dryRun: false,
    });
  }

  private write(change: AdminChange, before: Before, result: AuditResult, error?: string): void {
    this.count(change.route, result);
    const base = {
      route: change.route,
      result,
      who: change.actor.who,
      remote: change.actor.remote,
      ...(change.actor.user !== undefined ? { user: change.actor.user } : {}),
      group: change.group,
    };
    const tail = {
      force: change.force,
      dryRun: change.dryRun,
      ...(before.error !== undefined ? { oldUnknown: before.error } : {}),
      ...(error !== undefined ? { error } : {}),
    };
    const old = (topic: string, partition: number): string | null =>
      before.offsets.get(key(topic, partition))?.toString() ?? null;
    const lines: AuditedPartition[] =
      change.targets !== undefined
        ? change.targets.map((t) => ({
            topic: t.topic,
            partition: t.partition,
            old: old(t.topic, t.partition),
            new: t.to?.toString() ?? null,
          }))
        : [...before.offsets.keys()].map((k) => {
            const [topic, partition] = k.split('\u0000') as [string, string];
            return { topic, partition: Number(partition), old: old(topic, Number(partition)), new: null };
          });
    // A whole group without offsets still gets its line: its membership record goes.
    if (lines.length === 0) lines.push({ topic: null, partition: null, old: null, new: null });
    const level = result === 'ok' || result === 'dry_run' ? 'info' : 'warn';
    for (const line of lines) this.log[level](AUDIT_EVENT, { ...base, ...line, ...tail });
  }
}

/** One partition of an audit line; topic and partition null for a whole group that has no offsets. */
interface AuditedPartition {
  topic: string | null;
  partition: number | null;
  old: string | null;
  new: string | null;
}

interface Before {
  offsets: Map<string, bigint>;
  /** Why the old offsets could not be read (the change itself may still have run). */
  error?: string;
}

const key = (topic: string, partition: number) => `${topic}\u0000${partition}`;

async function storedBefore(store: OffsetStore, c: AdminChange): Promise<Before> {
  let stored: PartitionOffset[];
  try {
    stored = await store.fetch(
      c.group,
      c.targets?.map((t) => ({ topic: t.topic, partition: t.partition })) ?? null,
    );
  } catch (err) {
    return { offsets: new Map(), error: (err as Error).message };
  }
  return { offsets: new Map(stored.map((o) => [key(o.topic, o.partition), o.offset])) };
}

function resultOf(err: unknown): AuditResult {
  if (err instanceof AdminError)
    return err.kind === 'conflict' ? 'refused' : err.kind === 'bad-input' ? 'bad_input' : 'unavailable';
  if (err instanceof StoreUnavailableError) return 'unavailable';
  if (err instanceof StoreCorruptError) return 'failed';
  // The HTTP layer's own refusals (HttpError 4xx) carry a status.
  const status = (err as { status?: unknown }).status;
  if (typeof status === 'number' && status >= 400 && status < 500)
    return status === 409 ? 'refused' : 'bad_input';
  return 'failed';
}
