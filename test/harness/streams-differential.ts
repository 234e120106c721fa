// Differential runs of the commit fence for streams groups (KIP-1071): one generated script of
// StreamsGroupHeartbeat, OffsetCommit, OffsetFetch and OffsetDelete steps, sent by raw protocol
// members to the broker itself and through the proxy on every store, each target in a group of
// its own, in lockstep. Every answer must be the broker's, and so must the committed offsets.
//
// Member ids are the same on every target (each target has its own group), so the broker's task
// assignor sees the same members in the same order everywhere and the groups stay alike. After
// every step the broker's own view of each target's group (StreamsGroupDescribe) is compared: when
// the groups went apart before the answers did, the machine's timing did it, not the proxy, and
// the run is repeated (as in guard-differential.ts). Session timeouts are the broker's default
// (45 s), longer than any script, so no timer fires between two steps.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { StreamsGroupDescribeResponse } from '../../protocol/messages/streams-group-describe-response.js';
import { commitOffsets, Conn, deleteOffsets, fetchOffsets, topicIds } from './group-members.js';
import type { Target } from './guard-differential.js';
import { StreamsMember } from './streams-members.js';

export const STREAMS_SLOTS = 3;
/** The source topic's partitions: one task each. */
const PARTITIONS = [0, 1];

/** Whose identity a request carries: the member now, one epoch ahead, or before its last change. */
export type StreamsAs = 'current' | 'newer' | 'previous';

/** Which partitions a commit names: those of the identity's tasks, the others, or both. */
export type StreamsParts = 'held' | 'others' | 'both';

export type StreamsStep =
  /** One StreamsGroupHeartbeat of the member (it joins, if it is not in the group). */
  | { op: 'heartbeat'; slot: number }
  /** Every live member heartbeats until the assignment stops moving. */
  | { op: 'settle' }
  /** Through the member's own connection, or (`other`) through another proxy instance. */
  | { op: 'commit'; slot: number; as: StreamsAs; parts: StreamsParts; version: 8 | 9 | 10; other?: true }
  /** An admin commit: no member, generation -1 (kafka-streams-groups --reset-offsets does this). */
  | { op: 'commitAnonymous' }
  | { op: 'fetch'; slot: number | null; as: StreamsAs }
  /** The member leaves (a static one with epoch -2, keeping its tasks for its next process). */
  | { op: 'leave'; slot: number }
  /**
   * A new process of the member joins (a static one with the same instance id, after the old one
   * left with -2); the old process is a zombie whose identity `previous` commits with.
   */
  | { op: 'restart'; slot: number }
  | { op: 'deleteOffsets' };

export interface StreamsScript {
  statics: boolean[];
  steps: StreamsStep[];
}

export interface StreamsEnv {
  /** The broker itself, whose view of every target's group decides whether the runs drifted. */
  broker: string;
  topic: string;
}

interface Identity {
  memberId: string;
  epoch: number;
  partitions: number[];
}

interface Slot {
  member: StreamsMember | null;
  /** The identity before the member's last change of epoch or process (a zombie's). */
  previous: Identity | null;
  restarts: number;
  /** False once the member left, until a new process of it joins. */
  live: boolean;
}

/** A UUID-shaped id that is the same on every target of a run. */
function memberIdFor(run: string, slot: number, restarts: number): string {
  const h = createHash('sha256').update(`${run}/${slot}/${restarts}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One target's copy of the script's group. */
class StreamsRun {
  readonly trace: string[] = [];
  readonly states: string[] = [];
  private readonly slots: Slot[];
  private readonly conns: Conn[] = [];
  private admin!: Conn;
  private other!: Conn;
  private brokerView!: Conn;
  private offset = 0n;

  constructor(
    readonly target: Target,
    readonly group: string,
    private readonly script: StreamsScript,
    private readonly env: StreamsEnv,
    private readonly runId: string,
  ) {
    this.slots = script.statics.map(() => ({ member: null, previous: null, restarts: 0, live: true }));
  }

  async open(): Promise<void> {
    const b = this.target.bootstraps;
    this.admin = await this.conn(b[0]!);
    this.other = await this.conn(b[b.length - 1]!);
    this.brokerView = await this.conn(this.env.broker);
    for (let i = 0; i < this.slots.length; i++) await this.start(i);
  }

  close(): void {
    for (const c of this.conns) c.close();
  }

  private async conn(bootstrap: string): Promise<Conn> {
    const c = await Conn.open(bootstrap);
    this.conns.push(c);
    return c;
  }

  /** A new process for the slot, on the proxy instance its turn gives it. */
  private async start(slot: number): Promise<void> {
    const s = this.slots[slot]!;
    const b = this.target.bootstraps;
    const conn = await this.conn(b[(slot + s.restarts) % b.length]!);
    const instanceId = this.script.statics[slot] ? `instance-${slot}` : null;
    s.member = new StreamsMember(
      conn,
      this.group,
      this.env.topic,
      memberIdFor(this.runId, slot, s.restarts),
      instanceId,
    );
  }

  private identity(slot: number, as: StreamsAs): Identity {
    const s = this.slots[slot]!;
    const m = s.member!;
    if (as === 'previous' && s.previous) return s.previous;
    const epoch = as === 'newer' ? m.memberEpoch + 1 : m.memberEpoch;
    return { memberId: m.memberId, epoch, partitions: m.partitions };
  }

  /** Heartbeats once; an epoch or task change makes the identity before it the member's previous. */
  private async beat(slot: number): Promise<number> {
    const s = this.slots[slot]!;
    const m = s.member!;
    const before = { memberId: m.memberId, epoch: m.memberEpoch, partitions: m.partitions };
    const res = await m.heartbeat();
    if (res.errorCode === ErrorCode.NONE && before.epoch > 0 && m.memberEpoch !== before.epoch)
      s.previous = before;
    return res.errorCode;
  }

  async step(step: StreamsStep): Promise<string> {
    switch (step.op) {
      case 'heartbeat':
        return String(await this.beat(step.slot));
      case 'settle':
        return this.settle();
      case 'commit': {
        const id = this.identity(step.slot, step.as);
        const held = id.partitions;
        const partitions =
          step.parts === 'both'
            ? PARTITIONS
            : step.parts === 'held'
              ? held
              : PARTITIONS.filter((p) => !held.includes(p));
        if (partitions.length === 0) return 'nothing to commit';
        const conn = step.other ? this.other : this.slots[step.slot]!.member!.conn;
        const codes = await commitOffsets(
          conn,
          this.group,
          { generationIdOrMemberEpoch: id.epoch, memberId: id.memberId, groupInstanceId: null },
          step.version === 10 ? { name: this.env.topic, id: await this.topicId() } : this.env.topic,
          partitions,
          ++this.offset,
          step.version,
        );
        return `[${codes.join(',')}]`;
      }
      case 'commitAnonymous': {
        const codes = await commitOffsets(
          this.admin,
          this.group,
          { generationIdOrMemberEpoch: -1, memberId: '', groupInstanceId: null },
          this.env.topic,
          PARTITIONS,
          ++this.offset,
        );
        return `[${codes.join(',')}]`;
      }
      case 'fetch': {
        const member = step.slot === null ? null : this.identity(step.slot, step.as);
        const conn = step.slot === null ? this.admin : this.slots[step.slot]!.member!.conn;
        const r = await fetchOffsets(
          conn,
          this.group,
          this.env.topic,
          PARTITIONS,
          member ? { memberId: member.memberId, memberEpoch: member.epoch } : undefined,
        );
        return `${r.errorCode} ${r.offsets.join(',')} (${r.partitionCodes.join(',')})`;
      }
      case 'leave': {
        const s = this.slots[step.slot]!;
        const m = s.member!;
        s.previous = { memberId: m.memberId, epoch: m.memberEpoch, partitions: m.partitions };
        s.live = false;
        return String(await m.leave());
      }
      case 'restart': {
        const s = this.slots[step.slot]!;
        const old = s.member!;
        s.previous = { memberId: old.memberId, epoch: old.memberEpoch, partitions: old.partitions };
        // A static member's process leaves with -2 before its successor takes its instance id over.
        const left = this.script.statics[step.slot] && s.live ? await old.leave() : ErrorCode.NONE;
        s.restarts++;
        s.live = true;
        await this.start(step.slot);
        return `${left} ${await this.beat(step.slot)}`;
      }
      case 'deleteOffsets':
        return deleteOffsets(this.admin, this.group, this.env.topic, PARTITIONS);
    }
  }

  /**
   * Heartbeats every live member until the broker calls the group Stable (its target assignment
   * computed, which a 4.4 broker delays for a new group by group.streams.initial.rebalance.delay.ms,
   * and every member reconciled to it) and a round changes nothing; says who runs which task.
   */
  private async settle(): Promise<string> {
    let last = '';
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const parts: string[] = [];
      for (let i = 0; i < this.slots.length; i++) {
        const s = this.slots[i]!;
        if (s.live) parts.push(`${i}:${await this.beat(i)}:[${s.member!.partitions.join(',')}]`);
      }
      const now = parts.join(' ');
      if (now === last && (await this.brokerState()).startsWith('Stable')) return now;
      last = now;
      await sleep(200);
    }
    return `unsettled ${last}`;
  }

  private topicIdCache: string | null = null;
  private async topicId(): Promise<string> {
    if (this.topicIdCache === null) {
      this.topicIdCache = (await topicIds(this.brokerView, [this.env.topic])).get(this.env.topic)!;
    }
    return this.topicIdCache;
  }

  /** The broker's own view of the group: its state and epochs, and each member's epoch and tasks. */
  async brokerState(): Promise<string> {
    const res = await this.brokerView.request<StreamsGroupDescribeResponse>(ApiKey.StreamsGroupDescribe, 0, {
      groupIds: [this.group],
      includeAuthorizedOperations: false,
      includeTopologyDescription: false,
    });
    const g = res.groups[0];
    if (!g || g.errorCode !== ErrorCode.NONE) return `error ${g?.errorCode}`;
    const slotOf = (id: string) =>
      this.slots.findIndex((_, i) =>
        Array.from({ length: this.slots[i]!.restarts + 1 }, (_, r) => memberIdFor(this.runId, i, r)).includes(
          id,
        ),
      );
    const members = g.members
      .map((m) => {
        const tasks = m.assignment.activeTasks.flatMap((t) => t.partitions).sort();
        return `${slotOf(m.memberId)}:${m.memberEpoch}:[${tasks.join(',')}]`;
      })
      .sort();
    return `${g.groupState} ${g.groupEpoch}/${g.assignmentEpoch} ${members.join(' ')}`;
  }

  async committed(): Promise<string> {
    const r = await fetchOffsets(this.admin, this.group, this.env.topic, PARTITIONS);
    return `${r.errorCode} ${r.offsets.join(',')}`;
  }
}

export function describeStreamsStep(step: StreamsStep): string {
  const { op, ...rest } = step;
  return `${op}(${Object.values(rest).map(String).join(' ')})`;
}

export interface StreamsComparison {
  verdict: 'same' | 'differ' | 'drift';
  report: string;
}

/** Runs the script on every target in lockstep; the first target is the reference (the broker). */
export async function compareStreamsRuns(
  targets: Target[],
  script: StreamsScript,
  env: StreamsEnv,
  label: string,
): Promise<StreamsComparison> {
  const runId = `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const runs = targets.map((t) => new StreamsRun(t, `${runId}-${t.name}`, script, env, runId));
  try {
    await Promise.all(runs.map((r) => r.open()));
    const steps: StreamsStep[] = [{ op: 'settle' }, ...script.steps];
    for (const step of steps) {
      const answers = await Promise.all(runs.map((r) => r.step(step)));
      const states = await Promise.all(runs.map((r) => r.brokerState()));
      runs.forEach((r, i) => {
        r.trace.push(`${describeStreamsStep(step)} → ${answers[i]}`);
        r.states.push(states[i]!);
      });
    }
    for (const r of runs) r.trace.push(`committed → ${await r.committed()}`);
  } finally {
    for (const r of runs) r.close();
  }
  const [ref, ...others] = runs;
  let verdict: StreamsComparison['verdict'] = 'same';
  const notes: string[] = [];
  for (const r of others) {
    for (let i = 0; i < ref!.trace.length; i++) {
      if (i < ref!.states.length && r.states[i] !== ref!.states[i]) {
        notes.push(`${r.target.name} drifted at line ${i + 1}: ${r.states[i]} against ${ref!.states[i]}`);
        if (verdict === 'same') verdict = 'drift';
        break;
      }
      if (r.trace[i] !== ref!.trace[i]) {
        notes.push(
          `${r.target.name} differs at line ${i + 1}:\n  broker: ${ref!.trace[i]}\n  ${r.target.name}: ${r.trace[i]}`,
        );
        verdict = 'differ';
        break;
      }
    }
  }
  const report = [
    `script (static: [${script.statics.join(',')}]):`,
    ...script.steps.map((s) => `  ${describeStreamsStep(s)}`),
    ...notes,
    ...runs.flatMap((r) => [
      `${r.target.name}:`,
      ...r.trace.map((l, i) => `  ${l}   [${r.states[i] ?? ''}]`),
    ]),
  ].join('\n');
  return { verdict, report };
}

/** Throws with the report when a target answered otherwise than the broker; repeats drifted runs. */
export async function expectSameStreamsAnswers(
  targets: Target[],
  script: StreamsScript,
  env: StreamsEnv,
  label: string,
  attempts = 3,
): Promise<void> {
  let last: StreamsComparison | null = null;
  for (let i = 0; i < attempts; i++) {
    last = await compareStreamsRuns(targets, script, env, label);
    if (process.env['KOP_GUARD_DIFF_VERBOSE']) console.log(`${last.verdict}\n${last.report}`);
    if (last.verdict === 'same') return;
    if (last.verdict === 'differ')
      throw new Error(`the proxy answered otherwise than the broker\n${last.report}`);
  }
  throw new Error(`the groups drifted apart on every attempt (timing): inconclusive\n${last?.report ?? ''}`);
}

// ---- generated scripts ------------------------------------------------------------------------

const anySlot = fc.integer({ min: 0, max: STREAMS_SLOTS - 1 });

function probeArb(focus: number | null): fc.Arbitrary<StreamsStep> {
  const slot =
    focus === null
      ? anySlot
      : fc.oneof({ weight: 3, arbitrary: fc.constant(focus) }, { weight: 1, arbitrary: anySlot });
  const commit = fc
    .record({
      slot,
      as: fc.constantFrom<StreamsAs>('current', 'current', 'previous', 'newer'),
      parts: fc.constantFrom<StreamsParts>('held', 'held', 'others', 'both'),
      version: fc.constantFrom<8 | 9 | 10>(10, 9, 9, 8),
      other: fc.boolean(),
    })
    .map(({ other, ...c }): StreamsStep => ({
      op: 'commit',
      ...c,
      ...(other ? { other: true as const } : {}),
    }));
  const fetch = fc
    .tuple(
      fc.option(slot, { nil: null, freq: 4 }),
      fc.constantFrom<StreamsAs>('current', 'previous', 'newer'),
    )
    .map(([s, as]): StreamsStep => ({ op: 'fetch', slot: s, as }));
  return fc.oneof(
    { weight: 6, arbitrary: commit },
    { weight: 2, arbitrary: fetch },
    { weight: 1, arbitrary: fc.constant<StreamsStep>({ op: 'commitAnonymous' }) },
    { weight: 2, arbitrary: slot.map((s): StreamsStep => ({ op: 'heartbeat', slot: s })) },
  );
}

const changeArb: fc.Arbitrary<StreamsStep> = fc.oneof(
  { weight: 2, arbitrary: anySlot.map((slot): StreamsStep => ({ op: 'leave', slot })) },
  { weight: 3, arbitrary: anySlot.map((slot): StreamsStep => ({ op: 'restart', slot })) },
  { weight: 2, arbitrary: fc.constant<StreamsStep>({ op: 'settle' }) },
  { weight: 1, arbitrary: fc.constant<StreamsStep>({ op: 'deleteOffsets' }) },
  { weight: 2, arbitrary: anySlot.map((slot): StreamsStep => ({ op: 'heartbeat', slot })) },
);

/**
 * Scripts of membership changes, each followed by one to three probes, mostly by the member the
 * change was about. A member that left only comes back by a restart (a new process).
 */
export function streamsScriptArb(maxChanges = 5): fc.Arbitrary<StreamsScript> {
  const episode = changeArb.chain((change) =>
    fc
      .array(probeArb('slot' in change ? change.slot : null), { minLength: 1, maxLength: 3 })
      .map((probes) => [change, ...probes]),
  );
  return fc
    .record({
      statics: fc.array(fc.boolean(), { minLength: STREAMS_SLOTS, maxLength: STREAMS_SLOTS }),
      steps: fc.array(episode, { minLength: 1, maxLength: maxChanges }).map((e) => e.flat()),
    })
    .map(dropStepsOfLeftMembers);
}

/**
 * A member that left neither heartbeats nor leaves again until it restarts (its commits and fetches
 * stay: a zombie's, with the identity it left with).
 */
function dropStepsOfLeftMembers(script: StreamsScript): StreamsScript {
  const gone = new Set<number>();
  const steps: StreamsStep[] = [];
  for (const step of script.steps) {
    if (step.op === 'restart') gone.delete(step.slot);
    else if ((step.op === 'heartbeat' || step.op === 'leave') && gone.has(step.slot)) continue;
    if (step.op === 'leave') gone.add(step.slot);
    steps.push(step);
  }
  return { ...script, steps };
}
