/**
 * The offset service: the proxy extension that answers OffsetCommit, OffsetFetch and OffsetDelete
 * from the offset store, and watches the group APIs the broker still answers (JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat, StreamsGroupHeartbeat, TxnOffsetCommit,
 * DeleteGroups).
 */
import type { CommitIdentity, OffsetStore, OffsetWrite } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import type { AnyRequest } from '../../protocol/messages/index.js';
import type { ConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import type { ConsumerGroupHeartbeatResponse } from '../../protocol/messages/consumer-group-heartbeat-response.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import type { OffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import type {
  AnyExchange,
  AnyResponseBody,
  ProxyExtension,
  RequestDecision,
  RequestInfo,
  VersionRange,
} from '../core/extension.js';
import type { Logger } from '../common/log.js';
import type { BrokerAuthorizer, Operation } from './authorizer.js';
import type { Authorize } from './offset-handler.js';
import type { BrokerLookups } from './broker-lookups.js';
import { AssignmentEpochs, takesOverStaticLeave } from './assignment-epochs.js';
import { commitVerdict, fetchVerdict } from './broker-verdict.js';
import { StreamsGroups } from './streams-groups.js';
import { streamsCommitVerdict, streamsFetchVerdict } from './streams-verdict.js';
import type { CommittedPartition, Verdict } from './broker-verdict.js';
import { MemberLiveness } from './liveness.js';
import type { GuardPolicy } from './guard-policy.js';
import { GroupModes } from './group-modes.js';
import type { GroupModeOverride } from './group-modes.js';
import { GroupViews } from './group-views.js';
import type { StoreGroupIndex } from './store-groups.js';
import { afterDeleteGroups, MembershipRecorder, membershipUpdate, OBSERVED_APIS } from './membership.js';
import { handleOffsetCommit } from './offset-commit.js';
import type { CommitDeps, CommitRefusal } from './offset-commit.js';
import { handleOffsetFetch } from './offset-fetch.js';
import { handleOffsetDelete } from './offset-delete.js';
import { commitByTopicId, fetchByTopicId, FIRST_TOPIC_ID_VERSION } from './topic-id-offsets.js';
import { TopicIds } from './topic-ids.js';

type SeenTaskQuery<R = boolean> = (memberId: string, subtopologyId: string, partition: number) => R;

/** A commit without any member identity: assign() consumers and admin tools. */
const isAnonymous = (id: CommitIdentity): boolean =>
  id.generationIdOrMemberEpoch < 0 && id.memberId === '' && id.groupInstanceId === null;

export interface OffsetServiceMetrics {
  commitAccepted(group: string, partitions: number): void;
  commitRefused(group: string, reason: CommitRefusal, partitions: number): void;
  mirrored(ok: boolean): void;
}

export interface OffsetServiceOptions {
  store: OffsetStore;
  guards: GuardPolicy;
  /** Commits to topics or partitions the cluster lacks: refused as a broker does, or stored (mirroring). */
  unknownTopics: 'allow' | 'reject';
  /** Per-group overrides of unknownTopics (--unknown-topics-group). */
  unknownTopicsGroups?: readonly GroupModeOverride<'allow' | 'reject'>[];
  fallbackUpstream: boolean;
  mirrorCommits: boolean;
  /** The proxy's own client of the cluster; null only in unit tests without a broker. */
  lookups: BrokerLookups | null;
  log: Logger;
  metrics?: OffsetServiceMetrics;
  /** Checks the cluster's ACLs for each client (the default); null: no checks (`--authorize off`). */
  authorizer: BrokerAuthorizer | null;
  /** The store's groups for group tools (ListGroups, DescribeGroups, ConsumerGroupDescribe); absent: the broker's answers stand. */
  groups?: StoreGroupIndex;
  /** What this instance saw of members' standing (tests pass one with a fake clock). */
  liveness?: MemberLiveness;
  /** What this instance saw of streams groups (tests pass one with a fake clock). */
  streams?: StreamsGroups;
  /** Topic ids and names from the cluster's metadata, for v10; absent: no topic id is known. */
  topicIds?: TopicIds;
}

/** Group tools' APIs whose answers are completed with the store's groups (group-views.ts). */
const GROUP_VIEW_APIS: ReadonlySet<number> = new Set([
  ApiKey.ListGroups,
  ApiKey.DescribeGroups,
  ApiKey.ConsumerGroupDescribe,
]);

/**
 * The versions the proxy answers from its store, per API it answers. OffsetCommit and OffsetFetch
 * v10 name topics by id (KIP-848), mapped to the stored names (topic-id-offsets.ts); they are
 * offered only where the broker offers them (advertisedVersions).
 */
const SERVED: ReadonlyMap<number, VersionRange> = new Map([
  [ApiKey.OffsetCommit, { min: 2, max: FIRST_TOPIC_ID_VERSION }],
  [ApiKey.OffsetFetch, { min: 1, max: FIRST_TOPIC_ID_VERSION }],
  [ApiKey.OffsetDelete, getApiCodec(ApiKey.OffsetDelete)!.validVersions],
]);
const ANSWERED: ReadonlySet<number> = new Set(SERVED.keys());

export class OffsetService implements ProxyExtension {
  readonly name = 'offsets';
  readonly apiKeys: ReadonlySet<number>;
  private readonly recorder: MembershipRecorder;
  private readonly views: GroupViews | null;
  private readonly liveness: MemberLiveness;
  private readonly assignmentEpochs = new AssignmentEpochs();
  private readonly streams: StreamsGroups;
  /** Groups of a type the guard does not know, already logged (once per group). */
  private readonly deferredLogged = new Set<string>();
  private readonly topicIds: TopicIds;

  /** What every commit needs, built once (not per request: commits are the hot path). */
  private readonly commitDeps: CommitDeps;
  /** The same for groups whose commits to unknown topics are refused (topics are looked up). */
  private readonly rejectingDeps: CommitDeps;
  private readonly unknownTopics: GroupModes<'allow' | 'reject'>;

  constructor(private readonly opts: OffsetServiceOptions) {
    this.recorder = new MembershipRecorder(opts.store, opts.log);
    const authorizer = opts.authorizer;
    this.views = opts.groups
      ? new GroupViews(
          opts.groups,
          authorizer ? (info, groups) => authorizer.describableGroups(info, groups) : null,
          opts.log,
        )
      : null;
    this.apiKeys = new Set([...ANSWERED, ...OBSERVED_APIS, ...(this.views ? GROUP_VIEW_APIS : [])]);
    this.liveness = opts.liveness ?? new MemberLiveness();
    this.streams = opts.streams ?? new StreamsGroups();
    this.topicIds = opts.topicIds ?? new TopicIds(() => Promise.resolve([]));
    const { store, lookups } = opts;
    this.unknownTopics = new GroupModes(opts.unknownTopics, opts.unknownTopicsGroups ?? []);
    this.commitDeps = {
      store,
      guards: opts.guards,
      ...(lookups
        ? {
            brokerVerdict: (g: string, id: CommitIdentity, ps: readonly CommittedPartition[]) =>
              this.commitVerdict(lookups, g, id, ps),
            committerFresh: (g: string, id: CommitIdentity) => this.committerFresh(g, id),
            // Below v9 a streams member's commit is UNSUPPORTED_VERSION: the broker's verdict says so.
            vouchedOutsideRecord: (g: string, id: CommitIdentity) =>
              id.requestVersion >= 9 && this.streams.fresh(g, id.memberId, id.generationIdOrMemberEpoch),
          }
        : {}),
      onRefused: (g, reason, n) => this.opts.metrics?.commitRefused(g, reason, n),
    };
    // Without a cluster to ask (unit tests) nothing can be known to be missing.
    this.rejectingDeps = lookups
      ? {
          ...this.commitDeps,
          topicExists: (t: string, p: number) => lookups.topicExists(t, p).catch(() => true),
        }
      : this.commitDeps;
  }

  /** The broker's decision on a commit; a classic member it confirmed counts as freshly seen. */
  private async commitVerdict(
    lookups: BrokerLookups,
    group: string,
    id: CommitIdentity,
    partitions: readonly CommittedPartition[],
  ): Promise<Verdict> {
    const { store } = this.opts;
    const state = await store.getGroup(group);
    // Its commits are the broker's to take (offset-commit.ts): nothing to ask first.
    if (state?.transactional) return { code: null, updates: [], transactional: true };
    const known = {
      state,
      hasOffsets: async () => (await store.fetch(group, null)).length > 0,
      assignmentFloor: (memberId: string, topicId: string, partition: number) =>
        this.assignmentEpochs.floor(group, memberId, topicId, partition),
      streamsSeen: this.streams.isStreamsGroup(group),
      streams: () => streamsCommitVerdict(lookups, group, id, partitions, this.seenTasks(group)),
      unknownType: () => lookups.unknownGroupType(group),
    };
    const verdict = await commitVerdict(lookups, group, id, known, partitions);
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
  private seenTasks(group: string): { holdsTask: SeenTaskQuery; taskFloor: SeenTaskQuery<number> } {
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
    this.opts.log.warn('group type unknown to the commit guard: its commits are not fenced', {
      group,
      type,
    });
  }

  private committerFresh(group: string, id: CommitIdentity): boolean {
    // The store's record has no streams members: an anonymous commit is the broker's to judge.
    if (isAnonymous(id)) return !this.liveness.isUncertain(group) && !this.streams.isStreamsGroup(group);
    const gen = id.generationIdOrMemberEpoch;
    return (
      this.liveness.classicFresh(group, id.memberId, gen) ||
      this.liveness.consumerFresh(group, id.memberId, gen)
    );
  }

  interceptsRequest(apiKey: number): boolean {
    return ANSWERED.has(apiKey);
  }

  observesResponse(apiKey: number): boolean {
    return OBSERVED_APIS.has(apiKey) || (this.views !== null && GROUP_VIEW_APIS.has(apiKey));
  }

  /**
   * The offset APIs are served in every version the codec knows, whatever the broker supports:
   * OffsetCommit v0-1, removed in Kafka 4, work again for legacy clients.
   */
  advertisedVersions(apiKey: number, broker?: VersionRange): VersionRange | undefined {
    const served = SERVED.get(apiKey);
    // v10 (topic ids) only where the broker has it: clients negotiate the version they would
    // directly, and a transactional group's v10 commit goes to the broker as sent.
    if (served?.max === FIRST_TOPIC_ID_VERSION && broker && broker.max < FIRST_TOPIC_ID_VERSION)
      return { min: served.min, max: FIRST_TOPIC_ID_VERSION - 1 };
    return served;
  }

  /** Per client connection, the end of the requests of it being answered (see handleRequest). */
  private readonly inOrder = new Map<string, Promise<unknown>>();

  /**
   * A broker handles one request of a connection at a time, so a client that pipelines a commit
   * and then a fetch reads its own write. The proxy answers a connection's offset requests one
   * after the other for the same reason: concurrently, a fetch could read the store before an
   * earlier commit was applied (an LMDB write lands after the event-loop turn).
   */
  handleRequest(info: RequestInfo, request: AnyRequest): Promise<RequestDecision> {
    const key = info.connectionId;
    const previous = this.inOrder.get(key);
    const run = previous ? previous.then(() => this.answer(info, request)) : this.answer(info, request);
    const settled = run.catch(() => undefined);
    this.inOrder.set(key, settled);
    void settled.then(() => {
      if (this.inOrder.get(key) === settled) this.inOrder.delete(key);
    });
    return run;
  }

  private async answer(info: RequestInfo, request: AnyRequest): Promise<RequestDecision> {
    const { store, lookups } = this.opts;
    switch (request.apiKey) {
      case ApiKey.OffsetCommit: {
        const req = request.body;
        const body =
          info.apiVersion >= FIRST_TOPIC_ID_VERSION
            ? await commitByTopicId(req, this.topicIds, {
                answer: (named) => this.commit(info, named),
                onUnknownIds: (n) => this.opts.metrics?.commitRefused(req.groupId, 'unknown_topic', n),
                onUnresolved: (n) => this.opts.metrics?.commitRefused(req.groupId, 'broker_unanswered', n),
                ...this.groupRefusalFor(info, req.groupId),
              })
            : await this.commit(info, req);
        return { action: 'respond', body };
      }
      case ApiKey.OffsetFetch: {
        const req = request.body;
        const body =
          info.apiVersion >= FIRST_TOPIC_ID_VERSION
            ? await fetchByTopicId(req, this.topicIds, { answer: (named) => this.fetch(info, named) })
            : await this.fetch(info, req);
        return { action: 'respond', body };
      }
      case ApiKey.OffsetDelete: {
        const req = request.body;
        const ask = info.askBroker;
        const body = await handleOffsetDelete(req, info.apiVersion, {
          store,
          ...this.authorizeFor(info, 'delete'),
          ...(ask
            ? {
                deleteAtBroker: () => ask(ApiKey.OffsetDelete, info.apiVersion, req),
              }
            : {}),
          ...(lookups ? { groupIsEmptyAtBroker: (g: string) => lookups.groupIsEmpty(g) } : {}),
        });
        return { action: 'respond', body };
      }
      default:
        return { action: 'forward' };
    }
  }

  /** An OffsetCommit naming its topics (v10's by the names its ids map to). */
  private commit(info: RequestInfo, req: OffsetCommitRequest): Promise<OffsetCommitResponse> {
    const deps = this.unknownTopics.modeFor(req.groupId) === 'reject' ? this.rejectingDeps : this.commitDeps;
    return handleOffsetCommit(req, info.apiVersion, {
      ...deps,
      ...this.authorizeFor(info, 'read'),
      ...this.atBroker(info, req),
      onAccepted: (g, writes) => this.accepted(g, req, info.apiVersion, writes),
    });
  }

  /** An OffsetFetch naming its topics (v10's by the names its ids map to). */
  private fetch(info: RequestInfo, req: OffsetFetchRequest): Promise<OffsetFetchResponse> {
    const lookups = this.opts.lookups;
    return handleOffsetFetch(req, info.apiVersion, {
      store: this.opts.store,
      ...this.authorizeFor(info, 'describe'),
      fallbackUpstream: this.opts.fallbackUpstream,
      ...(lookups
        ? {
            fetchFromBroker: (g, tps, stable) => lookups.fetchOffsets(g, tps, stable),
            memberFresh: (g: string, m: string | null, e: number) =>
              m !== null && (this.liveness.consumerFresh(g, m, e) || this.streams.fresh(g, m, e)),
            memberVerdict: (g: string, m: string | null, e: number) =>
              fetchVerdict(lookups, g, m, e, () => streamsFetchVerdict(lookups, g, m, e)),
          }
        : {}),
    });
  }

  /**
   * A commit sent on as the client sent it, on its own connection (same principal), in its
   * version, or in the broker's lowest where the broker no longer has the client's: Kafka 4
   * removed OffsetCommit v0-1, which the proxy serves, and closes a connection that sends them.
   * v2 carries everything v1 does but the partitions' commit timestamps (the broker takes its own
   * time, as for every later version); a v0 commit is anonymous in v2 too.
   */
  private atBroker(info: RequestInfo, req: OffsetCommitRequest): Pick<CommitDeps, 'commitAtBroker'> {
    const ask = info.askBroker;
    if (!ask) return {};
    const lookups = this.opts.lookups;
    return {
      commitAtBroker: async () => {
        const min = lookups
          ? await lookups
              .brokerMinVersion(info.nodeId, req.groupId, ApiKey.OffsetCommit)
              .catch(() => undefined)
          : undefined;
        return ask(ApiKey.OffsetCommit, Math.max(info.apiVersion, min ?? 0), req);
      },
    };
  }

  /** A v10 commit's group-level authorization, counted as offset-commit.ts counts its refusals. */
  private groupRefusalFor(
    info: RequestInfo,
    group: string,
  ): { groupRefusal?: (n: number) => Promise<number> } {
    const authorizer = this.opts.authorizer;
    if (!authorizer) return {};
    return {
      groupRefusal: async (n) => {
        const { groupError } = await authorizer.authorize(info, 'read', group, []);
        if (groupError !== ErrorCode.NONE) {
          const reason =
            groupError === ErrorCode.GROUP_AUTHORIZATION_FAILED ? 'unauthorized' : 'broker_unanswered';
          this.opts.metrics?.commitRefused(group, reason, n);
        }
        return groupError;
      },
    };
  }

  /** The handlers' `authorize` for this request's connection (none with `--authorize off`). */
  private authorizeFor(info: RequestInfo, op: Operation): { authorize?: Authorize } {
    const authorizer = this.opts.authorizer;
    return authorizer ? { authorize: (g, topics) => authorizer.authorize(info, op, g, topics) } : {};
  }

  connectionClosed(connectionId: string): void {
    this.opts.authorizer?.forget(connectionId);
  }

  /** Authorization verdicts cached for open connections (0 with `--authorize off`). */
  get cachedVerdicts(): number {
    return this.opts.authorizer?.size ?? 0;
  }

  private accepted(group: string, req: OffsetCommitRequest, version: number, writes: OffsetWrite[]): void {
    this.opts.metrics?.commitAccepted(group, writes.length);
    const lookups = this.opts.lookups;
    if (!this.opts.mirrorCommits || !lookups) return;
    // Asynchronous: the client's commit is acknowledged by the store, not by the broker.
    lookups
      .mirrorCommit(
        group,
        {
          generationIdOrMemberEpoch: req.generationIdOrMemberEpoch,
          memberId: req.memberId,
          groupInstanceId: version >= 7 ? req.groupInstanceId : null,
        },
        writes,
      )
      .then(
        (refused) => {
          this.opts.metrics?.mirrored(refused === 0);
          if (refused > 0)
            this.opts.log.warn('broker refused a mirrored commit', { group, partitions: refused });
        },
        (err: unknown) => {
          this.opts.metrics?.mirrored(false);
          this.opts.log.warn('mirrored commit failed', { group, error: err });
        },
      );
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

  /** A group view that cannot be built (store or broker unreachable) leaves the broker's answer as it is. */
  private async viewed<T>(build: () => Promise<T | undefined> | undefined): Promise<T | undefined> {
    try {
      return await build();
    } catch (err) {
      this.opts.log.warn("could not add the store's groups to a group listing", { error: err });
      return undefined;
    }
  }

  async onResponse(info: RequestInfo, exchange: AnyExchange): Promise<AnyResponseBody | undefined> {
    const views = this.views;
    switch (exchange.apiKey) {
      case ApiKey.DeleteGroups: {
        const res = exchange.response;
        for (const r of res.results) {
          this.liveness.forget(r.groupId);
          this.streams.forget(r.groupId);
          // Only a group the broker deleted: a refused deletion (NON_EMPTY_GROUP) changes nothing.
          if (r.errorCode === ErrorCode.NONE) this.assignmentEpochs.forget(r.groupId);
        }
        const answered = await afterDeleteGroups(res, this.opts.store, this.recorder);
        for (const r of answered.results) if (r.errorCode === 0) this.opts.groups?.drop(r.groupId);
        return answered;
      }
      case ApiKey.ListGroups:
        return this.viewed(() => views?.listGroups(info, exchange.request, exchange.response));
      case ApiKey.DescribeGroups:
        return this.viewed(() => views?.describeGroups(info, exchange.request, exchange.response));
      case ApiKey.ConsumerGroupDescribe:
        return this.viewed(() => views?.consumerGroupDescribe(info, exchange.request, exchange.response));
      default:
        break; // the membership APIs, below
    }
    // In memory first: it holds even when the store cannot take the update.
    this.liveness.observe(info.apiVersion, exchange);
    if (exchange.apiKey === ApiKey.StreamsGroupHeartbeat) {
      // Streams groups are not in the store's record (streams-groups.ts): nothing to write.
      this.streams.observe(exchange.request, exchange.response);
      return undefined;
    }
    if (exchange.apiKey === ApiKey.ConsumerGroupHeartbeat) {
      await this.staticTakeoverSeenElsewhere(exchange.request, exchange.response);
      this.assignmentEpochs.observe(exchange.request, exchange.response);
    }
    const observed = membershipUpdate(info.apiVersion, exchange);
    if (observed && !(await this.recorder.record(observed.group, observed.update)))
      this.liveness.markUncertain(observed.group);
    return undefined;
  }
}
