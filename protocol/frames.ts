/**
 * Whole-frame helpers for the proxy. A "frame" here is a payload as returned by FrameSplitter: the
 * bytes after the 4-byte size prefix. Only what the proxy must read is decoded; peek* functions read
 * a few fixed-position fields without decoding anything else.
 */
import { ProtocolError, annotateProtocolError } from './errors.js';
import { ErrorCode } from './error-codes.js';
import {
  decodeRequestHeader,
  decodeResponseHeader,
  encodeRequestHeader,
  encodeResponseHeader,
  requestHeaderVersion,
  responseHeaderVersion,
  sizeOfRequestHeader,
  sizeOfResponseHeader,
} from './headers.js';
import type { RequestHeader, ResponseHeader } from './headers.js';
import { loadedApiCodec } from './codec-registry.js';
import { ApiKey, getApiInfo } from './messages/api-info.js';
import type { ApiCodec, RequestBody, ResponseBody } from './messages/api-info.js';
import { Reader } from './reader.js';
import { Writer } from './writer.js';

export interface PeekedRequestHeader {
  apiKey: number;
  apiVersion: number;
  correlationId: number;
}

/** The fixed first 8 bytes of any request header (every header version starts the same way). */
export function peekRequestHeader(frame: Buffer): PeekedRequestHeader {
  if (frame.length < 8) {
    throw new ProtocolError(
      'TRUNCATED',
      `request frame of ${frame.length} bytes is shorter than a header`,
      0,
    );
  }
  return {
    apiKey: frame.readInt16BE(0),
    apiVersion: frame.readInt16BE(2),
    correlationId: frame.readInt32BE(4),
  };
}

/** The correlation id that starts every response header. */
export function peekCorrelationId(responseFrame: Buffer): number {
  if (responseFrame.length < 4) {
    throw new ProtocolError(
      'TRUNCATED',
      `response frame of ${responseFrame.length} bytes has no correlation id`,
      0,
    );
  }
  return responseFrame.readInt32BE(0);
}

/**
 * The `acks` of a Produce request of any version (acks 0 means the broker sends no response, so the
 * proxy must not wait for one). v0-2: acks is the first body field; v3+: a nullable transactional id
 * (compact in flexible versions) precedes it.
 */
export function peekProduceAcks(frame: Buffer): number {
  const { apiKey, apiVersion } = peekRequestHeader(frame);
  if (apiKey !== ApiKey.Produce) {
    throw new ProtocolError('WRONG_API', `peekProduceAcks on api key ${apiKey}`, 0, apiKey, apiVersion);
  }
  try {
    const r = new Reader(frame, 8);
    const headerVersion = requestHeaderVersion(apiKey, apiVersion);
    // Client id: int16-length nullable string in every header version that has it.
    const idLength = r.int16();
    if (idLength > 0) r.skip(idLength);
    else if (idLength < -1)
      throw new ProtocolError('BAD_LENGTH', `client id length ${idLength}`, r.offset - 2);
    if (headerVersion >= 2) r.rawTaggedFields();
    if (apiVersion >= 3) {
      if (headerVersion >= 2) r.compactNullableString();
      else r.nullableString();
    }
    return r.int16();
  } catch (e) {
    throw annotateProtocolError(e, apiKey, apiVersion);
  }
}

/** The codec of a frame's API; it must be loaded (codec-registry.ts). */
function codecFor(apiKey: number, apiVersion: number): ApiCodec {
  const info = getApiInfo(apiKey);
  if (info === undefined) {
    throw new ProtocolError('UNKNOWN_API', `unknown api key ${apiKey}`, 0, apiKey, apiVersion);
  }
  const { min, max } = info.validVersions;
  if (apiVersion < min || apiVersion > max) {
    throw new ProtocolError(
      'UNSUPPORTED_VERSION',
      `${info.name} version ${apiVersion} is outside ${min}..${max}`,
      2,
      apiKey,
      apiVersion,
    );
  }
  const codec = loadedApiCodec(apiKey);
  // A mistake of the proxy's, not of the peer: whatever reads an API loads its codec first.
  if (codec === undefined) throw new Error(`the ${info.name} codec is not loaded (codec-registry.ts)`);
  return codec;
}

export interface DecodedRequestFrame {
  header: RequestHeader;
  headerVersion: number;
  /** The typed body: cast to the message interface for `apiKey`, e.g. `as OffsetCommitRequest`. */
  body: unknown;
  apiKey: number;
  apiVersion: number;
}

/** Decodes header and body of a request frame; trailing bytes are malformed input. */
export function decodeRequestFrame(frame: Buffer): DecodedRequestFrame {
  const { apiKey, apiVersion } = peekRequestHeader(frame);
  const codec = codecFor(apiKey, apiVersion);
  const headerVersion = requestHeaderVersion(apiKey, apiVersion);
  try {
    const r = new Reader(frame);
    const header = decodeRequestHeader(r, headerVersion);
    const body = codec.decodeRequest(r, apiVersion);
    r.expectEnd();
    return { header, headerVersion, body, apiKey, apiVersion };
  } catch (e) {
    throw annotateProtocolError(e, apiKey, apiVersion);
  }
}

/**
 * Decodes a response frame; the API key and version come from the request it answers. With an API
 * key literal (e.g. `ApiKey.OffsetFetch`) the body is typed; with a plain number it is `unknown`.
 */
export function decodeResponseFrame<K extends number>(
  frame: Buffer,
  apiKey: K,
  apiVersion: number,
): { header: ResponseHeader; body: ResponseBody<K>; bodyVersion: number } {
  const codec = codecFor(apiKey, apiVersion);
  try {
    const r = new Reader(frame);
    const header = decodeResponseHeader(r, responseHeaderVersion(apiKey, apiVersion));
    const bodyVersion = apiVersionsAnsweredAsV0(frame, apiKey, r.offset) ? 0 : apiVersion;
    const body = codec.decodeResponse(r, bodyVersion) as ResponseBody<K>;
    r.expectEnd();
    return { header, body, bodyVersion };
  } catch (e) {
    throw annotateProtocolError(e, apiKey, apiVersion);
  }
}

/**
 * A broker answers an ApiVersions request of a version it does not support with a v0 body carrying
 * UNSUPPORTED_VERSION and its own ranges, so the client can retry lower (KIP-511); Kafka's clients
 * read such an answer as v0 whatever they asked. The error code leads the body in every version.
 */
function apiVersionsAnsweredAsV0(frame: Buffer, apiKey: number, bodyAt: number): boolean {
  return (
    apiKey === ApiKey.ApiVersions &&
    frame.length >= bodyAt + 2 &&
    frame.readInt16BE(bodyAt) === ErrorCode.UNSUPPORTED_VERSION
  );
}

/** [int32 size][response header][body], in one exactly-sized buffer, ready for the socket. */
export function encodeResponseFrame(
  apiKey: number,
  apiVersion: number,
  correlationId: number,
  body: unknown,
): Buffer {
  const codec = codecFor(apiKey, apiVersion);
  const header: ResponseHeader = { correlationId };
  const hv = responseHeaderVersion(apiKey, apiVersion);
  const size = sizeOfResponseHeader(header, hv) + codec.sizeOfResponse(body, apiVersion);
  const w = Writer.exact(4 + size);
  w.int32(size);
  encodeResponseHeader(w, header, hv);
  codec.encodeResponse(w, body, apiVersion);
  return w.toBuffer();
}

/** [int32 size][request header][body]; the header version follows from header.apiKey/apiVersion. */
export function encodeRequestFrame<K extends number>(
  header: RequestHeader & { apiKey: K },
  body: RequestBody<K>,
): Buffer {
  const codec = codecFor(header.apiKey, header.apiVersion);
  const hv = requestHeaderVersion(header.apiKey, header.apiVersion);
  const size = sizeOfRequestHeader(header, hv) + codec.sizeOfRequest(body, header.apiVersion);
  const w = Writer.exact(4 + size);
  w.int32(size);
  encodeRequestHeader(w, header, hv);
  codec.encodeRequest(w, body, header.apiVersion);
  return w.toBuffer();
}
