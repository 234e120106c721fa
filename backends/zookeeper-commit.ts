/**
 * One commit of the ZooKeeper store: read, judge (commit-guard.ts), and apply in one multi, or in
 * several when it would not fit in one.
 *
 * A commit reads the group state and the partitions' znodes, judges them and applies everything
 * in ONE multi that also `check`s the state znode's version and `setData`s each partition with
 * the version it read: any change in between fails the multi, and the commit starts over; a multi
 * that arrives late (its caller answered) cannot overwrite a later commit. A commit whose multi
 * would exceed maxMultiBytes (6,000 new partitions are about 1.7 MB) is applied in several
 * multis, in order (zookeeper-multi.ts):
 * - every one carries the fence: the `check` of the state znode's version (the first one
 *   creates the state when there is none), so a membership change between two of them fails the
 *   later one and the commit is judged again from fresh reads;
 * - the compare-and-set partitions come first, so when they fit in the first multi (a few
 *   thousand) every compare-and-set is decided together with the fence, and a mismatch writes
 *   nothing;
 * - the request marker is in the last one only: the commit counts as applied once all are.
 * Each multi is atomic, the commit is not: a refusal after the first multi applied (the fence
 * after a membership change, a compare-and-set in a later multi, the deadline) leaves the
 * partitions of the applied ones written. A retry within one commit (BAD_VERSION, a lost
 * connection) re-reads and re-judges only the partitions that no answered multi wrote. Those of
 * a multi whose answer was lost may have been written: a compare-and-set among them that finds
 * its partition holding exactly what this request writes (the offset, and the metadata znode
 * with its commit timestamp) counts as matched, as that is our own write; the retry then writes
 * the same values again.
 *
 * Every partition that exists is written with the version this attempt read (a new one is
 * created, which fails if it exists by then), so a multi is fenced against every later write of
 * its partitions as well as against membership changes. A multi of an attempt whose caller was
 * already answered (sent before the deadline, held by a frozen server or a slow connection,
 * applied later) therefore fails BAD_VERSION or NODE_EXISTS when any later commit wrote one of
 * its partitions: it can never overwrite a later commit. Where it applies, no commit touched
 * its partitions or the group's membership since it read them. No multi is sent after the
 * deadline (ZooKeeperSession.write). The partitions, not the state znode, carry the fence so that
 * members of one group committing their own partitions do not fail each other's multis (a setData
 * of the state in every multi cut 32 concurrent committers of one group from ~600 to ~50
 * commits/s).
 *
 * The library turns version 0 into -1 ("any") inside a transaction, so a check against a fresh
 * znode would silently pass: every znode we create is created AND setData'd in the same multi,
 * leaving it at version 1, and a version-0 znode somebody else made is bumped by a plain setData
 * (not affected by the bug) before we rely on its version. The multi also creates the request's
 * marker znode: after a lost connection the commit reads it back to learn whether it applied, and
 * a retry of an applied commit fails on it (NODE_EXISTS) instead of applying twice.
 */
import { Exception } from 'node-zookeeper-client';
import type { Client, Stat } from 'node-zookeeper-client';
import { decideCommit } from './commit-guard.js';
import { checkOrder, isSuperseded } from './commit-order.js';
import type { CommitOrder } from './commit-order.js';
import { StoreUnavailableError } from './errors.js';
import { decodeOutcome, encodeOutcome } from './outcome-codec.js';
import type { EncodedOutcome } from './outcome-codec.js';
import type { CommitOutcome, CommitRequest, GroupState, OffsetWrite } from './store.js';
import { splitMulti, toTransaction } from './zookeeper-multi.js';
import type { MultiFrame, MultiOp, MultiPlan } from './zookeeper-multi.js';
import { code, Retry } from './zookeeper-session.js';
import type { ZooKeeperSession } from './zookeeper-session.js';
import { encodeSegment, metaData, parseOffset, parseState, storedOrder, tpKey } from './zookeeper-znodes.js';
import type { Read, ZooKeeperZnodes } from './zookeeper-znodes.js';

/** What one commit's multis are built from: the reads of one attempt and its verdict. */
export interface CommitMultiInput {
  znodes: ZooKeeperZnodes;
  group: string;
  /** The request marker's path, and the outcome it records. */
  marker: string;
  outcome: CommitOutcome;
  /** The group record to write (decideCommit's, for an accepted commit). */
  newState: GroupState | null;
  /** The state znode as read (null: there is none yet). */
  stateRead: Read | null;
  /** The partitions to write, each with its offset znode as read and whether its metadata znode exists. */
  writes: OffsetWrite[];
  reads: (Read | null)[];
  metaExists: boolean[];
  /** Which of `writes` are compare-and-sets: they go first when the commit is split. */
  compareAndSet: boolean[];
  maxMultiBytes: number;
  /** The commit's read order, recorded in each metadata znode (CommitRequest.order). */
  order?: CommitOrder;
}

/**
 * The multis applying one judged commit, in order; each plan's `units` index into `writes`.
 * The first creates the state znode or checks its version, the later ones check it (at the
 * version read, or 1 where the first created it), the last creates the request marker.
 */
export function commitMultis(input: CommitMultiInput): MultiPlan[] {
  const { znodes, group, stateRead, writes, compareAndSet, maxMultiBytes } = input;
  const statePath = znodes.state(group);
  const stateData = Buffer.from(JSON.stringify(input.newState));
  const frame: MultiFrame = {
    firstHead:
      stateRead === null
        ? [
            { type: 'create', path: statePath, data: stateData },
            { type: 'setData', path: statePath, data: stateData, version: -1 },
          ]
        : [{ type: 'check', path: statePath, version: stateRead.stat.version }],
    // The multis after the first: the state znode is at the version read, or at 1 if the first created it.
    head: [{ type: 'check', path: statePath, version: stateRead?.stat.version ?? 1 }],
    tail: [
      { type: 'create', path: input.marker, data: Buffer.from(JSON.stringify(encodeOutcome(input.outcome))) },
    ],
  };
  const units = writes.map((w, i) =>
    partitionOps(znodes, group, w, input.reads[i] ?? null, input.metaExists[i] ?? false, input.order),
  );
  const multis = splitMulti(units, frame, maxMultiBytes);
  if (multis.length === 1 || !compareAndSet.some(Boolean)) return multis;
  // Compare-and-sets first (see the file comment); the sort is stable.
  const ranked = [...units.keys()].sort((a, b) => Number(compareAndSet[b]) - Number(compareAndSet[a]));
  return splitMulti(
    ranked.map((i) => units[i]!),
    frame,
    maxMultiBytes,
  ).map((m) => ({ ops: m.ops, units: m.units.map((j) => ranked[j]!) }));
}

/** The ops writing one partition: its offset znode and its metadata znode. */
function partitionOps(
  znodes: ZooKeeperZnodes,
  group: string,
  w: OffsetWrite,
  read: Read | null,
  metaExists: boolean,
  order: CommitOrder | undefined,
): MultiOp[] {
  const path = znodes.offset(group, w);
  const data = Buffer.from(String(w.offset));
  const ops: MultiOp[] =
    read === null
      ? // create + setData: the znode starts at version 1 (see the version-0 bug above), and its
        // first write is a real setData (Burrow reads the mtime).
        [
          { type: 'create', path, data },
          { type: 'setData', path, data, version: -1 },
        ]
      : // The version read: a later commit of this partition fails this multi (see above).
        [{ type: 'setData', path, data, version: read.stat.version }];
  // A metadata znode may be left over from a deleted offset, or missing beside a Kafka 0.8 offset.
  const meta = { path: znodes.meta(group, w), data: metaData(w, order) };
  ops.push(metaExists ? { type: 'setData', ...meta, version: -1 } : { type: 'create', ...meta });
  return ops;
}

export interface ZooKeeperCommitContext {
  session: ZooKeeperSession;
  znodes: ZooKeeperZnodes;
  maxMultiBytes: number;
  /** Told the marker of each commit this process applied (removed after the TTL). */
  applied(marker: string): void;
}

/** Applies one commit: attempts until one succeeds or the deadline passes (ZooKeeperSession.run). */
export function commitToZooKeeper(
  ctx: ZooKeeperCommitContext,
  request: CommitRequest,
): Promise<CommitOutcome> {
  try {
    checkOrder(request.order);
  } catch (err) {
    return Promise.reject(err as Error);
  }
  const commit = new ZooKeeperCommit(ctx, request);
  return ctx.session.run('commit', (expired) => commit.attempt(expired));
}

/** One commit's state across its attempts. */
class ZooKeeperCommit {
  private readonly group: string;
  private readonly marker: string;
  /** The index of each partition's last write: a request naming one twice, the last one wins. */
  private readonly last = new Map<string, number>();
  private readonly casAny = new Set<string>();
  /** Each partition once, in the order of its last write. */
  private readonly order: string[];
  /** Whether an attempt met a surprise: the next one checks each metadata znode's existence. */
  private checkMeta = false;
  /** Partitions written by an answered multi of this commit, and by one whose answer was lost. */
  private readonly written = new Set<string>();
  private readonly inDoubt = new Set<string>();

  constructor(
    private readonly ctx: ZooKeeperCommitContext,
    private readonly request: CommitRequest,
  ) {
    this.group = request.group;
    this.marker = ctx.znodes.requestMarker(request.group, request.requestId);
    // A request naming one partition twice: the last write wins (as in the other stores), and
    // the multi must touch each znode once (a second create would fail NODE_EXISTS forever).
    request.writes.forEach((w, i) => {
      this.last.set(tpKey(w), i);
      if (w.expectedOffset !== undefined) this.casAny.add(tpKey(w));
    });
    this.order = [...this.last.entries()].sort((a, b) => a[1] - b[1]).map(([k]) => k);
  }

  async attempt(expired: () => boolean): Promise<CommitOutcome> {
    const { session, znodes } = this.ctx;
    const { group } = this;
    const client = await session.connected(expired);
    const keys = this.written.size === 0 ? this.order : this.order.filter((k) => !this.written.has(k));
    const writes = keys.map((k) => this.request.writes[this.last.get(k)!]!);
    // Applied before (a resend, or our own attempt whose answer was lost)? Asked in the same round
    // trip as the reads the commit is judged on, so that a commit is two round trips (reads,
    // multi), not three: a session's requests are answered in order, behind its writes in flight,
    // so at load every round trip waits for other commits' fsyncs, and a commit that passes the
    // store's deadline is answered REQUEST_TIMED_OUT (docs/stores.md, ZooKeeper).
    const [prior, all] = await Promise.all([session.read(client, this.marker), this.readAll(client, writes)]);
    const { stateRead, reads } = all;
    if (prior !== null)
      return decodeOutcome(JSON.parse(prior.data?.toString('utf8') ?? '') as EncodedOutcome);
    const state = parseState(group, stateRead);
    const readOf = new Map(keys.map((k, i) => [k, reads[i] ?? null]));
    const own = await this.holdingOwnWrite(client, writes, reads);
    const judged =
      this.written.size === 0 && own.size === 0
        ? this.request
        : {
            ...this.request,
            writes: this.request.writes
              .filter((w) => !this.written.has(tpKey(w)))
              .map((w) => (own.has(tpKey(w)) ? { ...w, expectedOffset: undefined } : w)),
          };
    const decided = decideCommit(state, judged, (tp) => {
      const r = readOf.get(tpKey(tp));
      return r === null || r === undefined ? -1n : parseOffset(group, tp, r);
    });
    const { newState } = decided;
    if (decided.outcome.status !== 'ok') return decided.outcome;
    // Judged whole (fence, compare-and-sets); then the partitions a commit this process read
    // later has written are left out (commit-order.ts), and the outcome says how many.
    const kept = this.unsuperseded(keys, all);
    const superseded = keys.length - kept.length;
    const outcome: CommitOutcome = superseded > 0 ? { status: 'ok', superseded } : decided.outcome;
    const pick = <T>(xs: T[]): T[] => (superseded > 0 ? kept.map((i) => xs[i]!) : xs);

    await this.prepare(client, expired, stateRead, pick(writes), pick(reads));
    const multis = commitMultis({
      znodes,
      group,
      marker: this.marker,
      outcome,
      newState,
      stateRead,
      writes: pick(writes),
      reads: pick(reads),
      metaExists: pick(all.metaExists),
      compareAndSet: pick(keys).map((k) => this.casAny.has(k)),
      maxMultiBytes: this.ctx.maxMultiBytes,
      ...(this.request.order === undefined ? {} : { order: this.request.order }),
    });
    await this.apply(client, expired, pick(keys), multis);
    this.ctx.applied(this.marker);
    return outcome;
  }

  /** The indexes of `keys` whose stored order does not supersede this commit's. */
  private unsuperseded(
    keys: string[],
    all: { reads: (Read | null)[]; metas: (Read | null)[] | null },
  ): number[] {
    const order = this.request.order;
    const kept: number[] = [];
    for (let i = 0; i < keys.length; i++) {
      const stored = all.metas === null ? undefined : storedOrder(all.reads[i] ?? null, all.metas[i] ?? null);
      if (!isSuperseded(order, stored)) kept.push(i);
    }
    return kept;
  }

  /**
   * One round of pipelined reads: the state, every partition's offset znode, and its metadata
   * znode when the commit has a read order (the stored order is there), else (only on a retry
   * that met a surprise) whether each metadata znode exists.
   */
  private async readAll(
    client: Client,
    writes: OffsetWrite[],
  ): Promise<{
    stateRead: Read | null;
    reads: (Read | null)[];
    metas: (Read | null)[] | null;
    metaExists: boolean[];
  }> {
    const { session, znodes } = this.ctx;
    const { group } = this;
    const ordered = this.request.order !== undefined;
    const [stateRead, reads, metas, metaFound] = await Promise.all([
      session.read(client, znodes.state(group)),
      Promise.all(writes.map((w) => session.read(client, znodes.offset(group, w)))),
      ordered ? Promise.all(writes.map((w) => session.read(client, znodes.meta(group, w)))) : null,
      this.checkMeta && !ordered
        ? Promise.all(
            writes.map((w) =>
              session.call<Stat | null>(client, (cb) => client.exists(znodes.meta(group, w), cb)),
            ),
          )
        : null,
    ]);
    // A metadata znode exists exactly where an offset znode does (written and removed together),
    // except beside offsets a Kafka 0.8 consumer wrote, or after a deleteOffsets cut short: the
    // multi then fails with NO_NODE/NODE_EXISTS and the retry checks each one.
    const metaExists =
      metas?.map((r) => r !== null) ??
      metaFound?.map((stat) => stat !== null) ??
      reads.map((r) => r !== null);
    return { stateRead, reads, metas, metaExists };
  }

  /**
   * Of the compare-and-set partitions a multi whose answer was lost may have written, those
   * holding exactly what this request writes there: the offset znode its offset, the metadata
   * znode its JSON (commit timestamp included).
   */
  private async holdingOwnWrite(
    client: Client,
    writes: OffsetWrite[],
    reads: (Read | null)[],
  ): Promise<Set<string>> {
    const { session, znodes } = this.ctx;
    const suspect = (k: string) => this.inDoubt.has(k) && this.casAny.has(k);
    const candidates = writes.filter(
      (w, i) => suspect(tpKey(w)) && reads[i]?.data?.toString('utf8') === String(w.offset),
    );
    const metas = await Promise.all(candidates.map((w) => session.read(client, znodes.meta(this.group, w))));
    const order = this.request.order;
    return new Set(candidates.filter((w, i) => metas[i]?.data?.equals(metaData(w, order))).map(tpKey));
  }

  /** Makes the versions real (see the version-0 bug) and the parent znodes exist. */
  private async prepare(
    client: Client,
    expired: () => boolean,
    stateRead: Read | null,
    writes: OffsetWrite[],
    reads: (Read | null)[],
  ): Promise<void> {
    const { session, znodes } = this.ctx;
    const { group } = this;
    if (stateRead !== null && stateRead.stat.version === 0)
      await this.bumpFromZero(client, expired, znodes.state(group), stateRead);
    for (const [i, r] of reads.entries()) {
      if (r && r.stat.version === 0)
        await this.bumpFromZero(client, expired, znodes.offset(group, writes[i]!), r);
    }
    const topics = new Set(writes.map((w) => encodeSegment(w.topic)));
    const g = znodes.group(group);
    await Promise.all([
      session.ensureDir(client, `${g}/kop-requests`),
      ...[...topics].flatMap((t) => [
        session.ensureDir(client, `${g}/offsets/${t}`),
        session.ensureDir(client, `${g}/kop-offset-meta/${t}`),
      ]),
    ]);
  }

  /** Bumps a znode at version 0 to 1 with a plain setData, so a later versioned check in a multi is real. */
  private async bumpFromZero(
    client: Client,
    expired: () => boolean,
    path: string,
    read: Read,
  ): Promise<never> {
    try {
      await this.ctx.session.write<Stat>(client, expired, (cb) =>
        client.setData(path, read.data ?? null, 0, cb),
      );
    } catch (err) {
      if (code(err) !== Exception.BAD_VERSION && code(err) !== Exception.NO_NODE) throw err;
    }
    throw new Retry();
  }

  /** Sends the multis in order; what an answered one wrote is not written again by a retry. */
  private async apply(
    client: Client,
    expired: () => boolean,
    keys: string[],
    multis: MultiPlan[],
  ): Promise<void> {
    const { session } = this.ctx;
    for (const [n, multi] of multis.entries()) {
      const tx = toTransaction(client.transaction(), multi.ops);
      try {
        await session.write(client, expired, (cb) => tx.commit(cb));
      } catch (err) {
        if (err instanceof Retry || err instanceof StoreUnavailableError) throw err;
        const c = code(err);
        if (c === Exception.BAD_VERSION || c === Exception.NODE_EXISTS || c === Exception.NO_NODE) {
          // Something changed under us (or the parents went away): judge again from fresh reads.
          if (c === Exception.NO_NODE) session.forgetDirs();
          this.checkMeta = true;
          throw new Retry();
        }
        // CONNECTION_LOSS / SESSION_EXPIRED: the retry reads the marker back first. Without the
        // marker (not the last multi) it cannot tell whether this one applied.
        if (n < multis.length - 1) for (const i of multi.units) this.inDoubt.add(keys[i]!);
        throw err;
      }
      for (const i of multi.units) {
        this.written.add(keys[i]!);
        this.inDoubt.delete(keys[i]!);
      }
    }
  }
}
