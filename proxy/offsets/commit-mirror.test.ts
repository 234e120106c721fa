// The mirror of an accepted commit to the broker, on a fake cluster whose coordinator answers each
// OffsetCommit with the codes a test gives.
import { describe, expect, test } from 'vitest';
import type { ClusterClient } from '../client/cluster-client.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import { BrokerLookups, NAMED_OFFSETS_MAX_VERSION } from './broker-lookups.js';
import { mirrorCommit } from './commit-mirror.js';

const write = (partition: number) => ({
  topic: 't',
  partition,
  offset: 1n,
  leaderEpoch: -1,
  metadata: '',
  commitTimestamp: 0n,
  expireTimestamp: -1n,
});
const member = { generationIdOrMemberEpoch: 3, memberId: 'm1', groupInstanceId: null };

/** A cluster whose coordinator answers the n-th OffsetCommit with `answers[n]` on every partition. */
function coordinator(answers: number[]) {
  const sent: { memberId: string; generation: number; atMost: number | undefined }[] = [];
  const client = {
    within: <T>(_what: string, work: () => Promise<T>) => work(),
    coordinatorOf: () => Promise.resolve(1),
    request: (_node: number, apiKey: number, body: (v: number) => OffsetCommitRequest, atMost?: number) => {
      expect(apiKey).toBe(ApiKey.OffsetCommit);
      const req = body(9);
      sent.push({ memberId: req.memberId, generation: req.generationIdOrMemberEpoch, atMost });
      const code = answers[sent.length - 1] ?? ErrorCode.NONE;
      return Promise.resolve({
        version: 9,
        body: {
          topics: req.topics.map((t) => ({
            name: t.name,
            partitions: t.partitions.map((p) => ({ partitionIndex: p.partitionIndex, errorCode: code })),
          })),
        },
      });
    },
  } as unknown as ClusterClient;
  return { lookups: new BrokerLookups(client), sent };
}

describe('mirrorCommit', () => {
  test('commits with the member identity, in v9 at most (v10 names topics by id)', async () => {
    const { lookups, sent } = coordinator([ErrorCode.NONE]);
    expect(await mirrorCommit(lookups, 'g', member, [write(0), write(1)])).toBe(0);
    expect(sent).toEqual([{ memberId: 'm1', generation: 3, atMost: NAMED_OFFSETS_MAX_VERSION }]);
  });

  test.each([ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.STALE_MEMBER_EPOCH])(
    'a member gone at the broker (code %i): the offsets are committed again admin-style',
    async (code) => {
      const { lookups, sent } = coordinator([code, ErrorCode.NONE]);
      expect(await mirrorCommit(lookups, 'g', member, [write(0)])).toBe(0);
      expect(sent.map((s) => [s.memberId, s.generation])).toEqual([
        ['m1', 3],
        ['', -1],
      ]);
    },
  );

  test('any other refusal is counted per partition, not retried', async () => {
    const { lookups, sent } = coordinator([ErrorCode.GROUP_AUTHORIZATION_FAILED]);
    expect(await mirrorCommit(lookups, 'g', member, [write(0), write(1)])).toBe(2);
    expect(sent).toHaveLength(1);
  });
});
