/**
 * Consumer lag of the groups in the offset store, exported under the Kafka exporter's metric
 * names (danielqsj/kafka_exporter) so existing dashboards and alerts work unchanged:
 *
 *   kafka_consumergroup_current_offset{consumergroup,topic,partition}
 *   kafka_consumergroup_current_offset_sum{consumergroup,topic}
 *   kafka_consumergroup_lag{consumergroup,topic,partition}
 *   kafka_consumergroup_lag_sum{consumergroup,topic}
 *   kafka_consumergroup_members{consumergroup}               (from the broker's DescribeGroups)
 *   kafka_topic_partition_current_offset{topic,partition}   (log-end offset)
 *
 * with the Kafka exporter's conventions: every partition of a topic the group has committed to
 * has a series, -1 (offset and lag) where the group has no commit, and the offset sum adds those
 * -1s as the exporter does (docs/metrics.md has the comparison with a real kafka_exporter).
 *
 * plus kop_consumergroup_last_commit_age_seconds{consumergroup,topic,partition}, computed at
 * scrape time from the stored commit timestamps so it keeps growing between refreshes.
 *
 * A refresh replaces every series in one synchronous step (reset, then set): a scrape never sees
 * half a refresh, and series of groups or partitions that disappeared from the store are gone.
 * A refresh that fails (store down, no broker) keeps the previous series and counts the error.
 *
 * Several proxies on one shared store would each export the same series: with a lease, only the
 * proxy holding it exports (kop_lag_exporter 1), the others export none, and when the holder stops
 * (it releases) or dies (the lease lapses) another one takes over at its next refresh.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { OffsetStore, PartitionOffset, TopicPartition } from '../../../backends/store.js';
import type { Logger } from '../../common/log.js';
import { computeLag, currentOffsetSums, lagSums } from './compute-lag.js';
import type { LagRow } from './compute-lag.js';
import { GroupFilter } from './group-filter.js';
import type { GroupFilterOptions } from './group-filter.js';
import { fetchLogEndOffsets } from './log-end-offsets.js';
import type { LogEndSource } from './log-end-offsets.js';

/** One exporter per cluster: the store lease this proxy must hold to export lag series. */
export interface LagLease {
  store: Pick<OffsetStore, 'lease' | 'releaseLease'>;
  /** Unique to this proxy process. */
  holder: string;
  ttlMs: number;
}

export const LAG_LEASE = 'lag-exporter';

export interface LagCollectorOptions extends GroupFilterOptions {
  store: Pick<OffsetStore, 'listGroups' | 'fetch'>;
  cluster: LogEndSource;
  /** Member counts of groups, as the broker's DescribeGroups says (absent: no members gauge). */
  members?: (groups: string[]) => Promise<Map<string, number>>;
  /** Absent: this proxy always exports (a store only it uses). */
  lease?: LagLease;
  registry: Registry;
  log: Logger;
  intervalMs: number;
  /** For tests. */
  now?: () => number;
}

const GROUP_PARTITION = ['consumergroup', 'topic', 'partition'] as const;
const YIELD_EVERY_GROUPS = 50;

export class LagCollector {
  private readonly filter: GroupFilter;
  private readonly currentOffset: Gauge<(typeof GROUP_PARTITION)[number]>;
  private readonly currentOffsetSum: Gauge<'consumergroup' | 'topic'>;
  private readonly lag: Gauge<(typeof GROUP_PARTITION)[number]>;
  private readonly lagSum: Gauge<'consumergroup' | 'topic'>;
  private readonly members: Gauge<'consumergroup'>;
  private readonly exporter: Gauge;
  private holding = false;
  private readonly logEnd: Gauge<'topic' | 'partition'>;
  private readonly refreshDuration: Histogram;
  private readonly refreshErrors: Counter;
  private readonly lastSuccess: Gauge;
  private readonly groupsTruncated: Gauge;
  private readonly now: () => number;
  /** The rows of the last successful refresh, for the commit-age gauge computed at scrape time. */
  private rows: LagRow[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private warnedTruncated = false;
  private stopped = false;

  constructor(private readonly opts: LagCollectorOptions) {
    this.filter = new GroupFilter(opts);
    this.now = opts.now ?? Date.now;
    const registers = [opts.registry];
    this.currentOffset = new Gauge({
      name: 'kafka_consumergroup_current_offset',
      help: 'Committed offset of a consumer group at a partition (from the proxy offset store).',
      labelNames: GROUP_PARTITION,
      registers,
    });
    this.currentOffsetSum = new Gauge({
      name: 'kafka_consumergroup_current_offset_sum',
      help: 'Sum of the committed offsets of a consumer group in a topic (-1 for each uncommitted partition, as the Kafka exporter adds them).',
      labelNames: ['consumergroup', 'topic'],
      registers,
    });
    this.lag = new Gauge({
      name: 'kafka_consumergroup_lag',
      help: 'Log-end offset minus committed offset of a consumer group at a partition.',
      labelNames: GROUP_PARTITION,
      registers,
    });
    this.lagSum = new Gauge({
      name: 'kafka_consumergroup_lag_sum',
      help: 'Sum of the lag of a consumer group over its committed partitions of a topic.',
      labelNames: ['consumergroup', 'topic'],
      registers,
    });
    this.members = new Gauge({
      name: 'kafka_consumergroup_members',
      help: "Members of a consumer group, as the group coordinator's DescribeGroups reports them.",
      labelNames: ['consumergroup'],
      registers,
    });
    this.exporter = new Gauge({
      name: 'kop_lag_exporter',
      help: 'Whether this proxy exports the lag series (1): one proxy per shared store does.',
      registers,
    });
    this.logEnd = new Gauge({
      name: 'kafka_topic_partition_current_offset',
      help: 'Log-end offset (high watermark) of a partition some exported group has committed to.',
      labelNames: ['topic', 'partition'],
      registers,
    });
    const rowsOf = (): LagRow[] => this.rows;
    const now = this.now;
    new Gauge({
      name: 'kop_consumergroup_last_commit_age_seconds',
      help: "Seconds since the group's last commit of a partition (the store's commit timestamp).",
      labelNames: GROUP_PARTITION,
      registers,
      collect() {
        this.reset();
        const t = now();
        for (const r of rowsOf()) {
          this.labels(r.group, r.topic, String(r.partition)).set(
            Math.max(0, (t - Number(r.commitTimestamp)) / 1000),
          );
        }
      },
    });
    this.refreshDuration = new Histogram({
      name: 'kop_lag_refresh_duration_seconds',
      help: 'Time to compute consumer lag for all exported groups (store reads, Metadata, ListOffsets).',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.refreshErrors = new Counter({
      name: 'kop_lag_refresh_errors_total',
      help: 'Lag refreshes that failed (the previous lag series were kept).',
      registers,
    });
    this.lastSuccess = new Gauge({
      name: 'kop_lag_last_refresh_timestamp_seconds',
      help: 'When consumer lag was last computed successfully (Unix time).',
      registers,
    });
    this.groupsTruncated = new Gauge({
      name: 'kop_lag_groups_truncated',
      help: 'Groups matching the lag patterns that get no lag series because of --lag-max-groups.',
      registers,
    });
  }

  /** Refreshes now and then every intervalMs (a refresh never overlaps the previous one). */
  start(): void {
    const loop = (): void => {
      if (this.stopped) return;
      this.running = this.refresh().finally(() => {
        this.running = undefined;
        if (!this.stopped) this.timer = setTimeout(loop, this.opts.intervalMs);
      });
    };
    loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    const lease = this.opts.lease;
    if (lease && this.holding) {
      this.holding = false;
      await lease.store.releaseLease(LAG_LEASE, lease.holder).catch(() => undefined);
    }
  }

  /** Takes or renews the lease; without one, this proxy always exports. */
  private async holdsLease(): Promise<boolean> {
    const lease = this.opts.lease;
    if (!lease) return true;
    try {
      this.holding = await lease.store.lease(LAG_LEASE, lease.holder, lease.ttlMs);
    } catch (err) {
      // Unsure: another proxy may take it over once it lapses, so stop exporting.
      this.opts.log.warn('lag: could not renew the exporter lease', { error: err });
      this.holding = false;
    }
    return this.holding;
  }

  /** One refresh; resolves false when it failed (and the previous series stay). */
  async refresh(): Promise<boolean> {
    const end = this.refreshDuration.startTimer();
    try {
      if (!(await this.holdsLease())) {
        this.exporter.set(0);
        this.publish([], 0, new Map());
        return true;
      }
      this.exporter.set(1);
      const { selected, truncated } = this.filter.select(await this.opts.store.listGroups());
      const committed = new Map<string, PartitionOffset[]>();
      // Sequential on purpose: a background task should not burst the store at commit time. A
      // store read can settle without leaving the microtask queue (LMDB reads are synchronous), so
      // the loop gives the event loop back every few groups: clients and /healthz go first.
      for (const [i, group] of selected.entries()) {
        committed.set(group, await this.opts.store.fetch(group, null));
        if (i % YIELD_EVERY_GROUPS === YIELD_EVERY_GROUPS - 1) await nextTurn();
      }
      const partitions = uniquePartitions(committed);
      const logEnds = await fetchLogEndOffsets(this.opts.cluster, partitions);
      if (logEnds.missing.length > 0) {
        this.opts.log.debug('lag: partitions without log-end offset', {
          count: logEnds.missing.length,
          first: logEnds.missing[0],
        });
      }
      const rows = computeLag(committed, logEnds.offsets, logEnds.partitionsOf);
      const members = this.opts.members ? await this.opts.members(selected) : new Map<string, number>();
      if (truncated > 0 && !this.warnedTruncated) {
        this.warnedTruncated = true;
        this.opts.log.warn('lag: more groups than lag-max-groups; the rest get no lag series', {
          exported: selected.length,
          truncated,
        });
      }
      // Renewed right before publishing: a refresh may outlast a lease another proxy then took.
      if (!(await this.holdsLease())) {
        this.exporter.set(0);
        this.publish([], 0, new Map());
        return true;
      }
      this.publish(rows, truncated, members);
      return true;
    } catch (err) {
      this.refreshErrors.inc();
      this.opts.log.warn('lag refresh failed', { error: err });
      return false;
    } finally {
      end();
    }
  }

  /** Synchronous: replaces every lag series at once. */
  private publish(rows: LagRow[], truncated: number, members: ReadonlyMap<string, number>): void {
    this.currentOffset.reset();
    this.currentOffsetSum.reset();
    this.lag.reset();
    this.lagSum.reset();
    this.logEnd.reset();
    this.members.reset();
    for (const r of rows) {
      const partition = String(r.partition);
      this.currentOffset.labels(r.group, r.topic, partition).set(Number(r.committed));
      if (r.lag !== undefined) this.lag.labels(r.group, r.topic, partition).set(Number(r.lag));
      if (r.logEnd !== undefined) this.logEnd.labels(r.topic, partition).set(Number(r.logEnd));
    }
    for (const s of currentOffsetSums(rows))
      this.currentOffsetSum.labels(s.group, s.topic).set(Number(s.sum));
    for (const s of lagSums(rows)) this.lagSum.labels(s.group, s.topic).set(Number(s.sum));
    for (const [g, n] of members) this.members.labels(g).set(n);
    this.groupsTruncated.set(truncated);
    this.lastSuccess.set(this.now() / 1000);
    this.rows = rows.filter((r) => !r.uncommitted);
  }
}

function uniquePartitions(committed: ReadonlyMap<string, readonly PartitionOffset[]>): TopicPartition[] {
  const seen = new Map<string, TopicPartition>();
  for (const offsets of committed.values()) {
    for (const o of offsets)
      seen.set(`${o.topic}\u0000${o.partition}`, { topic: o.topic, partition: o.partition });
  }
  return [...seen.values()];
}
