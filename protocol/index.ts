// Public API of the Kafka protocol codec. Message types and per-message functions live in
// ./messages/<kebab-name>.js (e.g. ./messages/offset-commit-request.js); import them from there.
export { Reader } from './reader.js';
export type { TaggedField } from './reader.js';
export {
  Writer,
  sizeOfRawTaggedFields,
  sizeOfUtf8,
  sizeOfUvarint,
  sizeOfUvarlong,
  sizeOfVarint,
  sizeOfVarlong,
} from './writer.js';
export { FrameTooLargeError, ProtocolError, annotateProtocolError } from './errors.js';
export type { ProtocolErrorCode } from './errors.js';
export { ErrorCode, errorInfo } from './error-codes.js';
export type { ErrorCodeName, ErrorInfo } from './error-codes.js';
export {
  decodeRequestHeader,
  decodeResponseHeader,
  encodeRequestHeader,
  encodeResponseHeader,
  requestHeaderVersion,
  responseHeaderVersion,
  sizeOfRequestHeader,
  sizeOfResponseHeader,
} from './headers.js';
export type { RequestHeader, ResponseHeader } from './headers.js';
export { FrameSplitter } from './frame-splitter.js';
export {
  decodeRequestFrame,
  decodeResponseFrame,
  encodeRequestFrame,
  encodeResponseFrame,
  peekCorrelationId,
  peekProduceAcks,
  peekRequestHeader,
} from './frames.js';
export type { DecodedRequestFrame, PeekedRequestHeader } from './frames.js';
export { ApiKey, apiCodecs, getApiCodec, isFlexibleVersion } from './messages/index.js';
export type {
  ApiCodec,
  ApiKeyName,
  RequestBody,
  RequestBodyByApiKey,
  ResponseBody,
  ResponseBodyByApiKey,
} from './messages/index.js';
export { EMPTY_BUFFER, ZERO_UUID } from './generated-support.js';
