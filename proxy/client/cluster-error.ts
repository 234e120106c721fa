/**
 * How a request of the proxy's own cluster client failed, as a closed set of codes (as undici's
 * errors carry stable codes): callers decide on `code`, never on the message, whose words are for
 * people and may change. A broker's own error answer is BROKER_ERROR with its Kafka error code.
 */

export const CLUSTER_ERROR_CODES = [
  /** The broker does not have the API, or no version both it and the proxy know. */
  'UNSUPPORTED_API',
  /** The node id is not one of the brokers the proxy knows, or no broker is known at all. */
  'UNKNOWN_BROKER',
  /** No answer within the request timeout (connect, request, or the composite work of `within`). */
  'TIMEOUT',
  /** The connection could not be made, or was closed or reset before the answer came. */
  'DISCONNECTED',
  /** The broker refused the proxy's SASL credentials or mechanism. */
  'AUTHENTICATION_FAILED',
  /** The broker answered with an error code (see `kafkaErrorCode`). */
  'BROKER_ERROR',
  /** The answer does not decode, is too large, or lacks what was asked for. */
  'BAD_RESPONSE',
  /** The request does not encode for the version negotiated (a bug of the caller). */
  'BAD_REQUEST',
  /** The client was closed while the request was pending. */
  'CLOSED',
] as const;

export type ClusterErrorCode = (typeof CLUSTER_ERROR_CODES)[number];

export class ClusterRequestError extends Error {
  override readonly name = 'ClusterRequestError';
  /** The broker's Kafka error code for BROKER_ERROR; null for every other code. */
  readonly kafkaErrorCode: number | null;
  readonly code: ClusterErrorCode;

  constructor(
    code: Exclude<ClusterErrorCode, 'BROKER_ERROR'>,
    message: string,
    options?: { cause?: unknown },
  );
  constructor(code: 'BROKER_ERROR', message: string, options: { cause?: unknown; kafkaErrorCode: number });
  constructor(
    code: ClusterErrorCode,
    message: string,
    options?: { cause?: unknown; kafkaErrorCode?: number },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.kafkaErrorCode = options?.kafkaErrorCode ?? null;
  }

  /** `err` as it is if it is a ClusterRequestError already, else one of `code` caused by it. */
  static from(err: unknown, code: Exclude<ClusterErrorCode, 'BROKER_ERROR'>): ClusterRequestError {
    if (err instanceof ClusterRequestError) return err;
    return new ClusterRequestError(code, err instanceof Error ? err.message : String(err), { cause: err });
  }
}

/** Whether `err` is the cluster client's error with `code`. */
export function isClusterError(err: unknown, code: ClusterErrorCode): err is ClusterRequestError {
  return err instanceof ClusterRequestError && err.code === code;
}
