import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { AnyExchange } from '../core/extension.js';
import { MemberLiveness, UNCERTAIN_GROUP_MS } from './liveness.js';

function clock() {
  const c = { t: 1_000_000, now: () => c.t };
  return c;
}

const join = (memberId: string, gen: number, sessionTimeoutMs = 3000, rebalanceTimeoutMs = 60_000) =>
  [
    ApiKey.JoinGroup,
    9,
    { groupId: 'g', memberId: '', sessionTimeoutMs, rebalanceTimeoutMs, groupInstanceId: null },
    { errorCode: 0, memberId, generationId: gen, members: [] },
  ] as const;
const sync = (memberId: string, gen: number, errorCode = 0) =>
  [ApiKey.SyncGroup, 5, { groupId: 'g', memberId, generationId: gen }, { errorCode }] as const;
const heartbeat = (memberId: string, gen: number, errorCode = 0) =>
  [ApiKey.Heartbeat, 4, { groupId: 'g', memberId, generationId: gen }, { errorCode }] as const;

/** Hands over an exchange as the service does; the bodies carry only the fields liveness reads. */
const see = (
  l: MemberLiveness,
  [apiKey, apiVersion, request, response]: readonly [number, number, object, object],
) => l.observe(apiVersion, { apiKey, request, response } as unknown as AnyExchange);

describe('MemberLiveness', () => {
  it('a classic member is fresh after join and sync, for a third of its session timeout from its last heartbeat', () => {
    const c = clock();
    const l = new MemberLiveness(c.now);
    see(l, join('m', 2));
    expect(l.classicFresh('g', 'm', 2)).toBe(false); // not synced yet
    see(l, sync('m', 2));
    expect(l.classicFresh('g', 'm', 2)).toBe(true);
    expect(l.classicFresh('g', 'm', 1)).toBe(false);
    c.t += 999;
    expect(l.classicFresh('g', 'm', 2)).toBe(true);
    c.t += 1;
    expect(l.classicFresh('g', 'm', 2)).toBe(false);
    see(l, heartbeat('m', 2));
    expect(l.classicFresh('g', 'm', 2)).toBe(true);
  });

  it('a short rebalance timeout shortens the lease', () => {
    const c = clock();
    const l = new MemberLiveness(c.now);
    see(l, join('m', 1, 30_000, 600));
    see(l, sync('m', 1));
    c.t += 200;
    expect(l.classicFresh('g', 'm', 1)).toBe(false);
  });

  it('a rebalance, an error or a leave ends the evidence; a broker check restores it', () => {
    const c = clock();
    const l = new MemberLiveness(c.now);
    see(l, join('m', 1));
    see(l, sync('m', 1));
    see(l, heartbeat('m', 1, ErrorCode.REBALANCE_IN_PROGRESS));
    expect(l.classicFresh('g', 'm', 1)).toBe(false);
    l.classicConfirmed('g', 'm', 1, false);
    expect(l.classicFresh('g', 'm', 1)).toBe(true);
    see(l, heartbeat('m', 1, ErrorCode.UNKNOWN_MEMBER_ID));
    expect(l.classicFresh('g', 'm', 1)).toBe(false);
    see(l, join('m', 2));
    see(l, sync('m', 2));
    see(l, [ApiKey.LeaveGroup, 5, { groupId: 'g', members: [{ memberId: 'm' }] }, { errorCode: 0 }]);
    expect(l.classicFresh('g', 'm', 2)).toBe(false);
  });

  it('a KIP-848 member is fresh with its epoch for the heartbeat interval the broker announced', () => {
    const c = clock();
    const l = new MemberLiveness(c.now);
    const hb = (epoch: number, errorCode = 0, reqEpoch = 1) =>
      see(l, [
        ApiKey.ConsumerGroupHeartbeat,
        1,
        { groupId: 'g', memberId: 'k', memberEpoch: reqEpoch },
        { errorCode, memberId: 'k', memberEpoch: epoch, heartbeatIntervalMs: 500 },
      ]);
    hb(4);
    expect(l.consumerFresh('g', 'k', 4)).toBe(true);
    expect(l.consumerFresh('g', 'k', 3)).toBe(false);
    c.t += 500;
    expect(l.consumerFresh('g', 'k', 4)).toBe(false);
    hb(5);
    expect(l.consumerFresh('g', 'k', 5)).toBe(true);
    hb(5, ErrorCode.FENCED_MEMBER_EPOCH);
    expect(l.consumerFresh('g', 'k', 5)).toBe(false);
    hb(5);
    hb(-2, 0, -2);
    expect(l.consumerFresh('g', 'k', 5)).toBe(false);
  });

  it('a group whose record may have missed an update is uncertain for a while', () => {
    const c = clock();
    const l = new MemberLiveness(c.now);
    see(l, join('m', 1));
    see(l, sync('m', 1));
    l.markUncertain('g');
    expect(l.classicFresh('g', 'm', 1)).toBe(false);
    c.t += UNCERTAIN_GROUP_MS;
    expect(l.isUncertain('g')).toBe(false);
  });
});
