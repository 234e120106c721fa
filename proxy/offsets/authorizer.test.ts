import { afterEach, describe, expect, it, vi } from 'vitest';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { AskBroker, RequestInfo } from '../core/extension.js';
import { BrokerAuthorizer } from './authorizer.js';

/** A broker that allows everything: the probe's partition does not exist, never an ACL error. */
function allowingBroker(onProbe: () => void): RequestInfo {
  return {
    connectionId: 'c1',
    apiKey: 8,
    apiVersion: 8,
    correlationId: 1,
    nodeId: null,
    // Every probe (OffsetCommit, OffsetFetch, OffsetDelete) reads only `topics` of the answer.
    askBroker: (async (_apiKey: number, _version: number, body: unknown) => {
      onProbe();
      return {
        throttleTimeMs: 0,
        topics: (body as OffsetCommitRequest).topics.map((t) => ({
          name: t.name,
          partitions: [{ partitionIndex: 2147483647, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION }],
        })),
      };
    }) as AskBroker,
  };
}

describe('BrokerAuthorizer', () => {
  afterEach(() => vi.restoreAllMocks());

  it('a topic verdict expiring while a group-only probe is out does not refuse an allowed commit', async () => {
    // The load run's 7 COORDINATOR_NOT_AVAILABLE answers (docs/reliability.md, "Load run").
    let clock = 1_000_000;
    let tick = 0;
    vi.spyOn(Date, 'now').mockImplementation(() => (clock += tick));
    const ttlMs = 30_000;
    const authorizer = new BrokerAuthorizer(ttlMs);
    const info = allowingBroker(() => (clock += 10));
    tick = 5; // the topic's entry is remembered a little after the group's
    expect((await authorizer.authorize(info, 'read', 'g', ['t'])).groupError).toBe(ErrorCode.NONE);
    tick = 0;
    const byConnection = (authorizer as unknown as { byConnection: Map<string, Map<string, { at: number }>> })
      .byConnection;
    const entries = [...byConnection.get('c1')!.values()];
    clock = Math.min(...entries.map((e) => e.at)) + ttlMs + 1; // the group's entry just expired
    const decision = await authorizer.authorize(info, 'read', 'g', ['t']);
    expect(decision.groupError).toBe(ErrorCode.NONE);
    expect([...decision.deniedTopics]).toEqual([]);
  });

  it("drops a connection's verdicts when it closes, and counts what it holds", async () => {
    const authorizer = new BrokerAuthorizer();
    let probes = 0;
    const c1 = allowingBroker(() => probes++);
    const c2 = { ...allowingBroker(() => probes++), connectionId: 'c2' };
    await authorizer.authorize(c1, 'read', 'g', ['t', 'u']);
    await authorizer.authorize(c2, 'read', 'g', ['t']);
    expect(authorizer.size).toBe(3 + 2);
    expect(probes).toBe(2);
    await authorizer.authorize(c1, 'read', 'g', ['t', 'u']);
    expect(probes).toBe(2);
    authorizer.forget('c1');
    expect(authorizer.size).toBe(2);
    authorizer.forget('c1');
    expect(authorizer.size).toBe(2);
    await authorizer.authorize(c1, 'read', 'g', ['t', 'u']);
    expect(probes).toBe(3);
    authorizer.forget('c1');
    authorizer.forget('c2');
    expect(authorizer.size).toBe(0);
  });
});
