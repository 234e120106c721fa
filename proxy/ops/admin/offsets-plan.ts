/**
 * `--dry-run` of the offsets CLI: what `set`, `import` and `delete` would change, read from the
 * store and written nowhere (not even the membership record a real run corrects when the broker
 * says a group is empty). A plan says, per partition, the stored offset and the new one, and which
 * groups a real run would refuse (live members, a compare-and-set that does not match).
 */
import type { OffsetStore, TopicPartition } from '../../../backends/store.js';
import type { AdminGuard, OffsetLine, SetOffset } from './offsets-admin.js';
import { byGroup } from './offsets-admin.js';

export interface PlanChange {
  group: string;
  topic: string;
  partition: number;
  /** null: nothing stored. */
  from: bigint | null;
  /** null: deleted. */
  to: bigint | null;
}

export interface Plan {
  changes: PlanChange[];
  /** Partitions whose stored offset already is the one given. */
  unchanged: number;
  /** What a real run would refuse, one line each ("group g has live members ..."). */
  refusals: string[];
  /** A whole group's membership record would go too (delete of a whole group). */
  groupsDeleted: string[];
}

/** Whether a real run would refuse `group` for its live members (the broker asked, if given). */
async function refusedForMembers(
  store: OffsetStore,
  group: string,
  guard: AdminGuard,
): Promise<string | null> {
  if (guard.force) return null;
  const members = (await store.getGroup(group))?.members.length ?? 0;
  if (members === 0) return null;
  if (guard.groupIsEmptyAtBroker && (await guard.groupIsEmptyAtBroker(group).catch(() => false))) return null;
  return `group ${group} has live members (consumers running): refused unless --force`;
}

async function stored(store: OffsetStore, group: string, partitions: TopicPartition[] | null) {
  const key = (tp: TopicPartition) => `${tp.topic}\u0000${tp.partition}`;
  return new Map((await store.fetch(group, partitions)).map((o) => [key(o), o.offset]));
}

const tpKey = (topic: string, partition: number) => `${topic}\u0000${partition}`;

export async function planSet(store: OffsetStore, s: SetOffset, guard: AdminGuard): Promise<Plan> {
  const current = (await stored(store, s.group, [{ topic: s.topic, partition: s.partition }])).get(
    tpKey(s.topic, s.partition),
  );
  const refusals: string[] = [];
  const members = await refusedForMembers(store, s.group, guard);
  if (members !== null) refusals.push(members);
  if (s.expected !== undefined && (current ?? -1n) !== s.expected)
    refusals.push(
      `${s.group} ${s.topic}-${s.partition}: expected offset ${s.expected}, but it is ${current ?? -1n}`,
    );
  const change = {
    group: s.group,
    topic: s.topic,
    partition: s.partition,
    from: current ?? null,
    to: s.offset,
  };
  return {
    changes: current === s.offset ? [] : [change],
    unchanged: current === s.offset ? 1 : 0,
    refusals,
    groupsDeleted: [],
  };
}

export async function planImport(store: OffsetStore, lines: OffsetLine[], guard: AdminGuard): Promise<Plan> {
  const plan: Plan = { changes: [], unchanged: 0, refusals: [], groupsDeleted: [] };
  for (const [group, ls] of byGroup(lines)) {
    const members = await refusedForMembers(store, group, guard);
    if (members !== null) plan.refusals.push(members);
    const current = await stored(store, group, null);
    for (const l of ls) {
      const from = current.get(tpKey(l.topic, l.partition)) ?? null;
      const to = BigInt(l.offset);
      if (from === to) plan.unchanged++;
      else plan.changes.push({ group, topic: l.topic, partition: l.partition, from, to });
    }
  }
  return plan;
}

export async function planDelete(
  store: OffsetStore,
  group: string,
  partitions: TopicPartition[] | undefined,
  guard: AdminGuard,
): Promise<Plan> {
  const members = await refusedForMembers(store, group, guard);
  const current = await store.fetch(group, partitions ?? null);
  const known = partitions !== undefined || current.length > 0 || (await store.getGroup(group)) !== null;
  return {
    changes: current.map((o) => ({
      group,
      topic: o.topic,
      partition: o.partition,
      from: o.offset,
      to: null,
    })),
    unchanged: 0,
    refusals: members === null ? [] : [members],
    groupsDeleted: partitions === undefined && known ? [group] : [],
  };
}

/** The plan as the CLI prints it: one line per change, then a summary line. */
export function formatPlan(plan: Plan): string[] {
  const out = plan.changes.map(
    (c) =>
      `would ${c.to === null ? 'delete' : 'set'} ${c.group} ${c.topic}-${c.partition}: ` +
      `${c.from ?? '(none)'} -> ${c.to ?? '(deleted)'}`,
  );
  for (const g of plan.groupsDeleted) out.push(`would delete group ${g} (its offsets and membership record)`);
  for (const r of plan.refusals) out.push(`would be refused: ${r}`);
  out.push(
    `dry run: ${plan.changes.length} offset${plan.changes.length === 1 ? '' : 's'} would change` +
      `${plan.unchanged > 0 ? `, ${plan.unchanged} already as given` : ''}; nothing was written`,
  );
  return out;
}
