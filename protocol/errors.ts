/**
 * The one error type malformed Kafka wire data raises. The proxy catches it to close the offending
 * client's connection pair (never the process), so every decoding path must throw this and nothing
 * else. `code` is a stable string for logs and metrics; `offset` is where in the buffer it went wrong.
 */
export class ProtocolError extends Error {
  override name = 'ProtocolError';
  apiKey?: number;
  apiVersion?: number;
  offset: number;
  code: string;

  constructor(code: string, message: string, offset: number, apiKey?: number, apiVersion?: number) {
    super(message);
    this.code = code;
    this.offset = offset;
    if (apiKey !== undefined) this.apiKey = apiKey;
    if (apiVersion !== undefined) this.apiVersion = apiVersion;
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
  if (err instanceof ProtocolError) {
    if (err.apiKey === undefined) err.apiKey = apiKey;
    if (err.apiVersion === undefined) err.apiVersion = apiVersion;
    if (!err.message.startsWith('[api ')) err.message = `[api ${apiKey} v${apiVersion}] ${err.message}`;
    return err;
  }
  const wrapped = new ProtocolError(
    'DECODE_FAILED',
    `[api ${apiKey} v${apiVersion}] ${err instanceof Error ? err.message : String(err)}`,
    -1,
    apiKey,
    apiVersion,
  );
  wrapped.cause = err;
  return wrapped;
}
