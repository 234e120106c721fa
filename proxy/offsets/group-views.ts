/**
 * Groups whose offsets live in the store, shown to group tools as a broker shows an empty group
 * with committed offsets. A broker forgets an empty group whose offsets it does not hold (after
 * offsets.retention.check.interval.ms, or at a restart), so without this kafka-consumer-groups
 * --list/--describe, AdminClient, kafka_exporter and Kafka UIs lose idle groups that the proxy
 * still has every offset of.
 *
 * What a broker answers for such a group (read off a real broker, and compared with one in
 * test/integration/groups-tools.test.ts) depends on what its members last used:
 *   - never joined (commits of assign() consumers and admin tools, a "simple" group): ListGroups
 *     protocolType "", state Empty, type classic; DescribeGroups Empty with protocolType "";
 *     ConsumerGroupDescribe GROUP_ID_NOT_FOUND ("not a consumer group").
 *   - the classic protocol: the same with protocolType "consumer".
 *   - the consumer protocol (KIP-848): ListGroups protocolType "consumer", type consumer;
 *     ConsumerGroupDescribe Empty with no members; DescribeGroups Dead (a classic-only view).
 *   - the streams protocol (KIP-1071): ListGroups protocolType "streams", type streams;
 *     DescribeGroups Dead; ConsumerGroupDescribe "not a consumer group"; StreamsGroupDescribe
 *     in streams-group-views.ts.
 * The broker's answer stands wherever it knows the group. A group is added to one broker's
 * ListGroups only: the one FindCoordinator names for it, so a tool that asks every broker sees it
 * once, and only where the client may describe it.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { ConsumerGroupDescribeRequest } from '../../protocol/messages/consumer-group-describe-request.js';
import type { ConsumerGroupDescribeResponse } from '../../protocol/messages/consumer-group-describe-response.js';
import type { DescribeGroupsRequest } from '../../protocol/messages/describe-groups-request.js';
import { defaultDescribeGroupsRequest } from '../../protocol/messages/describe-groups-request.js';
import type { DescribeGroupsResponse } from '../../protocol/messages/describe-groups-response.js';
import type { ListGroupsRequest } from '../../protocol/messages/list-groups-request.js';
import type { ListedGroup, ListGroupsResponse } from '../../protocol/messages/list-groups-response.js';
import type { RequestInfo } from '../core/extension.js';
import type { Logger } from '../common/log.js';
import type { StoreGroup, StoreGroupIndex } from './store-groups.js';

/** Which of these groups the client's principal may describe (all, when nobody checks). */
export type DescribeCheck = (info: RequestInfo, groups: string[]) => Promise<Set<string>>;

// A streams group's record also says which protocol its members last used when it has a
// topology (streams-topologies.ts): a streams group it is.
const protocolTypeOf = (g: StoreGroup): string =>
  g.streams ? 'streams' : g.protocol === null ? '' : 'consumer';
const groupTypeOf = (g: StoreGroup): string =>
  g.streams ? 'streams' : g.protocol === 'consumer' ? 'consumer' : 'classic';
const matches = (filter: string[], value: string): boolean =>
  filter.length === 0 || filter.some((f) => f.toLowerCase() === value.toLowerCase());

/**
 * A KIP-848 or streams group as a describe API shows it Empty, where only the broker's group knew
 * its epochs: they are 0.
 */
export const EMPTY_GROUP = {
  errorCode: ErrorCode.NONE,
  errorMessage: null,
  groupState: 'Empty',
  groupEpoch: 0,
  assignmentEpoch: 0,
} as const;

export class GroupViews {
  constructor(
    private readonly index: StoreGroupIndex,
    private readonly mayDescribe: DescribeCheck | null,
    private readonly log: Logger,
  ) {}

  /** ListGroups: the broker's groups, plus the store's groups this broker coordinates and does not list. */
  async listGroups(
    info: RequestInfo,
    req: ListGroupsRequest,
    res: ListGroupsResponse,
  ): Promise<ListGroupsResponse | undefined> {
    if (res.errorCode !== ErrorCode.NONE || info.nodeId === null) return undefined;
    const listed = new Set(res.groups.map((g) => g.groupId));
    const candidates = [...(await this.index.groups()).values()].filter(
      (g) =>
        !listed.has(g.group) &&
        matches(info.apiVersion >= 4 ? req.statesFilter : [], 'Empty') &&
        matches(info.apiVersion >= 5 ? req.typesFilter : [], groupTypeOf(g)),
    );
    if (candidates.length === 0) return undefined;
    const coordinators = await this.index.coordinatorsOf(candidates.map((g) => g.group));
    const here = candidates.filter((g) => coordinators.get(g.group) === info.nodeId);
    const allowed = this.mayDescribe
      ? await this.mayDescribe(
          info,
          here.map((g) => g.group),
        )
      : null;
    const added: ListedGroup[] = here
      .filter((g) => allowed === null || allowed.has(g.group))
      .map((g) => ({
        groupId: g.group,
        protocolType: protocolTypeOf(g),
        groupState: info.apiVersion >= 4 ? 'Empty' : '',
        groupType: info.apiVersion >= 5 ? groupTypeOf(g) : '',
      }));
    if (added.length === 0) return undefined;
    return { ...res, groups: [...res.groups, ...added] };
  }

  /**
   * DescribeGroups: a classic or simple group the broker does not know (Dead, or GROUP_ID_NOT_FOUND
   * from v6) is Empty when its offsets are here.
   */
  async describeGroups(
    _info: RequestInfo,
    _req: DescribeGroupsRequest,
    res: DescribeGroupsResponse,
  ): Promise<DescribeGroupsResponse | undefined> {
    let changed = false;
    const groups = [];
    for (const g of res.groups) {
      // Up to v5 a broker describes a group it does not know as Dead; from v6 (KIP-1043) it
      // answers GROUP_ID_NOT_FOUND.
      const unknown =
        (g.errorCode === ErrorCode.NONE && g.groupState === 'Dead') ||
        g.errorCode === ErrorCode.GROUP_ID_NOT_FOUND;
      const stored = unknown ? await this.index.get(g.groupId) : undefined;
      // A KIP-848 or streams group is Dead to DescribeGroups on a broker too, offsets or not.
      if (stored === undefined || stored.protocol === 'consumer' || stored.streams) {
        groups.push(g);
        continue;
      }
      changed = true;
      groups.push({
        ...g,
        errorCode: ErrorCode.NONE,
        errorMessage: null,
        groupState: 'Empty',
        protocolType: protocolTypeOf(stored),
        protocolData: '',
        members: [],
      });
    }
    return changed ? { ...res, groups } : undefined;
  }

  /**
   * ConsumerGroupDescribe: a KIP-848 group the broker does not know is Empty when its offsets are
   * here; a classic or simple one gets the broker's "is not a consumer group" (AdminClient then
   * describes it with DescribeGroups).
   */
  async consumerGroupDescribe(
    info: RequestInfo,
    _req: ConsumerGroupDescribeRequest,
    res: ConsumerGroupDescribeResponse,
  ): Promise<ConsumerGroupDescribeResponse | undefined> {
    const forgotten = await this.forgotten(info, res.groups, () => true);
    if (forgotten.size === 0) return undefined;
    return {
      ...res,
      groups: res.groups.map((g) => {
        const s = forgotten.get(g.groupId);
        if (s === undefined) return g;
        // A classic, simple or streams group with offsets: the broker's refusal, in its words.
        if (s.protocol !== 'consumer' || s.streams)
          return { ...g, errorMessage: `Group ${g.groupId} is not a consumer group.` };
        return {
          ...g,
          ...EMPTY_GROUP,
          assignorName: '',
          members: [],
        };
      }),
    };
  }

  /**
   * Of the groups answered GROUP_ID_NOT_FOUND, those the store has (and `wanted` takes) that the
   * broker does not know at all. GROUP_ID_NOT_FOUND also means "a group of another kind" on a
   * broker: only a group it calls Dead in DescribeGroups is one it does not know.
   */
  async forgotten(
    info: RequestInfo,
    answers: readonly { groupId: string; errorCode: number }[],
    wanted: (g: StoreGroup) => boolean,
  ): Promise<Map<string, StoreGroup>> {
    const stored = new Map<string, StoreGroup>();
    for (const a of answers) {
      if (a.errorCode !== ErrorCode.GROUP_ID_NOT_FOUND) continue;
      const s = await this.index.get(a.groupId);
      if (s !== undefined && wanted(s)) stored.set(a.groupId, s);
    }
    if (stored.size === 0) return stored;
    const dead = await this.deadAtBroker(info, [...stored.keys()]);
    for (const g of stored.keys()) if (!dead.has(g)) stored.delete(g);
    return stored;
  }

  /** The groups the broker calls Dead in DescribeGroups, asked on the client's own connection. */
  private async deadAtBroker(info: RequestInfo, groups: string[]): Promise<Set<string>> {
    if (!info.askBroker) return new Set();
    try {
      const res = await info.askBroker(ApiKey.DescribeGroups, 5, {
        ...defaultDescribeGroupsRequest(),
        groups,
      });
      return new Set(
        res.groups
          .filter((g) => g.errorCode === ErrorCode.NONE && g.groupState === 'Dead')
          .map((g) => g.groupId),
      );
    } catch (err) {
      this.log.debug('could not confirm groups with DescribeGroups', { error: err });
      return new Set();
    }
  }
}
