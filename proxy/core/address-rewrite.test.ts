// ShareFetch and ShareAcknowledge answers keep share consumers on the proxy: when a partition's
// leader moved (NOT_LEADER_OR_FOLLOWER), the answer names the new leader by id in CurrentLeader and
// by address in NodeEndpoints, and the client connects to that address. The address must be the
// proxy's; the leader's id and epoch must stay as the broker wrote them.
import { describe, expect, test } from 'vitest';
import { ErrorCode } from '../../protocol/error-codes.js';
import { decodeResponseFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import type { AnyResponse } from '../../protocol/messages/index.js';
import type { ShareAcknowledgeResponse } from '../../protocol/messages/share-acknowledge-response.js';
import type { ShareFetchResponse } from '../../protocol/messages/share-fetch-response.js';
import { carriesBrokerAddresses, rewriteBrokerAddresses } from './address-rewrite.js';
import type { ExposeBroker } from './address-rewrite.js';

const TOPIC_ID = 'AAAAAAAAAAAAAAAAAAAAAQ';
const moved = { leaderId: 2, leaderEpoch: 7 };
const endpoints = [
  { nodeId: 2, host: 'broker-2.internal', port: 9092, rack: 'r2' },
  { nodeId: 3, host: 'broker-3.internal', port: 9092, rack: null },
];
const expose: ExposeBroker = (nodeId) => ({ host: '127.0.0.1', port: 19_000 + nodeId });

/** An answer of either API: one partition whose leader moved, and the brokers' addresses. */
function answer<P>(partition: P) {
  return {
    throttleTimeMs: 0,
    errorCode: 0,
    errorMessage: null,
    acquisitionLockTimeoutMs: 30_000,
    responses: [{ topicId: TOPIC_ID, partitions: [partition] }],
    nodeEndpoints: endpoints.map((e) => ({ ...e })),
  };
}

const movedPartition = {
  partitionIndex: 0,
  errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER,
  errorMessage: null,
  currentLeader: { ...moved },
};

const shareFetchAnswer = (): ShareFetchResponse =>
  answer({
    ...movedPartition,
    acknowledgeErrorCode: 0,
    acknowledgeErrorMessage: null,
    records: Buffer.alloc(0),
    acquiredRecords: [],
  });

const shareAcknowledgeAnswer = (): ShareAcknowledgeResponse => answer({ ...movedPartition });

/** The answer as the client reads it: off the wire, rewritten, written again and read back. */
function throughProxy<K extends typeof ApiKey.ShareFetch | typeof ApiKey.ShareAcknowledge>(
  apiKey: K,
  version: number,
  body: unknown,
) {
  const fromBroker = decodeResponseFrame(
    encodeResponseFrame(apiKey, version, 1, body).subarray(4),
    apiKey,
    version,
  );
  rewriteBrokerAddresses({ apiKey, body: fromBroker.body } as AnyResponse, expose);
  return decodeResponseFrame(
    encodeResponseFrame(apiKey, version, 1, fromBroker.body).subarray(4),
    apiKey,
    version,
  ).body;
}

describe('ShareFetch and ShareAcknowledge answers name only proxy addresses', () => {
  const cases = [
    { name: 'ShareFetch', apiKey: ApiKey.ShareFetch, answer: shareFetchAnswer },
    { name: 'ShareAcknowledge', apiKey: ApiKey.ShareAcknowledge, answer: shareAcknowledgeAnswer },
  ] as const;
  for (const c of cases) {
    const { min, max } = getApiCodec(c.apiKey)!.validVersions;
    test(`${c.name}: the codec reads Kafka 4.4's versions 1-2`, () => {
      expect(min).toBeLessThanOrEqual(1);
      expect(max).toBeGreaterThanOrEqual(2);
    });
    for (let v = min; v <= max; v++) {
      test(`${c.name} v${v}: a leader change points the client at the proxy`, () => {
        expect(carriesBrokerAddresses(c.apiKey, v)).toBe(true);
        const body = throughProxy(c.apiKey, v, c.answer());
        expect(body.nodeEndpoints).toEqual([
          { nodeId: 2, host: '127.0.0.1', port: 19_002, rack: 'r2' },
          { nodeId: 3, host: '127.0.0.1', port: 19_003, rack: null },
        ]);
        const partition = body.responses[0]!.partitions[0]!;
        expect(partition.errorCode).toBe(ErrorCode.NOT_LEADER_OR_FOLLOWER);
        expect(partition.currentLeader).toEqual(moved);
      });
    }
  }
});
