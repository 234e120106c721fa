/**
 * Store failures the proxy maps onto Kafka error codes. Kept apart from the stores so the proxy
 * can import them without loading any client library.
 */

/**
 * The store could not be reached or did not answer within the per-operation deadline. The
 * outcome of a commit that failed this way is unknown (it may have been applied), so the proxy
 * answers a retriable COORDINATOR_NOT_AVAILABLE / REQUEST_TIMED_OUT and the client retries.
 */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  readonly timedOut: boolean;
  constructor(message: string, options?: { cause?: unknown; timedOut?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.timedOut = options?.timedOut ?? false;
  }
}

/** A stored value of one group is not what this proxy writes (wrong key type, non-numeric offset). */
export class StoreCorruptError extends Error {
  override readonly name = 'StoreCorruptError';
  constructor(
    readonly group: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(
      `group ${JSON.stringify(group)}: ${message}`,
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
  }
}

/**
 * Runs `op` with a deadline. A rejection that is not already a store error, or the deadline,
 * becomes StoreUnavailableError, so callers see one failure type per cause. One promise and one
 * timer per operation (not a Promise.race of two): it runs once per commit.
 */
export function withDeadline<T>(what: string, timeoutMs: number, op: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(new StoreUnavailableError(`${what}: no answer within ${timeoutMs} ms`, { timedOut: true })),
      timeoutMs,
    );
    const failed = (err: unknown): void => {
      clearTimeout(timer);
      reject(asStoreError(what, err));
    };
    let running: Promise<T>;
    try {
      running = op();
    } catch (err) {
      failed(err);
      return;
    }
    running.then((value) => {
      clearTimeout(timer);
      resolve(value);
    }, failed);
  });
}

/** A store error as it is, anything else as StoreUnavailableError saying what failed. */
export function asStoreError(what: string, err: unknown): Error {
  if (err instanceof StoreUnavailableError || err instanceof StoreCorruptError) return err;
  return new StoreUnavailableError(`${what}: ${err instanceof Error ? err.message : String(err)}`, {
    cause: err,
  });
}

/**
 * A store URL that cannot be used. The message is `<what> <url>: <reason>` with the URL redacted;
 * `reason` alone lets a caller that names the URL itself (the proxy's --store error) say why
 * without cutting the message apart.
 */
export class StoreUrlError extends Error {
  override readonly name = 'StoreUrlError';
  constructor(
    what: string,
    shownUrl: string,
    readonly reason: string,
  ) {
    super(`${what} ${shownUrl}: ${reason}`);
  }
}
