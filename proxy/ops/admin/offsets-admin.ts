/**
 * Operator actions on stored offsets, shared by the `offsets` CLI and the admin HTTP API: read a
 * group's offsets, set one with an optional expected value (compare-and-set), delete, and move
 * offsets between the cluster and a store as JSON lines.
 *
 * Writes behave as Kafka's own tools against a broker: a set or an import commits with the admin
 * identity (generation -1, no member), which the store's guard refuses, in the same atomic step
 * as the write, while the group has live members; a delete is refused then too (OffsetDelete's
 * GROUP_SUBSCRIBED_TO_TOPIC, DeleteGroups' NON_EMPTY_GROUP). Before a refusal is reported the
 * broker is asked, when there is one, whether the group is really not empty. `force` writes
 * without these checks.
 */
import { randomUUID } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type {
  CommitIdentity,
  CommitOutcome,
  CommitRequest,
  OffsetStore,
  OffsetWrite,
  PartitionOffset,
  TopicPartition,
} from '../../../backends/store.js';
import { ErrorCode } from '../../../protocol/error-codes.js';
import { ApiKey } from '../../../protocol/messages/api-info.js';
import { defaultListGroupsRequest } from '../../../protocol/messages/list-groups-request.js';
import type { ClusterClient } from '../../client/cluster-client.js';
import type { BrokerLookups } from '../../offsets/broker-lookups.js';
import { mirrorCommit } from '../../offsets/commit-mirror.js';
import { commitAnonymous, emptyAtBroker } from '../../offsets/empty-at-broker.js';

/** One line of an export: one partition's committed offset. */
export interface OffsetLine {
  group: string;
  topic: string;
  partition: number;
  offset: string;
  leaderEpoch: number;
  metadata: string;
  commitTimestamp: string;
}

export class AdminError extends Error {
  constructor(
    message: string,
    /** Process exit code for the CLI, HTTP status family for the API. */
    readonly kind: 'bad-input' | 'conflict' | 'unavailable',
  ) {
    super(message);
    this.name = 'AdminError';
  }
}

/** Refused because the groups have live members; `force` would have written. */
export class GroupNotEmptyError extends AdminError {
  constructor(
    readonly groups: string[],
    /** What was done before the refusal (an import writes the other groups). */
    done = '',
  ) {
    const one = groups.length === 1;
    super(
      `${done}${one ? 'group' : 'groups'} ${groups.join(', ')} ${one ? 'has' : 'have'} live members ` +
        `(consumers running); ${one ? 'its' : 'their'} offsets are unchanged`,
      'conflict',
    );
    this.name = 'GroupNotEmptyError';
  }
}

/** How an admin write treats a group's live members. */
export interface AdminGuard {
  /** Write even while the group has live members, without the guard (the running consumers keep their positions). */
  force?: boolean;
  /**
   * Asks the broker whether the group is empty, before a refusal because of members the store
   * knows is reported. Absent: no cluster to ask, the store's members stand.
   */
  groupIsEmptyAtBroker?: (group: string) => Promise<boolean>;
}

/** Who an admin tool commits as (kafka-consumer-groups, Admin.alterConsumerGroupOffsets). */
const ADMIN_IDENTITY: CommitIdentity = {
  generationIdOrMemberEpoch: -1,
  memberId: '',
  groupInstanceId: null,
  requestVersion: 9,
};

/** A commit as an admin tool makes it: guarded unless forced. */
function adminCommit(
  store: OffsetStore,
  request: Omit<CommitRequest, 'identity'>,
  guard: AdminGuard,
): Promise<CommitOutcome> {
  if (guard.force) return store.commit(request);
  return commitAnonymous(store, { ...request, identity: ADMIN_IDENTITY }, guard.groupIsEmptyAtBroker);
}

export function toLine(group: string, o: PartitionOffset): OffsetLine {
  return {
    group,
    topic: o.topic,
    partition: o.partition,
    offset: o.offset.toString(),
    leaderEpoch: o.leaderEpoch,
    metadata: o.metadata,
    commitTimestamp: o.commitTimestamp.toString(),
  };
}

function lineToWrite(l: OffsetLine): OffsetWrite {
  return {
    topic: l.topic,
    partition: l.partition,
    offset: BigInt(l.offset),
    leaderEpoch: l.leaderEpoch,
    metadata: l.metadata,
    commitTimestamp: BigInt(l.commitTimestamp),
    expireTimestamp: -1n,
  };
}

/** Lines by group, in first-seen order. */
export function byGroup(lines: OffsetLine[]): Map<string, OffsetLine[]> {
  const groups = new Map<string, OffsetLine[]>();
  for (const l of lines) {
    const list = groups.get(l.group);
    if (list) list.push(l);
    else groups.set(l.group, [l]);
  }
  return groups;
}

/** Called as work advances: `done` of `total` units (groups for exports, offsets for imports). */
export type OnProgress = (done: number, total: number) => void;

/** Groups read from the store at once by exports and listings (network stores answer in parallel). */
const READ_CONCURRENCY = 8;

/**
 * Runs `work` on every item, at most `limit` at a time; results in the items' order. Store reads
 * may settle within the microtask queue: the event loop is given back every 50 items.
 */
async function mapLimited<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]!);
      if (i % 50 === 49) await nextTurn();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** One group of a store, as `offsets groups` lists it. */
export interface GroupSummary {
  group: string;
  partitions: number;
  /** Milliseconds since the epoch of the newest commit; null when the group has no offsets. */
  lastCommit: number | null;
}

export async function groupSummaries(store: OffsetStore, onProgress?: OnProgress): Promise<GroupSummary[]> {
  const names = (await store.listGroups()).sort();
  let done = 0;
  return mapLimited(names, READ_CONCURRENCY, async (group) => {
    const offsets = await store.fetch(group, null);
    let last: bigint | null = null;
    for (const o of offsets) if (last === null || o.commitTimestamp > last) last = o.commitTimestamp;
    onProgress?.(++done, names.length);
    return { group, partitions: offsets.length, lastCommit: last === null ? null : Number(last) };
  });
}

function compareLines(a: OffsetLine, b: OffsetLine): number {
  if (a.group !== b.group) return a.group < b.group ? -1 : 1;
  if (a.topic !== b.topic) return a.topic < b.topic ? -1 : 1;
  return a.partition - b.partition;
}

/** Sorted, so that export → import → export gives the same file. */
export function sortLines(lines: OffsetLine[]): OffsetLine[] {
  return lines.sort(compareLines);
}

export async function getOffsets(store: OffsetStore, group: string, topic?: string): Promise<OffsetLine[]> {
  const offsets = await store.fetch(group, null);
  return sortLines(
    offsets.filter((o) => topic === undefined || o.topic === topic).map((o) => toLine(group, o)),
  );
}

export interface SetOffset {
  group: string;
  topic: string;
  partition: number;
  offset: bigint;
  /** Compare-and-set: the offset must currently be this (-1 = none). */
  expected?: bigint;
  metadata?: string;
}

/**
 * Sets one offset like an admin tool's commit (no member identity): refused with
 * GroupNotEmptyError while the group has live members, unless forced. With `expected`, it is a
 * compare-and-set as well; a mismatch throws AdminError('conflict'). A refusal changes nothing.
 */
export async function setOffset(store: OffsetStore, s: SetOffset, guard: AdminGuard = {}): Promise<void> {
  if (s.offset < -1n) throw new AdminError(`offset must be >= 0, got ${s.offset}`, 'bad-input');
  const request = {
    group: s.group,
    requestId: `admin-set-${randomUUID()}`,
    writes: [
      {
        topic: s.topic,
        partition: s.partition,
        offset: s.offset,
        leaderEpoch: -1,
        metadata: s.metadata ?? '',
        commitTimestamp: BigInt(Date.now()),
        expireTimestamp: -1n,
        ...(s.expected !== undefined ? { expectedOffset: s.expected } : {}),
      },
    ],
  };
  const outcome = await adminCommit(store, request, guard);
  if (outcome.status === 'cas-mismatch') {
    const m = outcome.mismatches[0]!;
    throw new AdminError(
      `${s.group} ${s.topic}-${s.partition}: expected offset ${m.expected}, but it is ${m.actual}; nothing changed`,
      'conflict',
    );
  }
  if (outcome.status === 'fenced') throw new GroupNotEmptyError([s.group]);
  if (outcome.status === 'transactional') throw transactionalGroup(s.group);
}

/** A guarded admin write to a group whose offsets the broker holds (it commits transactionally). */
function transactionalGroup(group: string): AdminError {
  return new AdminError(
    `${group} commits transactionally: its offsets are the broker's; reset them with a Kafka tool through the proxy (or --force writes the store's, which the broker's hide); nothing changed`,
    'conflict',
  );
}

/**
 * Deletes the listed partitions' offsets, or the whole group (offsets and membership record).
 * Refused with GroupNotEmptyError while the group has live members, unless forced: the proxy does
 * not track subscriptions, so every topic counts as subscribed. The check and the delete are two
 * steps, not one atomic step as a commit's guard is: a member joining in between keeps the
 * position it has fetched and commits it again.
 */
export async function deleteOffsets(
  store: OffsetStore,
  group: string,
  partitions?: TopicPartition[],
  guard: AdminGuard = {},
): Promise<void> {
  if (!guard.force) {
    const members = (await store.getGroup(group))?.members.length ?? 0;
    if (members > 0 && !(await emptyAtBroker(store, group, guard.groupIsEmptyAtBroker)))
      throw new GroupNotEmptyError([group]);
  }
  if (partitions === undefined) await store.deleteGroup(group);
  else await store.deleteOffsets(group, partitions);
}

/** Every stored offset of the groups (all groups when none are named). */
export async function exportFromStore(
  store: OffsetStore,
  groups?: string[],
  onProgress?: OnProgress,
): Promise<OffsetLine[]> {
  const names = groups && groups.length > 0 ? groups : await store.listGroups();
  let done = 0;
  const perGroup = await mapLimited(names, READ_CONCURRENCY, async (group) => {
    const lines = await getOffsets(store, group);
    onProgress?.(++done, names.length);
    return lines;
  });
  return sortLines(perGroup.flat());
}

/**
 * Writes the lines into the store, keeping their commit timestamps, one group at a time (each
 * group all or nothing). A group with live members is left as it is unless forced; the other
 * groups are written, then GroupNotEmptyError names the refused ones.
 */
export async function importToStore(
  store: OffsetStore,
  lines: OffsetLine[],
  guard: AdminGuard = {},
  onProgress?: OnProgress,
): Promise<number> {
  let written = 0;
  let done = 0;
  const refused: string[] = [];
  for (const [group, ls] of byGroup(lines)) {
    const outcome = await adminCommit(
      store,
      { group, requestId: `admin-import-${randomUUID()}`, writes: ls.map(lineToWrite) },
      guard,
    );
    if (outcome.status === 'fenced') refused.push(group);
    else if (outcome.status === 'transactional') throw transactionalGroup(group);
    else if (outcome.status !== 'ok')
      throw new AdminError(`import of group ${group} refused (${outcome.status})`, 'conflict');
    else written += ls.length;
    done += ls.length;
    onProgress?.(done, lines.length);
  }
  if (refused.length > 0) throw new GroupNotEmptyError(refused, `imported ${written} offsets; `);
  return written;
}

/** Groups every broker coordinates (ListGroups is per broker). */
export async function listClusterGroups(cluster: ClusterClient): Promise<string[]> {
  const md = await cluster.metadata([]);
  const names = new Set<string>();
  for (const b of md.brokers) {
    const { body } = await cluster.request(b.nodeId, ApiKey.ListGroups, defaultListGroupsRequest(), 4);
    if (body.errorCode !== ErrorCode.NONE)
      throw new AdminError(
        `ListGroups on broker ${b.nodeId} failed (error ${body.errorCode})`,
        'unavailable',
      );
    for (const g of body.groups) names.add(g.groupId);
  }
  return [...names].sort();
}

/** The offsets the cluster's group coordinators hold, for a move onto a store. */
export async function exportFromCluster(
  cluster: ClusterClient,
  lookups: BrokerLookups,
  groups?: string[],
  onProgress?: OnProgress,
): Promise<OffsetLine[]> {
  const names = groups && groups.length > 0 ? groups : await listClusterGroups(cluster);
  const lines: OffsetLine[] = [];
  const now = BigInt(Date.now());
  for (const [i, group] of names.entries()) {
    onProgress?.(i, names.length);
    const fetched = await lookups.fetchOffsets(group, null, false);
    if (fetched.errorCode !== ErrorCode.NONE) {
      throw new AdminError(
        `OffsetFetch of group ${group} failed (error ${fetched.errorCode})`,
        'unavailable',
      );
    }
    for (const t of fetched.topics) {
      for (const p of t.partitions) {
        if (p.committedOffset < 0n) continue;
        lines.push(
          toLine(group, {
            topic: t.name,
            partition: p.partitionIndex,
            offset: p.committedOffset,
            leaderEpoch: p.committedLeaderEpoch,
            metadata: p.metadata ?? '',
            commitTimestamp: now,
            expireTimestamp: -1n,
          }),
        );
      }
    }
  }
  return sortLines(lines);
}

/** Commits the lines at the cluster's coordinators, as an admin tool does (the group must be empty there). */
export async function importToCluster(
  lookups: BrokerLookups,
  lines: OffsetLine[],
  onProgress?: OnProgress,
): Promise<number> {
  let done = 0;
  for (const [group, ls] of byGroup(lines)) {
    const refused = await mirrorCommit(
      lookups,
      group,
      { generationIdOrMemberEpoch: -1, memberId: '', groupInstanceId: null },
      ls.map(lineToWrite),
    );
    if (refused > 0)
      throw new AdminError(
        `the cluster refused ${refused} partitions of group ${group} (is it empty?)`,
        'conflict',
      );
    done += ls.length;
    onProgress?.(done, lines.length);
  }
  return lines.length;
}

/** Parses JSON lines, naming the first bad line. */
export function parseLines(text: string): OffsetLine[] {
  const out: OffsetLine[] = [];
  const rows = text.split('\n');
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!.trim();
    if (row === '') continue;
    let v: unknown;
    try {
      v = JSON.parse(row);
    } catch {
      throw new AdminError(`line ${i + 1}: not JSON`, 'bad-input');
    }
    const l = v as Partial<OffsetLine>;
    const ok =
      typeof l.group === 'string' &&
      typeof l.topic === 'string' &&
      Number.isInteger(l.partition) &&
      (l.partition as number) >= 0 &&
      typeof l.offset === 'string' &&
      /^-?\d+$/.test(l.offset);
    if (!ok)
      throw new AdminError(
        `line ${i + 1}: needs group, topic, partition (>= 0) and offset (a decimal string)`,
        'bad-input',
      );
    out.push({
      group: l.group!,
      topic: l.topic!,
      partition: l.partition!,
      offset: l.offset!,
      leaderEpoch: typeof l.leaderEpoch === 'number' ? l.leaderEpoch : -1,
      metadata: typeof l.metadata === 'string' ? l.metadata : '',
      commitTimestamp:
        typeof l.commitTimestamp === 'string' && /^\d+$/.test(l.commitTimestamp)
          ? l.commitTimestamp
          : String(Date.now()),
    });
  }
  return out;
}

export function formatLines(lines: OffsetLine[]): string {
  return lines.map((l) => JSON.stringify(l)).join('\n') + (lines.length > 0 ? '\n' : '');
}
