/**
 * The offset service: the proxy extension that answers OffsetCommit, OffsetFetch and OffsetDelete
 * from the offset store, and watches the group APIs the broker still answers (JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat, StreamsGroupHeartbeat, TxnOffsetCommit,
 * DeleteGroups).
 */
import type { OffsetStore } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey, getApiInfo } from '../../protocol/messages/api-info.js';
import type { AnyRequest } from '../../protocol/messages/api-info.js';
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
import type { BrokerAuthorizer } from './authorizer.js';
import type { BrokerLookups } from './broker-lookups.js';
import { CommitFence } from './commit-fence.js';
import { COMMITS_IN_PROGRESS } from './commits-in-progress.js';
import type { StreamsGroups } from './streams-groups.js';
import type { MemberLiveness } from './liveness.js';
import type { GuardPolicy } from './guard-policy.js';
import { GroupModes } from './group-modes.js';
import type { GroupModeOverride } from './group-modes.js';
import { GroupViews } from './group-views.js';
import { StreamsGroupViews } from './streams-group-views.js';
import { topologyUpdate } from './streams-topologies.js';
import { GroupWitness } from './group-witness.js';
import type { StoreGroupIndex } from './store-groups.js';
import { afterDeleteGroups, MembershipRecorder, membershipUpdate, OBSERVED_APIS } from './membership.js';
import { OffsetCommitApi } from './offset-commit.js';
import type { OffsetCommitMetrics } from './offset-commit.js';
import { handleOffsetFetch } from './offset-fetch.js';
import { handleOffsetDelete } from './offset-delete.js';
import { authorizeFor } from './offset-handler.js';
import { fetchByTopicId, FIRST_TOPIC_ID_VERSION } from './topic-id-offsets.js';
import { TopicIds } from './topic-ids.js';
import type { TopicIncarnations } from './topic-incarnations.js';
import { OlderTopicsHidden } from './older-topics-hidden.js';

/** What the offset service counts (proxy/ops/metrics). */
export type OffsetServiceMetrics = OffsetCommitMetrics;

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
  /**
   * Which topic of a name stored offsets belong to (a topic re-created): the service reads and
   * compares-and-sets through OlderTopicsHidden. Absent: all count.
   */
  incarnations?: TopicIncarnations;
}

/** Group tools' APIs whose answers are completed with the store's groups (group-views.ts). */
const GROUP_VIEW_APIS: ReadonlySet<number> = new Set([
  ApiKey.ListGroups,
  ApiKey.DescribeGroups,
  ApiKey.ConsumerGroupDescribe,
  ApiKey.StreamsGroupDescribe,
]);

/**
 * The versions the proxy answers from its store, per API it answers. OffsetCommit and OffsetFetch
 * v10 name topics by id (KIP-848), mapped to the stored names (topic-id-offsets.ts); they are
 * offered only where the broker offers them (advertisedVersions).
 */
const SERVED: ReadonlyMap<number, VersionRange> = new Map([
  [ApiKey.OffsetCommit, { min: 2, max: FIRST_TOPIC_ID_VERSION }],
  [ApiKey.OffsetFetch, { min: 1, max: FIRST_TOPIC_ID_VERSION }],
  [ApiKey.OffsetDelete, getApiInfo(ApiKey.OffsetDelete)!.validVersions],
]);
const ANSWERED: ReadonlySet<number> = new Set(SERVED.keys());

export class OffsetService implements ProxyExtension {
  readonly name = 'offsets';
  readonly apiKeys: ReadonlySet<number>;
  private readonly recorder: MembershipRecorder;
  private readonly views: GroupViews | null;
  private readonly streamsViews: StreamsGroupViews | null;
  /** What this instance saw of the groups, and the broker's word on them: the fence's evidence. */
  private readonly witness: GroupWitness;
  private readonly commits: OffsetCommitApi;
  private readonly topicIds: TopicIds;
  /** The store as clients see it: an older topic's offsets are none (older-topics-hidden.ts). */
  private readonly store: OffsetStore;

  constructor(private readonly opts: OffsetServiceOptions) {
    const incarnations = opts.incarnations;
    this.store = incarnations
      ? OlderTopicsHidden.over(opts.store, (topics) => incarnations.hiddenBefore(topics))
      : opts.store;
    this.recorder = new MembershipRecorder(this.store, opts.log);
    const authorizer = opts.authorizer;
    this.views = opts.groups
      ? new GroupViews(
          opts.groups,
          authorizer ? (info, groups) => authorizer.describableGroups(info, groups) : null,
          opts.log,
        )
      : null;
    const views = this.views;
    this.streamsViews = views
      ? new StreamsGroupViews((info, answers, wanted) => views.forgotten(info, answers, wanted), opts.log)
      : null;
    this.apiKeys = new Set([...ANSWERED, ...OBSERVED_APIS, ...(this.views ? GROUP_VIEW_APIS : [])]);
    this.topicIds = opts.topicIds ?? new TopicIds(() => Promise.resolve([]));
    const { lookups, log } = opts;
    const store = this.store;
    this.witness = new GroupWitness({
      store,
      lookups,
      log,
      ...(opts.liveness ? { liveness: opts.liveness } : {}),
      ...(opts.streams ? { streams: opts.streams } : {}),
    });
    this.commits = new OffsetCommitApi({
      guards: opts.guards,
      // Built once: commits are the hot path.
      fence: new CommitFence({ store, ...this.witness.commitSeams() }),
      unknownTopics: new GroupModes(opts.unknownTopics, opts.unknownTopicsGroups ?? []),
      mirrorCommits: opts.mirrorCommits,
      lookups,
      authorizer,
      topicIds: this.topicIds,
      log,
      ...(opts.metrics ? { metrics: opts.metrics } : {}),
    });
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

  /** A commit is in progress from its read (commits-in-progress.ts) to the end of its answer. */
  requestRead(info: RequestInfo, request: AnyRequest): void {
    if (request.apiKey === ApiKey.OffsetCommit && info.readSeq !== undefined)
      COMMITS_IN_PROGRESS.hold(request.body.groupId, info.readSeq);
  }

  requestDropped(info: RequestInfo, request: AnyRequest): void {
    if (request.apiKey === ApiKey.OffsetCommit && info.readSeq !== undefined)
      COMMITS_IN_PROGRESS.release(request.body.groupId, info.readSeq);
  }

  private async answer(info: RequestInfo, request: AnyRequest): Promise<RequestDecision> {
    const { lookups, authorizer } = this.opts;
    const store = this.store;
    switch (request.apiKey) {
      case ApiKey.OffsetCommit: {
        try {
          const body = await this.commits.answer(info, request.body);
          this.opts.incarnations?.committed();
          return { action: 'respond', body };
        } finally {
          if (info.readSeq !== undefined) COMMITS_IN_PROGRESS.release(request.body.groupId, info.readSeq);
        }
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
          ...authorizeFor(authorizer, info, 'delete'),
          ...(ask ? { deleteAtBroker: () => ask(ApiKey.OffsetDelete, info.apiVersion, req) } : {}),
          ...(lookups ? { groupIsEmptyAtBroker: (g: string) => lookups.groupIsEmpty(g) } : {}),
        });
        return { action: 'respond', body };
      }
      default:
        return { action: 'forward' };
    }
  }

  /** An OffsetFetch naming its topics (v10's by the names its ids map to). */
  private fetch(info: RequestInfo, req: OffsetFetchRequest): Promise<OffsetFetchResponse> {
    const { lookups } = this.opts;
    return handleOffsetFetch(req, info.apiVersion, {
      store: this.store,
      ...authorizeFor(this.opts.authorizer, info, 'describe'),
      fallbackUpstream: this.opts.fallbackUpstream,
      ...(lookups ? { fetchFromBroker: (g, tps, stable) => lookups.fetchOffsets(g, tps, stable) } : {}),
      ...this.witness.fetchSeams(),
    });
  }

  connectionClosed(connectionId: string): void {
    this.opts.authorizer?.forget(connectionId);
  }

  /** Authorization verdicts cached for open connections (0 with `--authorize off`). */
  get cachedVerdicts(): number {
    return this.opts.authorizer?.size ?? 0;
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
        // Only a group the broker deleted: a refused deletion (NON_EMPTY_GROUP) changes nothing.
        for (const r of res.results) this.witness.forget(r.groupId, r.errorCode === ErrorCode.NONE);
        const answered = await afterDeleteGroups(res, this.store, this.recorder);
        for (const r of answered.results) if (r.errorCode === 0) this.opts.groups?.drop(r.groupId);
        return answered;
      }
      case ApiKey.ListGroups:
        return this.viewed(() => views?.listGroups(info, exchange.request, exchange.response));
      case ApiKey.DescribeGroups:
        return this.viewed(() => views?.describeGroups(info, exchange.request, exchange.response));
      case ApiKey.ConsumerGroupDescribe:
        return this.viewed(() => views?.consumerGroupDescribe(info, exchange.request, exchange.response));
      case ApiKey.StreamsGroupDescribe:
        return this.viewed(() =>
          this.streamsViews?.streamsGroupDescribe(info, exchange.request, exchange.response),
        );
      default:
        break; // the membership APIs, below
    }
    // In memory first: it holds even when the store cannot take the update.
    await this.witness.observe(info, exchange);
    // The record keeps only a streams group's topology (streams-topologies.ts), for group tools:
    // its members are fenced on what this instance saw (streams-groups.ts).
    if (exchange.apiKey === ApiKey.StreamsGroupHeartbeat) {
      const update = topologyUpdate(exchange.request, exchange.response);
      if (update) await this.recorder.record(exchange.request.groupId, update);
      return undefined;
    }
    const observed = membershipUpdate(info.apiVersion, exchange);
    if (observed && !(await this.recorder.record(observed.group, observed.update)))
      this.witness.missedUpdate(observed.group);
    return undefined;
  }
}
