/**
 * Request and response headers (RequestHeader.json / ResponseHeader.json), written by hand because
 * their version is not the API version: it is chosen from the API key and version below.
 */
import { ProtocolError } from './errors.js';
import { requestHeaderVersion, responseHeaderVersion } from './messages/api-info.js';
import type { Reader, TaggedField } from './reader.js';
import { sizeOfRawTaggedFields, sizeOfUtf8 } from './writer.js';
import type { Writer } from './writer.js';

export interface RequestHeader {
  apiKey: number;
  apiVersion: number;
  correlationId: number;
  /** Absent in header v0 (decoded as null). */
  clientId: string | null;
  /** Header v2 tagged fields (none are defined by Kafka yet), kept raw. */
  _unknownTaggedFields?: TaggedField[];
}

export interface ResponseHeader {
  correlationId: number;
  _unknownTaggedFields?: TaggedField[];
}

// Which header version an API version uses is part of the generated registry.
export { requestHeaderVersion, responseHeaderVersion };

export function decodeRequestHeader(r: Reader, headerVersion: number): RequestHeader {
  checkHeaderVersion('request', headerVersion, 2, r.offset);
  const h: RequestHeader = {
    apiKey: r.int16(),
    apiVersion: r.int16(),
    correlationId: r.int32(),
    // The client id keeps its int16 length even in flexible header v2.
    clientId: headerVersion >= 1 ? r.nullableString() : null,
  };
  if (headerVersion >= 2) {
    const tags = r.rawTaggedFields();
    if (tags !== undefined) h._unknownTaggedFields = tags;
  }
  return h;
}

export function encodeRequestHeader(w: Writer, h: RequestHeader, headerVersion: number): void {
  checkHeaderVersion('request', headerVersion, 2, w.offset);
  w.int16(h.apiKey);
  w.int16(h.apiVersion);
  w.int32(h.correlationId);
  if (headerVersion >= 1) w.nullableString(h.clientId);
  if (headerVersion >= 2) w.rawTaggedFields(h._unknownTaggedFields);
}

export function sizeOfRequestHeader(h: RequestHeader, headerVersion: number): number {
  let n = 8;
  if (headerVersion >= 1) n += h.clientId === null ? 2 : 2 + sizeOfUtf8(h.clientId);
  if (headerVersion >= 2) n += sizeOfRawTaggedFields(h._unknownTaggedFields);
  return n;
}

export function decodeResponseHeader(r: Reader, headerVersion: number): ResponseHeader {
  checkHeaderVersion('response', headerVersion, 1, r.offset);
  const h: ResponseHeader = { correlationId: r.int32() };
  if (headerVersion >= 1) {
    const tags = r.rawTaggedFields();
    if (tags !== undefined) h._unknownTaggedFields = tags;
  }
  return h;
}

export function encodeResponseHeader(w: Writer, h: ResponseHeader, headerVersion: number): void {
  checkHeaderVersion('response', headerVersion, 1, w.offset);
  w.int32(h.correlationId);
  if (headerVersion >= 1) w.rawTaggedFields(h._unknownTaggedFields);
}

export function sizeOfResponseHeader(h: ResponseHeader, headerVersion: number): number {
  return headerVersion >= 1 ? 4 + sizeOfRawTaggedFields(h._unknownTaggedFields) : 4;
}

function checkHeaderVersion(kind: string, v: number, max: number, offset: number): void {
  if (!(Number.isInteger(v) && v >= 0 && v <= max)) {
    throw new ProtocolError(
      'UNSUPPORTED_VERSION',
      `${kind} header version ${v} is outside 0..${max}`,
      offset,
    );
  }
}
