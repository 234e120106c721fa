/**
 * Group commit for the embedded store: every write that arrives while one LMDB write transaction
 * is being committed and synced goes into the next one, and each is answered once that
 * transaction is on disk. One fsync then covers all the commits of all connections that came in
 * meanwhile, however many there are (LMDB has one writer: the transactions themselves cannot run
 * side by side).
 *
 * lmdb-js already put the callbacks of `transaction()` calls queued together into one LMDB
 * transaction; this queue does it with one callback and one promise per transaction instead of
 * one per write, and answers from the transaction's own outcome. The environment is opened
 * without `overlappingSync`, so lmdb-js reports a transaction committed only once
 * `mdb_txn_commit` returned, and that call synced the data and meta pages (no MDB_NOSYNC): the
 * transaction's promise is its durability. (Awaiting lmdb-js's `flushed` as well, as before,
 * waited for the *latest* queued transaction: a commit answered a whole transaction later when
 * others had arrived in the meantime.)
 *
 * Each write's body runs in turn inside the one transaction. A body that throws fails its own
 * caller only: the bodies read first (the guard, the records) and put last, so one that throws
 * (a corrupt record) has written nothing, and the others' writes commit. A transaction that fails
 * to commit (disk full, I/O error) fails every write in it: none of them is on disk.
 */
import { asStoreError, StoreUnavailableError } from './errors.js';

/**
 * The cause of a failed lmdb-js write, with the `commitError` promise lmdb-js attaches to the
 * error handled (rejected with the cause and awaited by nobody: unhandled, it would end the
 * process). Handled at once, in the same microtask run as the rejection, before Node looks for
 * unhandled ones. Throws `err` itself when it is not a failed commit.
 */
async function transactionFailure(err: unknown): Promise<{ why: string; cause: unknown }> {
  const commitError = (err as { commitError?: unknown } | null)?.commitError;
  if (!(commitError instanceof Promise)) throw err;
  // Its reason (ENOSPC, EIO) names the cause better than the error itself.
  const reason = commitError.then(
    () => undefined,
    (e: unknown) => e,
  );
  const cause = await Promise.race([reason, new Promise<undefined>((r) => setImmediate(r, undefined))]);
  return { why: cause instanceof Error ? cause.message : (err as Error).message, cause: cause ?? err };
}

function failedTransaction(what: string, failure: { why: string; cause: unknown }): StoreUnavailableError {
  return new StoreUnavailableError(`${what}: write transaction failed: ${failure.why}`, {
    cause: failure.cause,
  });
}

/** Awaits an lmdb-js write; a failed commit becomes StoreUnavailableError naming its cause. */
export async function settle<T>(what: string, write: PromiseLike<T>): Promise<T> {
  try {
    return await write;
  } catch (err) {
    throw failedTransaction(what, await transactionFailure(err));
  }
}

/** One write waiting for, or in, a transaction. */
interface QueuedWrite {
  /** "embedded store: commit", for its errors. */
  label: string;
  body: () => unknown;
  /** Answered "timed out" before its body ran: it is skipped. */
  expired: boolean;
  /** Its body ran inside a transaction: its caller waits for that transaction's outcome. */
  written: boolean;
  /** The store closed before its body ran. */
  closed: boolean;
  threw: boolean;
  outcome: unknown;
  timer: NodeJS.Timeout | undefined;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export class GroupCommit {
  private queue: QueuedWrite[] = [];
  /** A transaction was asked for whose callback has not run yet: new writes join it. */
  private pending = false;
  /**
   * When each transaction whose bodies ran and whose commit has not settled ran them (one token
   * each). More than one can be open: lmdb-js commits a transaction that wrote nothing (every write
   * in it had expired) while an earlier one still waits for the disk, so the oldest is what counts.
   */
  private readonly committing = new Map<object, number>();
  /** The environment is open and ready (`ready` resolved); until then writes wait in the queue. */
  private isReady = false;

  /**
   * `transaction`: lmdb-js's `root.transaction` (its callback runs inside a write transaction; the
   * promise settles once that transaction committed). `timeoutMs`: a write whose body has not run
   * within it is answered "timed out" and never runs. `explain`: adds what it knows to a failed
   * commit's reason (the disk's free space: embedded-disk-space.ts).
   */
  constructor(
    private readonly transaction: (callback: () => void) => PromiseLike<unknown>,
    private readonly timeoutMs: number,
    private readonly isClosed: () => boolean,
    private readonly ready: Promise<void>,
    private readonly explain: (why: string) => Promise<string> = async (why) => why,
  ) {
    ready.then(
      () => (this.isReady = true),
      () => undefined,
    );
  }

  /**
   * Runs `body` inside the next write transaction and answers its result once that transaction
   * is durable. The deadline is checked when the body's turn comes: a body that runs after it
   * writes nothing (its caller was answered "timed out"). One that ran before it has its writes in
   * the transaction, so the caller then waits for the commit, however long the disk takes, and is
   * told what happened (the client's own request timeout covers a hung disk).
   */
  submit<T>(label: string, body: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const write: QueuedWrite = {
        label,
        body,
        expired: false,
        written: false,
        closed: false,
        threw: false,
        outcome: undefined,
        timer: undefined,
        resolve: resolve as (value: unknown) => void,
        reject,
      };
      write.timer = setTimeout(() => {
        if (write.written) return;
        write.expired = true;
        reject(
          new StoreUnavailableError(`${label}: no answer within ${this.timeoutMs} ms`, { timedOut: true }),
        );
      }, this.timeoutMs);
      this.queue.push(write);
      if (this.pending) return;
      if (this.isReady) this.requestTransaction();
      else this.requestWhenReady();
    });
  }

  /** The first writes, while the store opens (migrates): their transaction starts once it is open. */
  private requestWhenReady(): void {
    this.pending = true;
    this.ready.then(
      () => {
        this.isReady = true;
        this.requestTransaction();
      },
      (err: unknown) => {
        const batch = this.queue;
        this.queue = [];
        this.pending = false;
        for (const write of batch) this.answer(write, () => write.reject(asStoreError(write.label, err)));
      },
    );
  }

  /**
   * How long the transaction being committed has waited for the disk (0 when none is): a write
   * whose body ran waits for it past its deadline, so readiness looks here.
   */
  committingForMs(): number {
    let oldest = Infinity;
    for (const since of this.committing.values()) oldest = Math.min(oldest, since);
    return oldest === Infinity ? 0 : Date.now() - oldest;
  }

  private requestTransaction(): void {
    this.pending = true;
    let batch: QueuedWrite[] = [];
    let ran = false;
    const token = {};
    /** The callback never ran (lmdb-js failed or skipped the transaction): the queue is ours. */
    const takeQueueIfNotRun = (): void => {
      if (ran) return;
      ran = true;
      batch = this.queue;
      this.queue = [];
      this.pending = false;
    };
    let committed: PromiseLike<unknown>;
    try {
      committed = this.transaction(() => {
        ran = true;
        // Everything queued until now: the writes that arrived while the previous transaction
        // was being committed and synced. Later ones ask for the next transaction.
        batch = this.queue;
        this.queue = [];
        this.pending = false;
        this.committing.set(token, Date.now());
        for (const write of batch) this.runBody(write);
      });
    } catch (err) {
      // lmdb-js refused to queue the transaction (the environment is closed): fail the queue.
      takeQueueIfNotRun();
      for (const write of batch) this.answer(write, () => write.reject(asStoreError(write.label, err)));
      return;
    }
    const settled = (): void => {
      this.committing.delete(token);
    };
    committed.then(settled, settled);
    committed.then(
      () => {
        if (!ran) {
          // Nothing ran, nothing was written: the queued writes go into a transaction of their own.
          this.pending = false;
          if (this.queue.length > 0) this.requestTransaction();
          return;
        }
        for (const write of batch) {
          this.answer(write, () => {
            if (write.closed) write.reject(new StoreUnavailableError(`${write.label}: closed`));
            else if (write.threw) write.reject(asStoreError(write.label, write.outcome));
            else write.resolve(write.outcome);
          });
        }
      },
      async (err: unknown) => {
        let failure: { why: string; cause: unknown } | undefined;
        try {
          failure = await transactionFailure(err);
          failure = { ...failure, why: await this.explain(failure.why) };
        } catch {
          failure = undefined;
        }
        takeQueueIfNotRun();
        for (const write of batch) {
          this.answer(write, () =>
            write.reject(
              failure === undefined
                ? asStoreError(write.label, err)
                : failedTransaction(write.label, failure),
            ),
          );
        }
      },
    );
  }

  private runBody(write: QueuedWrite): void {
    if (write.expired) return;
    if (this.isClosed()) {
      write.closed = true;
      return;
    }
    write.written = true;
    try {
      write.outcome = write.body();
    } catch (err) {
      write.threw = true;
      write.outcome = err;
    }
  }

  /** Answers a write that was not already answered "timed out". */
  private answer(write: QueuedWrite, settleIt: () => void): void {
    clearTimeout(write.timer);
    if (!write.expired) settleIt();
  }
}
