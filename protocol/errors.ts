/**
 * Every code a ProtocolError carries: a closed set, so logs, metrics and callers that branch on a
 * code see the same name for the same fault wherever it is detected.
 */
export type ProtocolErrorCode =
  /** A length or count field that is negative where it may not be, or larger than what remains. */
  | 'BAD_LENGTH'
  /** A reader asked for a range outside its buffer. */
  | 'BAD_RANGE'
  /** A varint longer than its type allows. */
  | 'BAD_VARINT'
  /** A tagged section that cannot be rewritten within the bytes it had (Fetch streaming). */
  | 'CANNOT_PAD'
  /** Any other error out of a decoder (a codec bug), kept as `cause`. */
  | 'DECODE_FAILED'
  /** A frame size prefix above the configured limit (FrameTooLargeError). */
  | 'FRAME_TOO_LARGE'
  /** A frame size prefix below zero, in a request or a response. */
  | 'NEGATIVE_FRAME_SIZE'
  /** A broker response whose correlation id is not the oldest one in flight. */
  | 'OUT_OF_ORDER'
  /** An exact-size writer whose computed size and written bytes differ (an encoder bug). */
  | 'SIZE_MISMATCH'
  /** Bytes left after the body was decoded. */
  | 'TRAILING_BYTES'
  /** Input that ends inside a field. */
  | 'TRUNCATED'
  /** A null where the field is not nullable. */
  | 'UNEXPECTED_NULL'
  /** An api key the codec does not know. */
  | 'UNKNOWN_API'
  /** A broker response with nothing in flight. */
  | 'UNSOLICITED'
  /** A field with a non-default value in a version that cannot carry it. */
  | 'UNSUPPORTED_FIELD_VERSION'
  /** An api version the codec (or a walker) does not support. */
  | 'UNSUPPORTED_VERSION'
  /** A helper called on a frame of the wrong api. */
  | 'WRONG_API';

/**
 * The one error type malformed Kafka wire data raises. The proxy catches it to close the offending
 * client's connection pair (never the process), so every decoding path must throw this and nothing
 * else. `code` is one of ProtocolErrorCode, stable for logs and metrics; `offset` is where in the buffer it went wrong.
 */
export class ProtocolError extends Error {
  override name = 'ProtocolError';
  apiKey?: number;
  apiVersion?: number;
  offset: number;
  code: ProtocolErrorCode;

  constructor(
    code: ProtocolErrorCode,
    message: string,
    offset: number,
    apiKey?: number,
    apiVersion?: number,
  ) {
    super(message);
    this.code = code;
    this.offset = offset;
    if (apiKey !== undefined) this.apiKey = apiKey;
    if (apiVersion !== undefined) this.apiVersion = apiVersion;
  }

  /** Whether withApi has named an API in the message (a flag: a message may itself start with "[api "). */
  private apiNamed = false;

  /**
   * Tags the error with the API it happened in, fields and message prefix, once: the first call
   * (the innermost decoder's view) wins, later ones leave the error as it is.
   */
  withApi(apiKey: number, apiVersion: number): this {
    this.apiKey ??= apiKey;
    this.apiVersion ??= apiVersion;
    if (!this.apiNamed) {
      this.message = `[api ${apiKey} v${apiVersion}] ${this.message}`;
      this.apiNamed = true;
    }
    return this;
  }
}

/** A frame whose size prefix exceeds the configured limit (or is negative); raised before its body arrives. */
export class FrameTooLargeError extends ProtocolError {
  override name = 'FrameTooLargeError';
  readonly frameSize: number;
  readonly maxFrameSize: number;

  constructor(frameSize: number, maxFrameSize: number, offset = 0) {
    super('FRAME_TOO_LARGE', `frame size ${frameSize} exceeds the limit of ${maxFrameSize} bytes`, offset);
    this.frameSize = frameSize;
    this.maxFrameSize = maxFrameSize;
  }
}

/**
 * Tags a ProtocolError with the API it happened in (first annotation wins, so the innermost decoder's
 * view is kept). Any other error escaping a decoder is a codec bug turned into a ProtocolError so the
 * one-error-type contract holds for callers; the original is kept as `cause`.
 */
export function annotateProtocolError(err: unknown, apiKey: number, apiVersion: number): ProtocolError {
  if (err instanceof ProtocolError) return err.withApi(apiKey, apiVersion);
  const wrapped = new ProtocolError(
    'DECODE_FAILED',
    err instanceof Error ? err.message : String(err),
    -1,
    apiKey,
    apiVersion,
  ).withApi(apiKey, apiVersion);
  wrapped.cause = err;
  return wrapped;
}
