// Differential runs of the commit guard: one scripted sequence of group requests, sent by raw
// protocol members to several targets at once (the broker itself, and the proxy on each store),
// each in its own group, in lockstep: every step runs on every target before the next begins. The
// broker's answers to every OffsetCommit and OffsetFetch (and to the group requests, whose
// differences would mean the runs drifted apart) must be the same on every target, and so must the
// committed offsets at the end.
//
// Timing is part of the script. A broker's group timers (session timeouts, the join phase's
// rebalance timeout, the wait for SyncGroup) fire by the clock, so the executor decides everything
// that depends on time once, for all targets: it inserts heartbeat ticks for the live members
// (their sessions never lapse by accident), waits out a crashed member's session as one step, and
// settles the group (a full rebalance of the live members) before a pending timer could fire
// between two steps. The state a step meets is then the same on every target.
import fc from 'fast-check';
import { ErrorCode } from '../../protocol/error-codes.js';
import {
  ANONYMOUS,
  ClassicMember,
  commitOffsets,
  Conn,
  ConsumerMember,
  deleteGroup,
  deleteOffsets,
  describeConsumerGroup,
  fetchOffsets,
  removeByInstanceId,
  setGroupConfigs,
  topicIds,
  TxnProducer,
} from './group-members.js';
import type { CommitIdentity, FetchResult, TopicRef } from './group-members.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { ApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import type { DescribeGroupsResponse } from '../../protocol/messages/describe-groups-response.js';
import type { StoreOutage } from './store-outage.js';

export type Protocol = 'classic' | 'consumer';

/**
 * Whose identity a request carries: the slot's member as it is now, as it was before its last
 * change (a zombie), or (KIP-848) now but with epoch 0, an epoch older than its join.
 */
export type As = 'current' | 'previous' | 'joining';

/** Which partitions a commit names, by what the member holds (see Step `commit`). */
export type Parts = 'kept' | 'gained' | 'other';

/** Over the 4096 bytes of metadata a broker stores (offset.metadata.max.bytes). */
const OVERSIZED_METADATA = 'x'.repeat(4097);

/** One step of a script; members are slots 0..SLOTS-1. */
export type Step =
  /** Classic: every live member rejoins and syncs until the group is Stable again. */
  | { op: 'rebalance' }
  | { op: 'heartbeat'; slot: number }
  /**
   * Commits with the member's identity (`As`). To both partitions, or (`parts`) to those the member holds now and held under that
   * identity too (`kept`), holds now only (`gained`), does not hold now (`other`). `oversized`:
   * every partition's metadata is over the broker's 4096 bytes.
   */
  | {
      op: 'commit';
      slot: number;
      as: As;
      version: number;
      parts?: Parts;
      oversized?: boolean;
      /** To both partitions of the topic the group is not subscribed to (`parts` unused). */
      unsubscribed?: true;
    }
  | { op: 'commitAnonymous'; version: number }
  /**
   * The group's transactional producer commits offsets in its transaction (opened first when none
   * is), with the member's identity as `commit` does, or none (`slot` null: generation -1, no
   * member id, as `sendOffsetsToTransaction(offsets, groupId)`).
   */
  | { op: 'txnCommit'; slot: number | null; as: As; parts?: Parts }
  /** The producer's open transaction commits or aborts (EndTxn); nothing when none is open. */
  | { op: 'txnEnd'; commit: boolean }
  /**
   * `stable` false: requireStable false (pending transactional offsets are not waited for).
   * `version` 10: by topic id (KIP-848), as a Kafka 4.4 client; otherwise v9 naming the member
   * (v8 without one).
   */
  | { op: 'fetch'; slot: number | null; as: As; stable?: boolean; version?: 10 }
  /** `storeDown`: the proxy's store is unreachable while the member leaves (its leave is not recorded). */
  | { op: 'leave'; slot: number; storeDown?: true }
  /** An admin removes a static member by its instance id. */
  | { op: 'removeInstance'; slot: number }
  /**
   * A new process of the member starts (a static one keeps the instance id); the old one is a
   * zombie. `storeDown`: the proxy's store is unreachable while it joins.
   */
  | { op: 'restart'; slot: number; storeDown?: true }
  /** These members stop (SIGKILL, or a pause) and the broker's timers run out for them. */
  | { op: 'crash'; slots: number[] }
  /**
   * Classic: the only live member rejoins and does not sync yet (it leads the new generation, which
   * stays CompletingRebalance); skipped with other live members, whose leader the broker picks.
   */
  | { op: 'joinOnly'; slot: number }
  /**
   * An admin deletes the group's committed offsets of both partitions of both topics, the one the
   * members subscribe to and the other (OffsetDelete).
   */
  | { op: 'deleteOffsets' }
  | { op: 'deleteGroup' };

export interface Script {
  protocol: Protocol;
  statics: boolean[];
  steps: Step[];
}

export const SLOTS = 3;

export interface Timing {
  /** Classic session timeout, and the KIP-848 group's consumer.session.timeout.ms. */
  sessionMs: number;
  /** Classic rebalance timeout (and the KIP-848 member's). */
  rebalanceMs: number;
  /** KIP-848 consumer.heartbeat.interval.ms of the group. */
  heartbeatIntervalMs: number;
}

export const DEFAULT_TIMING: Timing = { sessionMs: 3000, rebalanceMs: 1500, heartbeatIntervalMs: 1000 };

export interface Target {
  name: string;
  /**
   * Where members connect: several proxy instances sharing one store take turns (member i's n-th
   * process uses instance (i + n) mod count), so a static member and its replacement are seen by
   * different instances.
   */
  bootstraps: string[];
  /** The proxy's store can be made unreachable (steps with `storeDown`); absent for the broker. */
  outage?: StoreOutage;
}

export interface Env {
  /** The broker itself, for admin requests (group configs) and topic ids. */
  broker: string;
  /** The topic the members subscribe to. */
  topic: string;
  /** A topic no member subscribes to (the broker lets its offsets be deleted while the group runs). */
  otherTopic: string;
  timing: Timing;
}

/** What one target answered: one line per executed step (ticks and settles included). */
export type Trace = string[];

type Member = ClassicMember | ConsumerMember;

/** A member's identity and the partitions it held under it (KIP-848; none for classic members). */
interface Held {
  proc: Member;
  identity: CommitIdentity;
  partitions: number[];
}

interface Slot {
  proc: Member | null;
  /** Its identity before the last change (and what it held then): what a zombie of it commits with. */
  previous: Held | null;
  live: boolean;
  restarts: number;
}

/** One target's copy of the script's group. */
class Run {
  readonly trace: Trace = [];
  /** The broker's own view of the group after each traced step (see compareRuns). */
  readonly states: string[] = [];
  private readonly slots: Slot[];
  private admin!: Conn;
  /** The group's transactional producer, from its first transactional commit on. */
  private producer: TxnProducer | null = null;
  private ids = new Map<string, string>();
  private offset = 0n;

  constructor(
    readonly target: Target,
    readonly group: string,
    private readonly script: Script,
    private readonly env: Env,
    private readonly memberIdPrefix: string,
  ) {
    this.slots = script.statics.map(() => ({ proc: null, previous: null, live: true, restarts: 0 }));
  }

  /**
   * The lowest OffsetCommit version the target serves. Kafka 4 removed v0-1, which the proxy still
   * serves: a commit of a version the broker lacks goes to it in this one, its nearest successor
   * (the reference for what the older version means there).
   */
  private commitMin = 0;
  /** The highest OffsetCommit and OffsetFetch versions the target offers (v10: topic ids). */
  private commitMax = 9;
  private fetchMax = 9;

  async open(): Promise<void> {
    this.admin = await Conn.open(this.target.bootstraps[0]!);
    const versions = await this.admin.request<ApiVersionsResponse>(ApiKey.ApiVersions, 3, {
      clientSoftwareName: 'guard-differential',
      clientSoftwareVersion: '0',
    });
    const range = (key: number) => versions.apiKeys.find((k) => k.apiKey === key);
    this.commitMin = range(ApiKey.OffsetCommit)?.minVersion ?? 0;
    this.commitMax = range(ApiKey.OffsetCommit)?.maxVersion ?? 9;
    this.fetchMax = range(ApiKey.OffsetFetch)?.maxVersion ?? 9;
    // Both topics, both protocols: v10 commits and fetches name topics by id.
    this.ids = await topicIds(this.admin, [this.env.topic, this.env.otherTopic]);
    if (this.script.protocol === 'consumer') {
      const t = this.env.timing;
      // The target assignment is computed at the heartbeat that changed the group, not by a timer
      // or another thread (Kafka 4.1+ batch it): the epochs then depend on the script alone.
      const code = await setGroupConfigs(this.admin, this.group, {
        'consumer.session.timeout.ms': String(t.sessionMs),
        'consumer.heartbeat.interval.ms': String(t.heartbeatIntervalMs),
        'consumer.assignment.interval.ms': '0',
        'consumer.assignor.offload.enable': 'false',
      });
      if (code !== ErrorCode.NONE) throw new Error(`group configs refused: ${code}`);
    }
    for (let i = 0; i < this.slots.length; i++) this.slots[i]!.proc = await this.spawn(i);
  }

  private async spawn(slot: number): Promise<Member> {
    const s = this.slots[slot]!;
    const { bootstraps } = this.target;
    const conn = await Conn.open(bootstraps[(slot + s.restarts) % bootstraps.length]!);
    const instance = this.script.statics[slot] ? `instance-${slot}` : null;
    const t = this.env.timing;
    if (this.script.protocol === 'classic') {
      return new ClassicMember(conn, this.group, {
        groupInstanceId: instance,
        sessionTimeoutMs: t.sessionMs,
        rebalanceTimeoutMs: t.rebalanceMs,
        topics: [this.env.topic],
      });
    }
    return new ConsumerMember(conn, this.group, {
      // KIP-848 members choose their ids: the same on every target, so assignments are too.
      memberId: `${this.memberIdPrefix}-${slot}-${s.restarts}`,
      instanceId: instance,
      rebalanceTimeoutMs: 30_000,
      topics: [this.env.topic],
      topicIds: this.ids,
    });
  }

  /**
   * The version a step's request is sent in on this target: in the range it offers (a v10 step on
   * a broker without v10 is sent in v9, as a client would negotiate), and the topic as that
   * version names it.
   */
  private commitVersion(version: number): number {
    return Math.min(Math.max(version, this.commitMin), this.commitMax);
  }

  private ref(topic: string, version: number): TopicRef {
    return version >= 10 ? { name: topic, id: this.ids.get(topic)! } : topic;
  }

  private live(): Member[] {
    return this.slots.filter((s) => s.live && s.proc).map((s) => s.proc!);
  }

  /** Runs `op` and keeps, for every member whose identity it changed, the identity before. */
  private async tracking<T>(op: () => Promise<T>): Promise<T> {
    const before = this.slots.map((s) => (s.proc ? this.held(s.proc) : null));
    const result = await op();
    this.slots.forEach((s, i) => {
      const b = before[i];
      if (!b) return;
      const now = s.proc === b.proc ? s.proc.identity : null;
      const changed =
        now === null ||
        now.memberId !== b.identity.memberId ||
        now.generationIdOrMemberEpoch !== b.identity.generationIdOrMemberEpoch;
      if (changed && b.identity.memberId !== '') s.previous = b;
    });
    return result;
  }

  /** Runs a step; `record` false for the heartbeats while a crash's timers run out (see runScript). */
  async step(step: AnyStep, record = true): Promise<void> {
    const outage = 'storeDown' in step && step.storeDown === true ? this.target.outage : undefined;
    const line = await this.tracking(() => (outage ? outage.during(() => this.run(step)) : this.run(step)));
    if (record) this.trace.push(`${describe(step)} → ${line}`);
    if (record) {
      const state = await this.groupState();
      this.states.push(state);
      if (process.env['KOP_DIFF_DEBUG'])
        console.log(`${Date.now() % 100_000} ${this.target.name} ${describe(step)} → ${line} | ${state}`);
    }
  }

  private async run(step: AnyStep): Promise<string> {
    const classic = this.script.protocol === 'classic';
    switch (step.op) {
      case 'tick':
        return (await this.heartbeats()).join(',');
      case 'watch': {
        // A live client: heartbeats, and (classic) rejoins when the broker says so.
        const codes = await this.heartbeats();
        if (classic && codes.some((c) => c !== ErrorCode.NONE)) await this.rebalance();
        return '';
      }
      case 'settle':
      case 'rebalance':
        return classic ? this.rebalance() : (await this.heartbeats()).join(',');
      case 'heartbeat': {
        const m = this.member(step.slot);
        return m ? String(await m.heartbeat()) : 'no member';
      }
      case 'commit': {
        const who = this.identityOf(step.slot, step.as);
        if (!who) return 'no member';
        const partitions = step.unsubscribed ? [0, 1] : this.partitionsFor(step.slot, who, step.parts);
        if (partitions.length === 0) return 'no partitions';
        this.offset += 1n;
        const version = this.commitVersion(step.version);
        const codes = await commitOffsets(
          who.proc.conn,
          this.group,
          who.identity,
          this.ref(step.unsubscribed ? this.env.otherTopic : this.env.topic, version),
          partitions,
          this.offset,
          version,
          step.oversized === true ? OVERSIZED_METADATA : '',
        );
        return `[${partitions.join(',')}] ${codes.join(',')}`;
      }
      case 'commitAnonymous': {
        this.offset += 1n;
        const version = this.commitVersion(step.version);
        return (
          await commitOffsets(
            this.admin,
            this.group,
            ANONYMOUS,
            this.ref(this.env.topic, version),
            [0, 1],
            this.offset,
            version,
          )
        ).join(',');
      }
      case 'fetch': {
        const stable = step.stable !== false;
        const v10 = step.version === 10 && this.fetchMax >= 10;
        if (step.slot === null || classic) {
          // Classic consumers and admin tools name no member (v8, or v10 with no member).
          const version = v10 ? 10 : 8;
          const topic = this.ref(this.env.topic, version);
          return fetched(
            await fetchOffsets(this.admin, this.group, topic, [0, 1], undefined, version, stable),
          );
        }
        const who = this.identityOf(step.slot, step.as);
        if (!who) return 'no member';
        const member = {
          memberId: who.identity.memberId,
          memberEpoch: who.identity.generationIdOrMemberEpoch,
        };
        const version = v10 ? 10 : 9;
        const topic = this.ref(this.env.topic, version);
        return fetched(await fetchOffsets(who.proc.conn, this.group, topic, [0, 1], member, version, stable));
      }
      case 'txnCommit': {
        const who = step.slot === null ? null : this.identityOf(step.slot, step.as);
        if (step.slot !== null && !who) return 'no member';
        const partitions =
          who && step.slot !== null ? this.partitionsFor(step.slot, who, step.parts) : [0, 1];
        if (partitions.length === 0) return 'no partitions';
        this.offset += 1n;
        this.producer ??= new TxnProducer(await Conn.open(this.target.bootstraps[0]!), `${this.group}-txn`);
        const codes = await this.producer.commit(
          this.group,
          who?.identity ?? ANONYMOUS,
          this.env.topic,
          partitions,
          this.offset,
        );
        return `[${partitions.join(',')}] ${codes.join(',')}`;
      }
      case 'txnEnd': {
        if (!this.producer?.open) return 'no transaction';
        const code = await this.producer.end(step.commit);
        // The markers reach the group coordinator after EndTxn is answered: wait for them, so the
        // next step meets the same offsets on every target.
        await this.untilStable();
        return String(code);
      }
      case 'leave': {
        const s = this.slots[step.slot]!;
        if (!s.live || !s.proc) return 'no member';
        s.live = false;
        return String(await s.proc.leave());
      }
      case 'removeInstance': {
        if (!this.script.statics[step.slot] || !classic) return 'not static';
        return String(await removeByInstanceId(this.admin, this.group, `instance-${step.slot}`));
      }
      case 'restart':
        return this.restart(step.slot);
      case 'joinOnly': {
        const m = this.member(step.slot);
        if (!(m instanceof ClassicMember) || this.live().length !== 1) return 'skipped';
        m.userData = Buffer.from(`alone-${++this.round}`);
        return String(await m.join());
      }
      case 'crash': {
        for (const i of step.slots) this.slots[i]!.live = false;
        return 'crashed';
      }
      case 'deleteGroup':
        return String(await deleteGroup(this.admin, this.group));
      case 'deleteOffsets':
        return deleteOffsets(this.admin, this.group, [this.env.topic, this.env.otherTopic], [0, 1]);
    }
  }

  private member(slot: number): Member | null {
    const s = this.slots[slot]!;
    return s.live ? s.proc : null;
  }

  private identityOf(slot: number, as: As): Held | null {
    const s = this.slots[slot]!;
    if (as === 'previous') return s.previous;
    if (!s.proc) return null;
    const now = this.held(s.proc);
    return as === 'joining' ? { ...now, identity: { ...now.identity, generationIdOrMemberEpoch: 0 } } : now;
  }

  private held(proc: Member): Held {
    const topicId = this.ids.get(this.env.topic);
    const partitions = proc instanceof ConsumerMember && topicId ? proc.partitionsOf(topicId) : [];
    return { proc, identity: { ...proc.identity }, partitions };
  }

  /** The partitions a commit of `who` names (see Step `commit`), by what the slot's member holds now. */
  private partitionsFor(slot: number, who: Held, parts: Parts | undefined): number[] {
    if (parts === undefined) return [0, 1];
    const proc = this.slots[slot]!.proc;
    const now = proc ? this.held(proc).partitions : [];
    switch (parts) {
      case 'kept':
        return now.filter((p) => who.partitions.includes(p));
      case 'gained':
        return now.filter((p) => !who.partitions.includes(p));
      case 'other':
        return [0, 1].filter((p) => !now.includes(p));
    }
  }

  private round = 0;

  /**
   * Classic: every live member rejoins and syncs until all are in one Stable generation, each as
   * a live client would: after its sync it heartbeats, and joins again when the broker answers
   * anything but NONE (a member that joins later starts another join phase, which the others
   * only learn of by heartbeat). The round joins with new subscription user data, so that it
   * makes a new generation whichever member joins first (a follower rejoining a Stable group
   * unchanged is answered at once; only the leader's join, or a change, starts a rebalance).
   */
  private async rebalance(): Promise<string> {
    const members = this.live() as ClassicMember[];
    if (members.length === 0) return 'nobody';
    this.round += 1;
    const tag = Buffer.from(`round-${this.round}`);
    const stable = new Set<ClassicMember>();
    let stop = false;
    const deadline = Date.now() + 6 * this.env.timing.rebalanceMs;
    const client = async (m: ClassicMember) => {
      m.userData = tag;
      while (!stop && Date.now() < deadline) {
        if (!stable.has(m)) {
          if ((await m.join()) === ErrorCode.NONE && (await m.sync()) === ErrorCode.NONE) stable.add(m);
          continue;
        }
        if ((await m.heartbeat()) !== ErrorCode.NONE) stable.delete(m);
        else await sleep(50);
      }
    };
    const monitor = async () => {
      let quiet = 0;
      while (Date.now() < deadline) {
        await sleep(100);
        const together =
          stable.size === members.length && new Set(members.map((m) => m.generationId)).size === 1;
        quiet = together ? quiet + 1 : 0;
        // Stable through two heartbeat rounds of every member: no join phase is pending.
        if (quiet >= 3) break;
      }
      stop = true;
    };
    await Promise.all([monitor(), ...members.map(client)]);
    return stable.size === members.length && new Set(members.map((m) => m.generationId)).size === 1
      ? 'stable'
      : 'not stable';
  }

  /** A new process for the slot; the old one keeps its identity (a zombie). */
  private async restart(slot: number): Promise<string> {
    const s = this.slots[slot]!;
    const old = s.proc;
    s.restarts += 1;
    const fresh = await this.spawn(slot);
    s.proc = fresh;
    s.live = true;
    if (old) s.previous = this.held(old);
    if (fresh instanceof ClassicMember) {
      if (!this.script.statics[slot] && old instanceof ClassicMember && old.memberId !== '') {
        // A dynamic member's process closes with a LeaveGroup; its successor is a new member.
        const left = await old.leave();
        return `left ${left}, ${await this.rebalance()}`;
      }
      // A static member's successor takes the instance over (within the generation when Stable).
      return `${await fresh.join()}/${await fresh.sync()}`;
    }
    if (!this.script.statics[slot] && old instanceof ConsumerMember) await old.leave(false);
    return String(await fresh.heartbeat());
  }

  /**
   * The group as the broker describes it: state and member count (classic: the broker names the
   * members differently on every target), or KIP-848 state, group epoch and member epochs.
   */
  private async groupState(): Promise<string> {
    if (this.script.protocol === 'classic') {
      const d = await this.admin.request<DescribeGroupsResponse>(ApiKey.DescribeGroups, 5, {
        groups: [this.group],
        includeAuthorizedOperations: false,
      });
      const g = d.groups[0]!;
      // A group without members may be gone at the broker behind the proxy (a simple commit
      // created it directly; the proxy kept that commit to itself): the same for the script.
      if (g.errorCode !== ErrorCode.NONE || g.groupState === 'Dead') return 'Empty 0';
      return `${g.groupState} ${g.members.length}`;
    }
    const g = (await describeConsumerGroup(this.admin, this.group)).groups[0]!;
    if (g.errorCode !== ErrorCode.NONE || g.members.length === 0) return 'Empty';
    const epochs = g.members.map((m) => `${m.memberId.slice(-3)}@${m.memberEpoch}`).sort();
    return `${g.groupState} ${g.groupEpoch} ${epochs.join(' ')}`;
  }

  /** Heartbeats of the live members, not part of the trace. */
  async keepAlive(): Promise<void> {
    await this.heartbeats();
  }

  /**
   * A heartbeat of every live member. KIP-848 members heartbeat one after another, in slot order:
   * the coordinator hands a partition being moved to whichever member asks first, so concurrent
   * heartbeats would make the epochs differ from target to target.
   */
  private async heartbeats(): Promise<number[]> {
    const live = this.live();
    if (this.script.protocol === 'classic') return Promise.all(live.map((m) => m.heartbeat()));
    const codes: number[] = [];
    for (const m of live) codes.push(await m.heartbeat());
    return codes;
  }

  /** The committed offsets of both topics. */
  async committed(): Promise<string> {
    const of = async (topic: string) =>
      fetched(await fetchOffsets(this.admin, this.group, topic, [0, 1], undefined, 8));
    return `${await of(this.env.topic)}; ${await of(this.env.otherTopic)}`;
  }

  /**
   * Until the broker itself holds no pending transactional offset of the group (asked directly,
   * whichever the target: the transaction's offsets are the broker's on every target).
   */
  private async untilStable(): Promise<void> {
    const direct = await Conn.open(this.env.broker);
    try {
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline) {
        const r = await fetchOffsets(direct, this.group, this.env.topic, [0, 1], undefined, 8);
        if (!r.partitionCodes.includes(ErrorCode.UNSTABLE_OFFSET_COMMIT)) return;
        await sleep(50);
      }
      throw new Error(`${this.target.name}: the transaction's markers did not arrive within 15 s`);
    } finally {
      direct.close();
    }
  }

  close(): void {
    this.admin?.close();
    this.producer?.conn.close();
    for (const s of this.slots) s.proc?.conn.close();
    for (const s of this.slots) s.previous?.proc.conn.close();
  }
}

/** Steps the executor adds by the clock: heartbeats of the live members, and settling the group. */
type AnyStep = Step | { op: 'tick' } | { op: 'watch' } | { op: 'settle' };

export function describe(step: AnyStep): string {
  const { op, ...rest } = step;
  const args = Object.values(rest).map((v) => (Array.isArray(v) ? `[${v.join(',')}]` : String(v)));
  return `${op}(${args.join(' ')})`;
}

/** A fetch's answer: the group's code and offsets, and the partitions' codes where any is set. */
function fetched(r: FetchResult): string {
  const codes = r.partitionCodes.some((c) => c !== ErrorCode.NONE) ? ` (${r.partitionCodes.join(',')})` : '';
  return `${r.errorCode} ${r.offsets.join(',')}${codes}`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Steps after which a broker timer is pending that a later step must not meet firing: a join
 * phase or a wait for SyncGroup (classic, the rebalance timeout), a static member that left or was
 * replaced without leaving (KIP-848, the session timeout).
 */
const UNSETTLING: Record<Protocol, ReadonlySet<Step['op']>> = {
  classic: new Set(['leave', 'removeInstance', 'restart', 'joinOnly']),
  consumer: new Set(['leave', 'restart']),
};

export interface RunResult {
  /** Per target: the answers, one line per traced step, the last the committed offsets. */
  traces: Map<string, Trace>;
  /** Per target: the broker's view of the group after each traced step. */
  states: Map<string, string[]>;
}

/** Runs the script on every target in lockstep. */
export async function runScript(
  targets: Target[],
  script: Script,
  env: Env,
  label: string,
): Promise<RunResult> {
  const prefix = `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const runs = targets.map((t) => new Run(t, `${prefix}-${t.name}`, script, env, prefix));
  const t = env.timing;
  const classic = script.protocol === 'classic';
  const tickEvery = classic ? t.sessionMs / 5 : Math.min(t.heartbeatIntervalMs, t.sessionMs / 5);
  /**
   * One step on every target. A classic target done before the others keeps its live members'
   * sessions up meanwhile (a heartbeat changes nothing else); a KIP-848 one does not, since a
   * heartbeat may move a member's epoch: its session timeout is long against any step.
   */
  const all = async (step: AnyStep, record = true): Promise<void> => {
    const steps = runs.map((r) => r.step(step, record));
    const done = Promise.all(steps).then(() => true);
    await Promise.all(
      steps.map(async (own, i) => {
        await own;
        while (classic && !(await Promise.race([done, sleep(tickEvery).then(() => false)])))
          await runs[i]!.keepAlive();
      }),
    );
  };
  // How long a pending timer is certain not to fire (it fires a rebalance or session timeout later).
  const settleWithin = (classic ? t.rebalanceMs : t.sessionMs) * 0.5;
  /** Lets the broker's timers run out, the live members heartbeating (and rejoining) meanwhile. */
  const waitOut = async () => {
    const until = Date.now() + t.sessionMs + t.rebalanceMs + 500;
    while (Date.now() < until) {
      await sleep(tickEvery);
      await all({ op: 'watch' }, false);
    }
    await all({ op: 'settle' });
  };
  try {
    await Promise.all(runs.map((r) => r.open()));
    // Everyone in the group first.
    if (classic) await all({ op: 'rebalance' });
    else for (let i = 0; i < 2; i++) await all({ op: 'tick' });
    let lastTick = Date.now();
    let unsettledSince: number | null = null;
    for (const step of script.steps) {
      if (unsettledSince !== null && Date.now() - unsettledSince > settleWithin) {
        if (classic) await all({ op: 'settle' });
        else await waitOut();
        unsettledSince = null;
        lastTick = Date.now();
      }
      if (Date.now() - lastTick >= tickEvery) {
        await all({ op: 'tick' });
        lastTick = Date.now();
      }
      await all(step);
      if (step.op === 'crash') {
        await waitOut();
        lastTick = Date.now();
        unsettledSince = null;
      } else if (step.op === 'rebalance') {
        unsettledSince = null;
      } else if (UNSETTLING[script.protocol].has(step.op) && unsettledSince === null) {
        unsettledSince = Date.now();
      }
    }
    const traces = new Map<string, Trace>();
    for (const r of runs) traces.set(r.target.name, [...r.trace, `committed → ${await r.committed()}`]);
    return { traces, states: new Map(runs.map((r) => [r.target.name, r.states])) };
  } finally {
    for (const r of runs) r.close();
  }
}

export interface Comparison {
  /**
   * same: every target answered as the broker. differ: a target answered otherwise while the
   * broker's own view of every group had been the same so far: the guard decided differently.
   * drift: the groups themselves went apart first (a timer fired between two steps on one target
   * only: the machine was too slow for the script's timing), so the run proves nothing.
   */
  verdict: 'same' | 'differ' | 'drift';
  report: string;
}

export function compareRuns(script: Script, result: RunResult): Comparison {
  const entries = [...result.traces.entries()];
  const [refName, ref] = entries[0]!;
  const refStates = result.states.get(refName)!;
  let verdict: Comparison['verdict'] = 'same';
  const notes: string[] = [];
  for (const [name, trace] of entries.slice(1)) {
    const states = result.states.get(name)!;
    const n = Math.max(ref.length, trace.length);
    for (let i = 0; i < n; i++) {
      const driftedAt = states.slice(0, i + 1).findIndex((st, j) => st !== refStates[j]);
      if (ref[i] === trace[i] && driftedAt < 0) continue;
      if (driftedAt >= 0) {
        notes.push(
          `${name} drifted at line ${driftedAt + 1}: broker says ${states[driftedAt]} there, ${refStates[driftedAt]} for ${refName}`,
        );
        if (verdict === 'same') verdict = 'drift';
      } else {
        notes.push(`${name} differs at line ${i + 1}:\n  ${refName}: ${ref[i]}\n  ${name}: ${trace[i]}`);
        verdict = 'differ';
      }
      break;
    }
  }
  const report = [
    `script (${script.protocol}, static: [${script.statics.join(',')}]):`,
    ...script.steps.map((st) => `  ${describe(st)}`),
    ...notes,
    ...entries.flatMap(([name, trace]) => [
      `${name}:`,
      ...trace.map(
        (l, i) => `  ${l}${result.states.get(name)?.[i] ? `   [${result.states.get(name)![i]}]` : ''}`,
      ),
    ]),
  ].join('\n');
  return { verdict, report };
}

/**
 * Runs the script until it is conclusive (a drifted run is run again, at most `attempts` times)
 * and throws with the report when a target answered otherwise than the broker.
 */
export async function expectSameAnswers(
  targets: Target[],
  script: Script,
  env: Env,
  label: string,
  attempts = 3,
): Promise<void> {
  let last: Comparison | null = null;
  for (let i = 0; i < attempts; i++) {
    last = compareRuns(script, await runScript(targets, script, env, label));
    if (last.verdict === 'same') return;
    if (last.verdict === 'differ')
      throw new Error(`the proxy answered otherwise than the broker\n${last.report}`);
  }
  throw new Error(`the groups drifted apart on every attempt (timing): inconclusive\n${last?.report ?? ''}`);
}

// ---- generated scripts ------------------------------------------------------------------------

const anySlot = fc.integer({ min: 0, max: SLOTS - 1 });
const as = fc.constantFrom('current' as const, 'previous' as const);

/**
 * Requests whose answers the guard decides or sees: what each membership change is probed with,
 * mostly by the member it changed (`focus`), whose standing the change is about.
 */
function probeArb(protocol: Protocol, focus: number | null = null): fc.Arbitrary<Step> {
  const slot =
    focus === null
      ? anySlot
      : fc.oneof({ weight: 3, arbitrary: fc.constant(focus) }, { weight: 1, arbitrary: anySlot });
  // KIP-848 commits name the partitions by what the member holds (assignment epochs decide an
  // older epoch's commit per partition); a few of every protocol carry too much metadata, and a
  // few go to the topic the group is not subscribed to (whose offsets OffsetDelete may delete).
  const parts: fc.Arbitrary<Parts | null> =
    protocol === 'consumer' ? fc.constantFrom(null, null, 'kept', 'gained', 'other') : fc.constant(null);
  const commit = fc
    .tuple(
      fc.record({
        op: fc.constant('commit' as const),
        slot,
        as,
        // v10 (topic ids) as Kafka 4.4 clients send it; older versions as older clients do.
        version: protocol === 'classic' ? fc.constantFrom(10, 9, 6, 2) : fc.constantFrom(10, 10, 9, 8),
      }),
      parts,
      fc.integer({ min: 0, max: 9 }),
    )
    .map(([c, p, roll]): Step => ({
      ...c,
      ...(p ? { parts: p } : {}),
      ...(roll === 0 ? { oversized: true } : {}),
      ...(roll === 1 ? { unsubscribed: true } : {}),
    }));
  // The group's transactional producer commits with a member's identity (as a consume-transform-
  // produce loop does), now and then with none.
  const txnCommit = fc
    .tuple(fc.option(slot, { nil: null, freq: 5 }), as, parts)
    .map(([s, a, p]): Step => ({ op: 'txnCommit', slot: s, as: a, ...(p ? { parts: p } : {}) }));
  const fetch = fc
    .tuple(fc.option(slot, { nil: null }), as, fc.boolean(), fc.boolean())
    .map(([s, a, stable, v10]): Step => ({
      op: 'fetch',
      slot: s,
      as: a,
      ...(stable ? {} : { stable: false }),
      ...(v10 ? { version: 10 as const } : {}),
    }));
  return fc.oneof(
    { weight: 6, arbitrary: commit },
    {
      weight: 1,
      arbitrary: fc.record({
        op: fc.constant('commitAnonymous' as const),
        version: fc.constantFrom(10, 9, 2),
      }),
    },
    { weight: 2, arbitrary: fetch },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('heartbeat' as const), slot }) },
    { weight: 2, arbitrary: txnCommit },
    { weight: 1, arbitrary: txnEnd },
  );
}

/** The transaction ends, committed more often than aborted. */
const txnEnd: fc.Arbitrary<Step> = fc
  .constantFrom(true, true, false)
  .map((commit): Step => ({ op: 'txnEnd', commit }));

/** The membership transitions a script is made of. */
function changeArb(protocol: Protocol): fc.Arbitrary<Step> {
  const slot = anySlot;
  const changes: fc.WeightedArbitrary<Step>[] = [
    { weight: 2, arbitrary: fc.record({ op: fc.constant('leave' as const), slot }) },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('restart' as const), slot }) },
    {
      weight: 1,
      arbitrary: fc.record({
        op: fc.constant('crash' as const),
        slots: fc.uniqueArray(slot, { minLength: 1, maxLength: 2 }),
      }),
    },
    { weight: 1, arbitrary: fc.constant({ op: 'deleteGroup' as const }) },
    { weight: 1, arbitrary: fc.constant({ op: 'deleteOffsets' as const }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('heartbeat' as const), slot }) },
    { weight: 1, arbitrary: txnEnd },
  ];
  if (protocol === 'classic') {
    // A member rejoining alone is not offered (but see joinOnly): whether it starts a rebalance
    // depends on whether it is the leader, which the broker picks differently on each target.
    changes.push(
      { weight: 2, arbitrary: fc.constant({ op: 'rebalance' as const }) },
      { weight: 1, arbitrary: fc.record({ op: fc.constant('removeInstance' as const), slot }) },
      { weight: 1, arbitrary: fc.record({ op: fc.constant('joinOnly' as const), slot }) },
    );
  }
  return fc.oneof(...changes);
}

/** The member a change is about (a crash's first), or null. */
function changedSlot(change: Step): number | null {
  if ('slot' in change && typeof change.slot === 'number') return change.slot;
  if (change.op === 'crash') return change.slots[0] ?? null;
  return null;
}

/** Scripts of membership changes, each followed by one to three probes. */
export function scriptArb(protocol: Protocol, maxChanges = 5): fc.Arbitrary<Script> {
  const episode = changeArb(protocol).chain((change) =>
    fc
      .array(probeArb(protocol, changedSlot(change)), { minLength: 1, maxLength: 3 })
      .map((probes) => [change, ...probes]),
  );
  return fc.record({
    protocol: fc.constant(protocol),
    statics: fc.array(fc.boolean(), { minLength: SLOTS, maxLength: SLOTS }),
    steps: fc
      .tuple(
        fc.array(probeArb(protocol), { maxLength: 2 }),
        fc.array(episode, { minLength: 1, maxLength: maxChanges }),
      )
      .map(([first, episodes]) => [...first, ...episodes.flat()]),
  });
}
