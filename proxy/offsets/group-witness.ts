/**
 * What this proxy instance saw of the groups' members, and the broker's word where that is not
 * enough: the evidence the commit fence (commit-fence.ts) and OffsetFetch's member check
 * (offset-fetch.ts) decide on. It takes the group APIs' answers as they pass (classic and KIP-848
 * liveness, streams groups, KIP-848 assignment epochs) and asks the broker's verdict
 * (broker-verdict.ts, streams-verdict.ts) with the store's record the fence read. Nothing here
 * reads a commit's group record itself: the one store read it makes is a static member's join
 * this instance did not see the previous member leave (staticTakeoverSeenElsewhere).
 */
import type { CommitIdentity, GroupState, OffsetStore } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { ConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import type { ConsumerGroupHeartbeatResponse } from '../../protocol/messages/consumer-group-heartbeat-response.js';
import type { AnyExchange, RequestInfo } from '../core/extension.js';
import type { Logger } from '../common/log.js';
import { AnonymousClearance } from './anonymous-clearance.js';
import { AssignmentEpochs, takesOverStaticLeave } from './assignment-epochs.js';
import { commitVerdict, fetchVerdict } from './broker-verdict.js';
import { EpochsAtRead } from './epochs-at-read.js';
import type { CommittedPartition, KnownGroup, Verdict } from './broker-verdict.js';
import type { BrokerLookups } from './broker-lookups.js';
import type { FenceSeams } from './commit-fence.js';
import { MemberLiveness } from './liveness.js';
import type { FetchDeps } from './offset-fetch.js';
import { StreamsGroups } from './streams-groups.js';
import { streamsCommitVerdict, streamsFetchVerdict } from './streams-verdict.js';
import type { SeenTasks } from './streams-verdict.js';

/** A commit without any member identity: assign() consumers and admin tools. */
const isAnonymous = (id: CommitIdentity): boolean =>
  id.generationIdOrMemberEpoch < 0 && id.memberId === '' && id.groupInstanceId === null;

export interface GroupWitnessOptions {
  store: OffsetStore;
  /** The proxy's own client of the cluster; null only in unit tests without a broker. */
  lookups: BrokerLookups | null;
  log: Logger;
  /** What this instance saw of members' standing (tests pass one with a fake clock). */
  liveness?: MemberLiveness;
  /** What this instance saw of streams groups (tests pass one with a fake clock). */
  streams?: StreamsGroups;
  /** Groups whose anonymous commits the broker accepted lately (tests pass one with a fake clock). */
  anonymous?: AnonymousClearance;
}

export class GroupWitness {
  private readonly liveness: MemberLiveness;
  private readonly streams: StreamsGroups;
  private readonly anonymous: AnonymousClearance;
  private readonly assignmentEpochs = new AssignmentEpochs();
  private readonly epochsAtRead = new EpochsAtRead();
  /** Groups of a type the guard does not know, already logged (once per group). */
  private readonly deferredLogged = new Set<string>();

  constructor(private readonly opts: GroupWitnessOptions) {
    this.liveness = opts.liveness ?? new MemberLiveness();
    this.streams = opts.streams ?? new StreamsGroups();
    this.anonymous = opts.anonymous ?? new AnonymousClearance();
  }

  /** The commit fence's questions beyond the store; none without a broker (the store decides). */
  commitSeams(): Omit<FenceSeams, 'store'> {
    const lookups = this.opts.lookups;
    if (!lookups) return {};
    return {
      brokerVerdict: (g, id, ps, record) => this.commitVerdict(lookups, g, id, ps, record),
      committerFresh: (g, id) => this.committerFresh(g, id),
      // Below v9 a streams member's commit is UNSUPPORTED_VERSION: the broker's verdict says so.
      vouchedOutsideRecord: (g, id) =>
        id.requestVersion >= 9 && this.streams.fresh(g, id.memberId, id.generationIdOrMemberEpoch),
      heldAtRead: (g, id, at) => this.epochsAtRead.heldAt(g, id.memberId, id.generationIdOrMemberEpoch, at),
    };
  }

  /** OffsetFetch v9's member check: fresh evidence, or the broker's answer (none without a broker). */
  fetchSeams(): Pick<FetchDeps, 'memberFresh' | 'memberVerdict'> {
    const lookups = this.opts.lookups;
    if (!lookups) return {};
    return {
      memberFresh: (g, m, e) =>
        m !== null && (this.liveness.consumerFresh(g, m, e) || this.streams.fresh(g, m, e)),
      memberVerdict: (g, m, e) => fetchVerdict(lookups, g, m, e, () => streamsFetchVerdict(lookups, g, m, e)),
    };
  }

  /** The broker's decision on a commit; a classic member it confirmed counts as freshly seen. */
  private async commitVerdict(
    lookups: BrokerLookups,
    group: string,
    id: CommitIdentity,
    partitions: readonly CommittedPartition[],
    record: GroupState | null,
  ): Promise<Verdict> {
    const { store } = this.opts;
    const known: KnownGroup = {
      state: record,
      hasOffsets: async () => (await store.fetch(group, null)).length > 0,
      assignmentFloor: (memberId, topicId, partition) =>
        this.assignmentEpochs.floor(group, memberId, topicId, partition),
      streamsSeen: this.streams.isStreamsGroup(group),
      streams: () => streamsCommitVerdict(lookups, group, id, partitions, this.seenTasks(group)),
      unknownType: () => lookups.unknownGroupType(group),
    };
    const verdict = await commitVerdict(lookups, group, id, known, partitions);
    if (isAnonymous(id)) {
      if (verdict.code === null) this.anonymous.accepted(group);
      else this.anonymous.forget(group);
    }
    if (verdict.deferredType !== undefined) this.deferred(group, verdict.deferredType);
    if (verdict.confirmed)
      this.liveness.classicConfirmed(
        group,
        id.memberId,
        id.generationIdOrMemberEpoch,
        verdict.confirmed.rebalancing,
      );
    return verdict;
  }

  /** What this instance saw of a streams group's tasks, for an older epoch's commit. */
  private seenTasks(group: string): SeenTasks {
    return {
      holdsTask: (m, s, p) => this.streams.holdsTask(group, m, s, p),
      taskFloor: (m, s, p) => this.streams.taskFloor(group, m, s, p),
    };
  }

  /** A group the broker lists under a type the guard does not know: its commits go unfenced. */
  private deferred(group: string, type: string): void {
    if (this.deferredLogged.has(group)) return;
    if (this.deferredLogged.size > 10_000) this.deferredLogged.clear();
    this.deferredLogged.add(group);
    this.opts.log.warn('group type unknown to the commit guard: its commits are not fenced', { group, type });
  }

  private committerFresh(group: string, id: CommitIdentity): boolean {
    // The store's record has no streams members: an anonymous commit is the broker's to judge,
    // unless it accepted one for the group lately (anonymous-clearance.ts).
    if (isAnonymous(id))
      return (
        !this.liveness.isUncertain(group) &&
        !this.streams.isStreamsGroup(group) &&
        this.anonymous.cleared(group)
      );
    const gen = id.generationIdOrMemberEpoch;
    return (
      this.liveness.classicFresh(group, id.memberId, gen) ||
      this.liveness.consumerFresh(group, id.memberId, gen)
    );
  }

  /**
   * Takes a group API's answer (before the client sees it; in memory, so it holds even when the
   * store cannot take the record's update).
   */
  async observe(info: RequestInfo, exchange: AnyExchange): Promise<void> {
    this.liveness.observe(info.apiVersion, exchange);
    if (exchange.apiKey === ApiKey.StreamsGroupHeartbeat)
      this.streams.observe(exchange.request, exchange.response);
    if (exchange.apiKey === ApiKey.ConsumerGroupHeartbeat) {
      // Before the await: a commit being decided meanwhile may already need this answer.
      if (info.readSeq !== undefined)
        this.epochsAtRead.observe(
          { seq: info.readSeq, connectionId: info.connectionId },
          exchange.request,
          exchange.response,
        );
      await this.staticTakeoverSeenElsewhere(exchange.request, exchange.response);
      this.assignmentEpochs.observe(exchange.request, exchange.response);
    }
  }

  /** The store could not take what the broker decided for the group: its record is not to be trusted alone. */
  missedUpdate(group: string): void {
    this.liveness.markUncertain(group);
  }

  /** A DeleteGroups answer for the group; `deleted`: the broker deleted it (a refusal changes no epochs). */
  forget(group: string, deleted: boolean): void {
    this.liveness.forget(group);
    this.streams.forget(group);
    this.anonymous.forget(group);
    this.epochsAtRead.forget(group);
    if (deleted) this.assignmentEpochs.forget(group);
  }

  /**
   * A static member's join, when this instance did not see its instance's previous member leave
   * with -2: the store's record, written by the instance that did (or that tried to), says
   * whether the join may take over that member's partitions (at epoch 0 at the broker), before
   * assignment epochs take the answer. Joins of static members are rare; a store that cannot be
   * read leaves the join a possible takeover (takesOverStaticLeave).
   */
  private async staticTakeoverSeenElsewhere(
    req: ConsumerGroupHeartbeatRequest,
    res: ConsumerGroupHeartbeatResponse,
  ): Promise<void> {
    const instance = req.instanceId;
    if (req.memberEpoch !== 0 || instance === null || res.errorCode !== ErrorCode.NONE) return;
    if (this.assignmentEpochs.knowsStaticLeave(req.groupId, instance)) return;
    const state = await this.opts.store.getGroup(req.groupId).catch(() => 'unreadable' as const);
    if (takesOverStaticLeave(state, req, res))
      this.assignmentEpochs.staticLeftElsewhere(req.groupId, instance);
  }
}
