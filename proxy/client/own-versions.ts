/**
 * The highest version of each API the proxy's own client sends, where it is below the codec's.
 * The proxy's own requests (lookups, fallback reads, mirrored commits, probes) are built and their
 * answers read for these versions; a newer version changes what they mean (OffsetFetch and
 * OffsetCommit v10 name topics by id; DescribeGroups v6 answers GROUP_ID_NOT_FOUND where v5 says
 * Dead; ConsumerGroupDescribe v1 adds member types), so moving one up is a change of its own with
 * its tests, not a side effect of a newer codec. A client talking through the proxy is not
 * affected: this is only what the proxy itself asks.
 */
import { ApiKey } from '../../protocol/messages/api-info.js';

const OWN_MAX_VERSIONS: ReadonlyMap<number, number> = new Map([
  [ApiKey.OffsetFetch, 9],
  [ApiKey.OffsetCommit, 9],
  [ApiKey.DescribeGroups, 5],
  [ApiKey.ConsumerGroupDescribe, 0],
  [ApiKey.DeleteGroups, 2],
  [ApiKey.ListOffsets, 10],
  [ApiKey.Metadata, 12],
  [ApiKey.DescribeCluster, 1],
]);

/** The highest version of `apiKey` the proxy's own client sends, if it is capped. */
export function ownMaxVersion(apiKey: number): number | undefined {
  return OWN_MAX_VERSIONS.get(apiKey);
}
