/**
 * How many round trips to ZooKeeper one commit waits for, without a ZooKeeper: a session whose
 * requests are answered only when the test says so, one round at a time. Each round trip waits
 * behind the session's writes in flight (other commits' fsyncs), so at load every one of them
 * brings a commit nearer the store's deadline (REQUEST_TIMED_OUT).
 */
import type { Client, Stat, Transaction } from 'node-zookeeper-client';
import { describe, expect, test } from 'vitest';
import type { CommitOutcome, CommitRequest, OffsetWrite } from './store.js';
import { commitToZooKeeper } from './zookeeper-commit.js';
import type { ZooKeeperSession } from './zookeeper-session.js';
import { ZooKeeperZnodes } from './zookeeper-znodes.js';
import type { Read } from './zookeeper-znodes.js';

/** A session over an in-memory tree whose reads and multis are answered a round at a time. */
class RoundSession {
  readonly tree = new Map<string, Read>();
  private pending: (() => void)[] = [];
  rounds = 0;

  private later<T>(answer: () => T): Promise<T> {
    return new Promise((resolve) => this.pending.push(() => resolve(answer())));
  }

  /** Answers every request sent so far: one round trip. */
  answerRound(): boolean {
    if (this.pending.length === 0) return false;
    const now = this.pending;
    this.pending = [];
    this.rounds++;
    for (const answer of now) answer();
    return true;
  }

  // The ZooKeeperSession methods a commit uses.
  connected = (): Promise<Client> => Promise.resolve(this.client);
  read = (_client: Client, path: string): Promise<Read | null> =>
    this.later(() => this.tree.get(path) ?? null);
  /** Parent directories: known to exist (the real session remembers them after the first commit). */
  ensureDir = (): Promise<void> => Promise.resolve();
  write = <T>(
    _client: Client,
    _expired: () => boolean,
    fn: (cb: (err: Error | null, v: T) => void) => void,
  ) =>
    this.later(() => undefined).then(
      () => new Promise<T>((resolve, reject) => fn((e, v) => (e ? reject(e) : resolve(v)))),
    );
  run = <T>(_what: string, op: (expired: () => boolean) => Promise<T>): Promise<T> => op(() => false);

  private readonly client = {
    transaction: (): Transaction => {
      const ops: (() => void)[] = [];
      const put = (path: string, data: Buffer | null) => {
        const version = (this.tree.get(path)?.stat.version ?? -1) + 1;
        this.tree.set(path, { data: data ?? undefined, stat: { version } as unknown as Stat });
      };
      const tx = {
        create: (path: string, data?: Buffer) => (ops.push(() => put(path, data ?? null)), tx),
        setData: (path: string, data: Buffer | null) => (ops.push(() => put(path, data)), tx),
        check: () => tx,
        commit: (cb: (err: Error | null, results: unknown[]) => void) => {
          for (const op of ops) op();
          cb(null, []);
        },
      };
      return tx as unknown as Transaction;
    },
  } as unknown as Client;
}

async function commitCountingRounds(session: RoundSession, request: CommitRequest): Promise<CommitOutcome> {
  let settled = false;
  const outcome = commitToZooKeeper(
    {
      session: session as unknown as ZooKeeperSession,
      znodes: new ZooKeeperZnodes('/kop'),
      maxMultiBytes: 900_000,
      applied: () => undefined,
    },
    request,
  ).finally(() => (settled = true));
  // Let the commit send what it sends before each answer; a round with nothing sent is a hang.
  for (let idle = 0; !settled && idle < 50;) {
    await new Promise((r) => setImmediate(r));
    if (session.answerRound()) idle = 0;
    else idle++;
  }
  return outcome;
}

/** Of topic t, no metadata, no expiry. */
const PLAIN = { topic: 't', leaderEpoch: -1, metadata: '', commitTimestamp: 1000n, expireTimestamp: -1n };
const write = (partition: number, offset: bigint): OffsetWrite => ({ ...PLAIN, partition, offset });

describe('ZooKeeper commit round trips', () => {
  test('a commit is two round trips: its reads with the marker check, then its multi', async () => {
    const session = new RoundSession();
    const request = { group: 'g', writes: [write(0, 5n), write(1, 7n)], requestId: 'r1' };
    expect(await commitCountingRounds(session, request)).toEqual({ status: 'ok' });
    expect(session.rounds).toBe(2);
    // And again, over what the first wrote (znodes that exist, the group's state).
    const again = { group: 'g', writes: [write(0, 6n), write(1, 8n)], requestId: 'r2' };
    session.rounds = 0;
    expect(await commitCountingRounds(session, again)).toEqual({ status: 'ok' });
    expect(session.rounds).toBe(2);
    expect(session.tree.get('/kop/consumers/g/offsets/t/0')?.data?.toString()).toBe('6');
  });

  test('a repeated request id is answered from its marker, with nothing written again', async () => {
    const session = new RoundSession();
    const request = { group: 'g', writes: [write(0, 5n)], requestId: 'r1' };
    expect(await commitCountingRounds(session, request)).toEqual({ status: 'ok' });
    const resend = { ...request, writes: [write(0, 9n)] };
    expect(await commitCountingRounds(session, resend)).toEqual({ status: 'ok' });
    expect(session.tree.get('/kop/consumers/g/offsets/t/0')?.data?.toString()).toBe('5');
  });
});
