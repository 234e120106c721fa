/**
 * Showed how BrokerAuthorizer (proxy/offsets/authorizer.ts) could refuse an OffsetCommit with
 * COORDINATOR_NOT_AVAILABLE (15) although the broker allows everything, as 7 of 1,310,000 requests
 * of the 10-minute load run were (docs/reliability.md, "Load run").
 *
 *   npx tsx test/reliability/authorizer-race-repro.ts
 *
 * authorize() decides which cache entries are missing, awaits the broker's probe for those, and then
 * reads the topic verdicts from the cache again. The group's and the topic's entries are remembered
 * one after the other, so the topic's can be a little younger: when a request comes after the
 * group's entry expired but before the topic's did, only the group is probed, and if the topic's
 * entry expires while that probe is out, the second read finds nothing and the answer is 15. Real
 * time moves between the two remember() calls only now and then (a millisecond boundary, a GC
 * pause); here a hand-driven clock makes it happen on purpose.
 *
 * Fixed: authorize() now decides from the verdicts it read before the probe plus the probe's own
 * answers (proxy/offsets/authorizer.test.ts is the permanent check). Exits 1 if it reproduces.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { RequestInfo } from '../../proxy/extension.js';
import { BrokerAuthorizer } from '../../proxy/offsets/authorizer.js';

let clock = 1_000_000;
/** Added to the clock at each Date.now() call (time passing between the authorizer's steps). */
let tick = 0;
Date.now = () => (clock += tick);

/** A broker that allows everything: the probe's partition does not exist (3), never an ACL error. */
const askBroker = async (_apiKey: number, _version: number, body: unknown): Promise<unknown> => {
  clock += 10; // the probe's round trip
  return {
    throttleTimeMs: 0,
    topics: (body as OffsetCommitRequest).topics.map((t) => ({
      name: t.name,
      partitions: [{ partitionIndex: 2147483647, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION }],
    })),
  };
};
const info: RequestInfo = {
  connectionId: 'c1',
  apiKey: 8,
  apiVersion: 8,
  correlationId: 1,
  clientId: null,
  nodeId: null,
  principal: null,
  askBroker,
};

const ttlMs = 30_000;
const authorizer = new BrokerAuthorizer(ttlMs);
// First commit: both verdicts probed and remembered, the topic's 5 ms after the group's.
tick = 5;
const first = await authorizer.authorize(info, 'read', 'group', ['topic']);
tick = 0;
// When the group entry was remembered (read from the private cache).
const entries = [...(authorizer as unknown as { cache: Map<string, { at: number }> }).cache.values()];
const groupRemembered = Math.min(...entries.map((e) => e.at));
// A commit just after the group's entry expired (the topic's is still fresh): only the group is probed.
clock = groupRemembered + ttlMs + 1;
const second = await authorizer.authorize(info, 'read', 'group', ['topic']);
console.log(
  `first commit: error ${first.groupError}; commit at the group entry's expiry: error ${second.groupError}`,
);
if (second.groupError === ErrorCode.COORDINATOR_NOT_AVAILABLE) {
  console.log('reproduced: COORDINATOR_NOT_AVAILABLE from a broker that allowed both group and topic');
  process.exitCode = 1;
} else {
  console.log('not reproduced');
}
