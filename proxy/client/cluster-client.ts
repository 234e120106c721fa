/**
 * The proxy's own client of the cluster, for what the offset service must ask the brokers itself:
 * metadata (which topics exist), group coordinators, a group's state, offsets the broker still
 * holds (migration, transactional groups), log-end offsets (lag), and mirrored commits.
 *
 * One persistent connection per broker, requests pipelined with correlation ids, and API versions
 * negotiated once per connection (the highest both the broker and the codec know), so it works
 * against Kafka 3.x and 4.x alike. Everything has a deadline of `timeoutMs` (--request-timeout-ms):
 * a connection (TCP, ApiVersions and SASL together), one request (its connection, and for `'any'`
 * every broker it tries, included), and the composite work done for one client request
 * (`within`: finding the coordinator, asking it, asking again once it moved).
 */
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { defaultFindCoordinatorRequest } from '../../protocol/messages/find-coordinator-request.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { KnownApiKey, ResponseBody } from '../../protocol/messages/api-info.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import type { BrokerMap, HostPort } from '../core/broker-map.js';
import type { Logger } from '../common/log.js';
import { silentLogger } from '../common/log.js';
import type { SaslCredentials } from './sasl-client.js';
import { RELAY_DEFAULTS } from '../core/defaults.js';
import type { UpstreamTls } from '../core/upstream-socket.js';
import { BrokerChannel, withDeadline } from './broker-channel.js';
import type { BodyFor } from './broker-channel.js';
import { ClusterRequestError, isClusterError } from './cluster-error.js';

export type { BodyFor } from './broker-channel.js';
export { ClusterRequestError, isClusterError } from './cluster-error.js';
export type { ClusterErrorCode } from './cluster-error.js';

export interface ClusterClientOptions {
  bootstrapServers: HostPort[];
  brokers: BrokerMap;
  tls?: UpstreamTls | null;
  timeoutMs?: number;
  log?: Logger;
  /** Credentials of the proxy's own principal, for clusters that require SASL. */
  sasl?: SaslCredentials | null;
}

export class ClusterClient {
  private readonly channels = new Map<string, BrokerChannel>();
  private readonly log: Logger;
  private bootstrapIndex = 0;
  private closed = false;

  constructor(private readonly opts: ClusterClientOptions) {
    this.log = opts.log ?? silentLogger;
  }

  private channel(target: HostPort): BrokerChannel {
    // A closed client opens no connection again (a request to 'any' would try the next broker).
    if (this.closed) throw new ClusterRequestError('CLOSED', 'client closed');
    const key = `${target.host}:${target.port}`;
    let ch = this.channels.get(key);
    if (!ch) {
      ch = new BrokerChannel(target, this.opts.tls ?? null, this.timeoutMs, this.opts.sasl ?? null);
      this.channels.set(key, ch);
    }
    return ch;
  }

  /** The deadline of every request, connect and `within` (--request-timeout-ms). */
  get timeoutMs(): number {
    return this.opts.timeoutMs ?? RELAY_DEFAULTS.requestTimeoutMs;
  }

  /**
   * Runs work of several requests done for one client request (find the coordinator, ask it,
   * maybe again) and fails it with a TIMEOUT ClusterRequestError once `timeoutMs` has passed, so the client
   * gets its answer in time whatever the brokers do. Work that goes on after that ends by its own
   * requests' deadlines; its result is dropped.
   */
  within<T>(what: string, work: () => Promise<T>): Promise<T> {
    return withDeadline(work(), Date.now() + this.timeoutMs, () => what);
  }

  /**
   * Sends to broker `nodeId`, or to any reachable broker. Resolves with the decoded body and the
   * version used; rejects with a ClusterRequestError whose `code` says why.
   */
  async request<K extends KnownApiKey>(
    target: number | 'any',
    apiKey: K,
    body: BodyFor<K>,
    atMostVersion?: number,
  ): Promise<{ version: number; body: ResponseBody<K> }> {
    const deadline = Date.now() + this.timeoutMs;
    if (target !== 'any')
      return this.channel(this.addressOf(target)).request(apiKey, body, atMostVersion, deadline);
    const candidates = [
      ...this.opts.bootstrapServers,
      ...this.opts.brokers.nodeIds().map((n) => this.opts.brokers.upstreamOf(n)!),
    ];
    let lastError: unknown;
    // One deadline for all of them: a frozen broker must not cost a deadline per candidate.
    for (let i = 0; i < candidates.length && Date.now() < deadline; i++) {
      const address = candidates[this.bootstrapIndex++ % candidates.length]!;
      try {
        return await this.channel(address).request(apiKey, body, atMostVersion, deadline);
      } catch (err) {
        if (isClusterError(err, 'CLOSED')) throw err;
        lastError = err;
        this.log.debug('cluster request failed', { host: address.host, port: address.port, error: err });
      }
    }
    if (lastError !== undefined) throw lastError;
    throw candidates.length === 0
      ? new ClusterRequestError('UNKNOWN_BROKER', 'no broker known to ask')
      : new ClusterRequestError('TIMEOUT', 'no broker reachable within the request timeout');
  }

  private addressOf(nodeId: number): HostPort {
    const address = this.opts.brokers.upstreamOf(nodeId);
    if (!address) throw new ClusterRequestError('UNKNOWN_BROKER', `unknown broker ${nodeId}`);
    return address;
  }

  /**
   * The versions of `apiKey` broker `target` supports as it says in ApiVersions, whether the
   * proxy's codecs know them or not (what a broker's version tells about its behaviour).
   */
  async brokerRange(target: number, apiKey: number): Promise<{ min: number; max: number } | undefined> {
    const ch = this.channel(this.addressOf(target));
    await ch.connect();
    return ch.brokerRange(apiKey);
  }

  /** The version `request` would use for `apiKey` on any broker (for building version-specific bodies). */
  async versionFor(target: number | 'any', apiKey: number, atMost?: number): Promise<number> {
    const address = target === 'any' ? this.opts.bootstrapServers[0] : this.addressOf(target);
    if (address === undefined) throw new ClusterRequestError('UNKNOWN_BROKER', 'no bootstrap server to ask');
    const ch = this.channel(address);
    await ch.connect();
    return ch.versionFor(apiKey, atMost);
  }

  /** Topic metadata (all topics when `topics` is null). */
  async metadata(topics: string[] | null): Promise<MetadataResponse> {
    const { body } = await this.request('any', ApiKey.Metadata, {
      ...defaultMetadataRequest(),
      topics: topics === null ? null : topics.map((name) => ({ name, topicId: ZERO_UUID })),
      allowAutoTopicCreation: false,
    });
    for (const b of body.brokers) this.opts.brokers.learn(b.nodeId, { host: b.host, port: b.port });
    return body;
  }

  /** The node id of the group coordinator of `group`. */
  async coordinatorOf(group: string): Promise<number> {
    const { version, body } = await this.request('any', ApiKey.FindCoordinator, (v: number) =>
      v >= 4
        ? { ...defaultFindCoordinatorRequest(), keyType: 0, coordinatorKeys: [group] }
        : { ...defaultFindCoordinatorRequest(), key: group, keyType: 0 },
    );
    if (version >= 4) {
      const c = body.coordinators[0];
      if (!c)
        throw new ClusterRequestError('BAD_RESPONSE', `no coordinator for group ${group} in the answer`);
      if (c.errorCode !== 0) throw noCoordinator(group, c.errorCode);
      this.opts.brokers.learn(c.nodeId, { host: c.host, port: c.port });
      return c.nodeId;
    }
    if (body.errorCode !== 0) throw noCoordinator(group, body.errorCode);
    this.opts.brokers.learn(body.nodeId, { host: body.host, port: body.port });
    return body.nodeId;
  }

  /**
   * The coordinators of many groups: one FindCoordinator naming them all where the broker batches
   * keys (v4+, Kafka 3.0+), one per group before. Groups without a coordinator (an error for that
   * key) are left out.
   */
  async coordinatorsOf(groups: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (groups.length === 0) return out;
    if ((await this.versionFor('any', ApiKey.FindCoordinator)) < 4) {
      for (const g of groups) {
        try {
          out.set(g, await this.coordinatorOf(g));
        } catch {
          // no coordinator for this one now
        }
      }
      return out;
    }
    const { body } = await this.request('any', ApiKey.FindCoordinator, {
      ...defaultFindCoordinatorRequest(),
      keyType: 0,
      coordinatorKeys: [...groups],
    });
    for (const c of body.coordinators) {
      if (c.errorCode !== 0) continue;
      this.opts.brokers.learn(c.nodeId, { host: c.host, port: c.port });
      out.set(c.key, c.nodeId);
    }
    return out;
  }

  close(): void {
    this.closed = true;
    for (const ch of this.channels.values()) ch.close();
    this.channels.clear();
  }
}

/** FindCoordinator's error for `group` (COORDINATOR_NOT_AVAILABLE while the cluster starts, ...). */
function noCoordinator(group: string, kafkaErrorCode: number): ClusterRequestError {
  const message = `no coordinator for group ${group} (error ${kafkaErrorCode})`;
  return new ClusterRequestError('BROKER_ERROR', message, { kafkaErrorCode });
}
