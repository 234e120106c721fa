/**
 * The Redis store's commit: the commit script's arguments, the script alone or with WAIT for
 * replicas (`?wait=N`), and its outcome, told only once it is definitive (RedisCommits.run).
 * RedisStore (redis-store.ts) owns the connection, the keys and Redis's clock.
 */
import { Cluster } from 'ioredis';
import type { Redis } from 'ioredis';
import { checkOrder } from './commit-order.js';
import { StoreUnavailableError, withDeadline } from './errors.js';
import { decodeOutcome } from './outcome-codec.js';
import type { EncodedOutcome } from './outcome-codec.js';
import { appendConfirmations, confirmationShortfall, confirmsAnything } from './redis-confirm.js';
import type { ConfirmingPipeline } from './redis-confirm.js';
import { packCommitWrites } from './redis-pack.js';
import { isCorruptionReply } from './redis-reply.js';
import { EXPIRED_REPLY } from './redis-scripts.js';
import type { RedisTarget } from './redis-url.js';
import { localNow } from './redis-clock.js';
import { sleepUntil, UNKNOWN, untilOrUnknown } from './redis-validity.js';
import type { CommitOutcome, CommitRequest } from './store.js';

/** What RedisCommits needs of the store. */
export interface RedisCommitDeps {
  client: Redis | Cluster;
  target: RedisTarget;
  /** The whole deadline of a commit, ms. */
  timeoutMs: number;
  /** The last part of it, after the validity, for reading the request record back. */
  readBackMs: number;
  /** The key of `group` with `suffix` (redis-store.ts has the layout). */
  key(group: string, suffix: string): string;
  /** Local time `validTo` in Redis's clock, less the skew margin (redis-clock.ts). */
  validUntil(group: string, validTo: number): Promise<number>;
}

/** The commit script, as RedisStore defines it (numberOfKeys 4, redis-scripts.ts COMMIT_LUA). */
interface CommitScript {
  kopCommit(...args: (string | number | Buffer)[]): Promise<string>;
}

interface WaitPipeline extends ConfirmingPipeline<WaitPipeline> {
  kopCommit(...args: (string | number | Buffer)[]): WaitPipeline;
  get(key: string): WaitPipeline;
  pexpire(key: string, ms: number): WaitPipeline;
  exec(): Promise<[Error | null, unknown][]>;
}

/**
 * How long a group's orders hash outlives the last contended commit that recorded an order in it
 * (redis-scripts.ts COMMIT_LUA). It must be longer than an older commit of the group, read before
 * that one, takes to reach Redis (its wait behind its connection's earlier requests and for the
 * broker's verdict, then its validity); one that takes longer finds no order (design.md).
 */
const ORDERS_KEPT_MS = 10 * 60_000;

/** What the commit script answers for an applied commit (outcome-codec.ts's encoding of ok). */
const OK_REPLY = '{"s":"ok"}';
const OK_OUTCOME: CommitOutcome = Object.freeze({ status: 'ok' });

export class RedisCommits {
  constructor(private readonly deps: RedisCommitDeps) {}

  private get scripts(): CommitScript {
    return this.deps.client as unknown as CommitScript;
  }

  /**
   * A commit carries its own validity (redis-scripts.ts validityPrologue): the script does
   * nothing once Redis's clock has passed `validUntil`, computed from this process's deadline
   * `validTo` and a lower bound of Redis's clock skew (redis-clock.ts), so that no execution can
   * apply after local time `validTo`. An answer that leaves the outcome unknown (a connection
   * error, a lost reply, ioredis giving up, no reply by `validTo`, an expired script) is not
   * reported before `validTo`: from then on nothing can apply the commit any more, so the request
   * record read back then is conclusive (present: the commit applied and its reply was lost, and
   * the recorded outcome is the answer; absent: it never applied). So a commit answered with an
   * error never takes effect afterwards, however late a resend or a held packet reaches Redis.
   * The rest of the deadline (readBackMs) is for that read. (Each step has its own deadline, so
   * the usual path runs one timer, the validity's.)
   */
  async run(request: CommitRequest, validTo: number): Promise<CommitOutcome> {
    const { group } = request;
    checkOrder(request.order);
    const id = request.identity;
    const requestKey = this.deps.key(group, `req:${request.requestId}`);
    const args: (string | number | Buffer)[] = [
      this.deps.key(group, 'offsets'),
      this.deps.key(group, 'state'),
      requestKey,
      this.deps.key(group, 'orders'),
      id === undefined
        ? ''
        : JSON.stringify({
            g: id.generationIdOrMemberEpoch,
            m: id.memberId,
            i: id.groupInstanceId,
            v: id.requestVersion,
          }),
      this.deps.target.requestTtlMs,
      packCommitWrites(request),
      // Nothing is sent yet: a failure to learn the skew is a plain failure.
      await this.deps.validUntil(group, validTo),
      request.deferIfTransactional === true ? '1' : '',
      // Fixed width, so that the script compares orders as strings (redis-scripts.ts).
      request.order === undefined
        ? ''
        : `${request.order.instance}:${String(request.order.seq).padStart(16, '0')}`,
      request.order?.contended === false ? '' : ORDERS_KEPT_MS,
    ];
    const first = confirmsAnything(this.deps.target)
      ? await untilOrUnknown(this.commitAndWait(requestKey, args, validTo), validTo)
      : await untilOrUnknown(
          this.scripts.kopCommit(...args).then((reply) => {
            // The usual answer, without a JSON.parse per commit.
            if (reply === OK_REPLY) return OK_OUTCOME;
            if (reply === EXPIRED_REPLY) return UNKNOWN;
            return decodeOutcome(JSON.parse(reply) as EncodedOutcome);
          }),
          validTo,
        );
    if (first.outcome !== undefined) return first.outcome;
    await sleepUntil(validTo);
    return withDeadline('redis store: commit', this.deps.readBackMs, () =>
      this.readBack(requestKey, first.failure),
    );
  }

  /**
   * After the validity: the request record says whether the commit applied (with ?wait=N or
   * WAITAOF, it must also be confirmed as the commit itself is: redis-confirm.ts).
   */
  private async readBack(requestKey: string, failure: unknown): Promise<CommitOutcome> {
    const why =
      failure instanceof Error
        ? failure.message
        : `no answer within ${this.deps.timeoutMs - this.deps.readBackMs} ms (or the script ran too late)`;
    let recorded: string | null;
    const target = this.deps.target;
    if (confirmsAnything(target)) {
      const pipeline = this.deps.client.pipeline() as unknown as WaitPipeline;
      const [got, touched, ...confirmations] = await appendConfirmations(
        pipeline.get(requestKey).pexpire(requestKey, target.requestTtlMs),
        target,
      ).exec();
      if (got![0] !== null) throw got![0];
      recorded = (got![1] as string | null) ?? null;
      const shortfall = recorded === null ? null : confirmationShortfall(confirmations, target);
      if (recorded !== null && (touched![1] !== 1 || shortfall !== null))
        throw new StoreUnavailableError(
          `redis store: commit applied on the primary, but ${shortfall === null ? 'its record expired as it was read' : `it ${shortfall}`} (after: ${why})`,
        );
    } else {
      recorded = await this.deps.client.get(requestKey);
    }
    if (recorded === null)
      throw new StoreUnavailableError(`redis store: commit not applied: ${why}`, {
        cause: failure,
        timedOut: !(failure instanceof Error),
      });
    return decodeOutcome(JSON.parse(recorded) as EncodedOutcome);
  }

  /**
   * The commit script, a PEXPIRE of its request record and WAIT and/or WAITAOF (redis-confirm.ts),
   * as one pipeline: one connection, to the primary that owns the group's slot (ioredis routes a
   * Cluster pipeline by its keys; WAIT has none). WAIT and WAITAOF count every write this
   * connection made before them. The PEXPIRE is such a write even when the script only answered a
   * recorded outcome (a resend after a lost connection writes nothing, and WAIT alone would then
   * return at once), and its result 0 says the record is not on this primary at all (a failover
   * promoted a replica that never got the first attempt): then nothing is acknowledged. UNKNOWN
   * when the script ran too late.
   */
  private async commitAndWait(
    requestKey: string,
    args: (string | number | Buffer)[],
    validTo: number,
  ): Promise<CommitOutcome | typeof UNKNOWN> {
    const target = this.deps.target;
    for (;;) {
      const pipeline = this.deps.client.pipeline() as unknown as WaitPipeline;
      const [script, touched, ...confirmations] = await appendConfirmations(
        pipeline.kopCommit(...args).pexpire(requestKey, target.requestTtlMs),
        target,
      ).exec();
      if (script![0] !== null) {
        // A Cluster pipeline is not redirected when its commands fail differently (the script
        // MOVED, WAIT answered): learn the new slot owner and run it again (the request record
        // makes a second run harmless), within the validity.
        if (
          this.deps.client instanceof Cluster &&
          !isCorruptionReply(script![0]) &&
          localNow() + 200 < validTo
        ) {
          this.deps.client.refreshSlotsCache();
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        throw script![0];
      }
      if (script![1] === EXPIRED_REPLY) return UNKNOWN;
      const outcome = decodeOutcome(JSON.parse(String(script![1])) as EncodedOutcome);
      if (touched![0] !== null || touched![1] !== 1) {
        throw new StoreUnavailableError(
          "redis store: the commit's request record is not on the primary that answered WAIT (failover?)",
        );
      }
      const shortfall = confirmationShortfall(confirmations, target);
      // Applied on the primary, not (yet) confirmed: the client retries with a new request; the
      // outcome stays unknown to it, as after any timeout.
      if (shortfall !== null) throw new StoreUnavailableError(`redis store: commit ${shortfall}`);
      return outcome;
    }
  }
}
