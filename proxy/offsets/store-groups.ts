/**
 * The groups whose offsets live in the store, as group tools need to see them: which have
 * offsets, which protocol their members last used (a streams group's topology), and which broker
 * coordinates each. A broker
 * forgets an empty group once it holds none of its offsets (the offsets are here, not in
 * `__consumer_offsets`), so ListGroups and DescribeGroups answers are completed from this.
 *
 * One snapshot serves every broker's ListGroups of a round (AdminClient and kafka_exporter ask all
 * brokers at once) and is rebuilt at most every `ttlMs`; the walk over the store gives the event
 * loop back every few groups.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { GroupProtocol, OffsetStore, StreamsTopology } from '../../backends/store.js';

export interface StoreGroup {
  group: string;
  /** What the store recorded of the group's members: null when none ever joined (a "simple" group). */
  protocol: GroupProtocol | null;
  /** A streams group's topology (streams-topologies.ts); absent for other groups. */
  streams?: StreamsTopology;
}

export interface CoordinatorSource {
  coordinatorsOf(groups: readonly string[]): Promise<Map<string, number>>;
}

const YIELD_EVERY = 50;

export class StoreGroupIndex {
  private snapshot: { at: number; groups: Map<string, StoreGroup> } | null = null;
  private building: Promise<Map<string, StoreGroup>> | null = null;
  private readonly coordinators = new Map<string, { nodeId: number; at: number }>();

  constructor(
    private readonly store: Pick<OffsetStore, 'listGroups' | 'fetch' | 'getGroup'>,
    private readonly cluster: CoordinatorSource,
    private readonly ttlMs = 5_000,
    private readonly coordinatorTtlMs = 30_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Every group with at least one stored offset. */
  async groups(): Promise<Map<string, StoreGroup>> {
    const s = this.snapshot;
    if (s !== null && this.now() - s.at < this.ttlMs) return s.groups;
    this.building ??= this.build().finally(() => (this.building = null));
    return this.building;
  }

  /** The stored group, when it has offsets (from the current snapshot). */
  async get(group: string): Promise<StoreGroup | undefined> {
    return (await this.groups()).get(group);
  }

  /** Forgets a group at once (deleted through the proxy). */
  drop(group: string): void {
    this.snapshot?.groups.delete(group);
  }

  private async build(): Promise<Map<string, StoreGroup>> {
    const out = new Map<string, StoreGroup>();
    for (const [i, group] of (await this.store.listGroups()).entries()) {
      if (i % YIELD_EVERY === YIELD_EVERY - 1) await nextTurn();
      const [offsets, state] = await Promise.all([this.store.fetch(group, null), this.store.getGroup(group)]);
      if (offsets.length > 0)
        out.set(group, {
          group,
          protocol: state?.protocol ?? null,
          ...(state?.streams ? { streams: state.streams } : {}),
        });
    }
    this.snapshot = { at: this.now(), groups: out };
    return out;
  }

  /** Broker node id coordinating each group (unknown ones left out), cached per group. */
  async coordinatorsOf(groups: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const missing: string[] = [];
    const t = this.now();
    for (const g of groups) {
      const c = this.coordinators.get(g);
      if (c !== undefined && t - c.at < this.coordinatorTtlMs) out.set(g, c.nodeId);
      else missing.push(g);
    }
    if (missing.length > 0) {
      for (const [g, nodeId] of await this.cluster.coordinatorsOf(missing)) {
        out.set(g, nodeId);
        this.coordinators.set(g, { nodeId, at: t });
      }
      if (this.coordinators.size > 100_000) this.coordinators.clear();
    }
    return out;
  }
}
