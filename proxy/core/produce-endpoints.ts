/**
 * Whether a Produce response (v10+) carries KIP-951 NodeEndpoints, found by walking its bytes
 * without decoding them into objects.
 *
 * Produce v10+ responses are the only ones a producer gets in bulk that may name brokers: the
 * top-level tagged field NodeEndpoints (tag 0) appears when a partition's leader moved. Almost no
 * response has it, so decoding every one into objects to find out (the codec makes a record per
 * partition, BigInts for three offsets and a string per topic) was 13% of the proxy's event loop in
 * the produce benchmark (bench/fetch-latency.ts). This walker reads lengths and skips values; only a
 * response that has NodeEndpoints is decoded and rewritten. Like proxy/core/fetch-stream.ts for Fetch,
 * it is written by hand from the message's JSON spec (ProduceResponse.json, v10-v13: v12 is v11's
 * layout, v13 names each topic by its id instead of its name).
 */
import { ProtocolError } from '../../protocol/errors.js';
import { decodeResponseHeader } from '../../protocol/headers.js';
import { ApiKey, responseHeaderVersion } from '../../protocol/messages/api-info.js';
import { Reader } from '../../protocol/reader.js';

/** Produce versions the walker knows (the codec's NodeEndpoints versions, v10-v13). */
export function canWalkProduceResponse(apiVersion: number): boolean {
  return apiVersion >= 10 && apiVersion <= 13;
}

function skipTaggedFields(r: Reader): void {
  const n = r.taggedFieldCount();
  for (let i = 0; i < n; i++) {
    r.uvarint(); // tag
    r.skip(r.uvarint());
  }
}

/** A COMPACT_NULLABLE_STRING or COMPACT_STRING: length + 1 as an unsigned varint (0 = null). */
function skipCompactString(r: Reader): void {
  const n = r.uvarint();
  if (n > 0) r.skip(n - 1);
}

/**
 * True when the response frame (size prefix removed) has the NodeEndpoints tag. Throws
 * ProtocolError on bytes the codec would refuse too (truncated, trailing bytes, bad lengths).
 */
export function produceResponseHasNodeEndpoints(frame: Buffer, apiVersion: number): boolean {
  if (!canWalkProduceResponse(apiVersion)) {
    throw new ProtocolError(
      'UNSUPPORTED_VERSION',
      `cannot walk Produce v${apiVersion} responses`,
      0,
      ApiKey.Produce,
      apiVersion,
    );
  }
  const r = new Reader(frame);
  decodeResponseHeader(r, responseHeaderVersion(ApiKey.Produce, apiVersion));
  const topics = r.compactArrayLength();
  for (let t = 0; t < topics; t++) {
    if (apiVersion >= 13)
      r.skip(16); // topic_id
    else skipCompactString(r); // name
    const partitions = r.compactArrayLength();
    for (let p = 0; p < partitions; p++) {
      // index int32, error_code int16, base_offset, log_append_time_ms, log_start_offset int64
      r.skip(4 + 2 + 8 + 8 + 8);
      const recordErrors = r.compactArrayLength();
      for (let e = 0; e < recordErrors; e++) {
        r.skip(4); // batch_index
        skipCompactString(r); // batch_index_error_message
        skipTaggedFields(r);
      }
      skipCompactString(r); // error_message
      skipTaggedFields(r); // CurrentLeader (tag 0): a leader id and epoch, no address
    }
    skipTaggedFields(r);
  }
  r.skip(4); // throttle_time_ms
  let found = false;
  const tags = r.taggedFieldCount();
  for (let i = 0; i < tags; i++) {
    if (r.uvarint() === 0) found = true;
    r.skip(r.uvarint());
  }
  r.expectEnd();
  return found;
}
