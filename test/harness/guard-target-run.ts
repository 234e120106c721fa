// One target's run of a differential script (test/harness/guard-differential.ts): the script's group
// on that target, its slots of raw protocol members, and the trace of every answer.
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
import { describe } from './guard-scripts.js';
import type { AnyStep, As, Env, Parts, Script, Target, Trace } from './guard-scripts.js';

/** Over the 4096 bytes of metadata a broker stores (offset.metadata.max.bytes). */
const OVERSIZED_METADATA = 'x'.repeat(4097);

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
export class Run {
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

/** A fetch's answer: the group's code and offsets, and the partitions' codes where any is set. */
export function fetched(r: FetchResult): string {
  const codes = r.partitionCodes.some((c) => c !== ErrorCode.NONE) ? ` (${r.partitionCodes.join(',')})` : '';
  return `${r.errorCode} ${r.offsets.join(',')}${codes}`;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
