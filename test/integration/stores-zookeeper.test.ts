// The ZooKeeper store against a real ZooKeeper: the shared contract, Kafka 0.8's layout (what
// Burrow reads), the transaction version-0 bug and its workaround, corrupt znodes, a restart.
import { createClient, Exception } from 'node-zookeeper-client';
import type { Client, Stat } from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runStoreContract } from '../../backends/contract.js';
import { StoreCorruptError, StoreUnavailableError } from '../../backends/errors.js';
import type { CommitIdentity, GroupUpdate, OffsetWrite } from '../../backends/store.js';
import { multiBytes, toTransaction } from '../../backends/zookeeper-multi.js';
import {
  decodeSegment,
  encodeSegment,
  parseZooKeeperUrl,
  ZooKeeperStore,
} from '../../backends/zookeeper-store.js';
import { startZooKeeper } from '../bed/zookeeper.js';
import { ZooKeeperRelay } from '../reliability/zk-session.js';
import type { ZooKeeperServer } from '../bed/zookeeper.js';

let zk: ZooKeeperServer;
let raw: Client;
beforeAll(async () => {
  zk = await startZooKeeper();
  raw = createClient(zk.connectString);
  await new Promise<void>((resolve) => {
    raw.once('connected', () => resolve());
    raw.connect();
  });
});
afterAll(async () => {
  raw?.close();
  await zk?.stop();
});

const p = <T>(fn: (cb: (err: Error | null, v: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => fn((err, v) => (err ? reject(err) : resolve(v))));
const getData = (path: string): Promise<{ data: string; stat: Stat }> =>
  new Promise((resolve, reject) =>
    raw.getData(path, (err, data, stat) =>
      err ? reject(err) : resolve({ data: data?.toString('utf8') ?? '', stat }),
    ),
  );

const w = (partition: number, offset: bigint, extra: Partial<OffsetWrite> = {}): OffsetWrite => ({
  topic: 'orders',
  partition,
  offset,
  leaderEpoch: 4,
  metadata: 'meta',
  commitTimestamp: 1_700_000_000_000n,
  expireTimestamp: -1n,
  ...extra,
});

/** A multi a store is about to send: its ops (the library's), and how to really send it. */
interface SentMulti {
  n: number;
  ops: { type: number; path: string }[];
  send(): Promise<Error | null>;
}

/** The store's current ZooKeeper client (its session's: zookeeper-session.ts). */
const clientOf = (store: ZooKeeperStore): Client =>
  (store as unknown as { session: { client: Client } }).session.client;

/**
 * Intercepts every multi `store` sends (on its current client): `hook` sends it or not, may act
 * in between, and returns what the store hears. Returns the multis seen, in order.
 */
function interceptMultis(store: ZooKeeperStore, hook: (m: SentMulti) => Promise<Error | null>): SentMulti[] {
  const client = clientOf(store);
  const seen: SentMulti[] = [];
  const transaction = client.transaction.bind(client);
  client.transaction = () => {
    const tx = transaction();
    const commit = tx.commit.bind(tx);
    tx.commit = (cb) => {
      const m: SentMulti = {
        n: seen.length,
        ops: (tx as unknown as { ops: { type: number; path: string }[] }).ops,
        send: () => new Promise((resolve) => commit((err) => resolve(err))),
      };
      seen.push(m);
      hook(m).then(
        (err) => cb(err, []),
        (err: Error) => cb(err, []),
      );
    };
    return tx;
  };
  return seen;
}

const OP_CREATE = 1;
const OP_SET_DATA = 5;
const OP_CHECK = 13;
/** What the store hears when a multi's answer is lost. */
const connectionLoss = (): Error =>
  Object.assign(new Error('CONNECTION_LOSS[-4]'), { getCode: () => Exception.CONNECTION_LOSS });
/** Partitions whose offset znode a multi writes. */
const partitionsOf = (m: SentMulti): number[] => [
  ...new Set(
    m.ops
      .filter((op) => /\/offsets\/orders\/\d+$/.test(op.path))
      .map((op) => Number(op.path.split('/').pop())),
  ),
];
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
const code = (err: unknown): number | undefined => (err as Exception | null)?.getCode?.();
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; !cond(); i++) {
    if (i > 200) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 25));
  }
}
/** A group's offsets by partition (getChildren has no order). */
const offsetsOf = async (store: ZooKeeperStore, group: string) =>
  (await store.fetch(group, null)).sort((a, b) => a.partition - b.partition);
const stable = async (store: ZooKeeperStore, group: string): Promise<CommitIdentity> => {
  const m1 = { memberId: 'm1', groupInstanceId: null };
  await store.updateGroup(group, { kind: 'joined', generationId: 1, ...m1, members: [m1] });
  await store.updateGroup(group, { kind: 'synced', generationId: 1, memberId: 'm1' });
  return { generationIdOrMemberEpoch: 1, memberId: 'm1', groupInstanceId: null, requestVersion: 9 };
};

// The contract's 6,000-partition commit takes two multis and 2.5 s on a quiet 2-core machine, 8 s at
// load 30 (other test files running): a deadline that measures the machine is not the contract.
runStoreContract(
  'zookeeper',
  async () => new ZooKeeperStore(`zk://${zk.connectString}/contract`, { operationTimeoutMs: 20_000 }),
);

describe('zookeeper store on a real server', () => {
  it("writes Kafka 0.8's layout with real setData calls (Burrow reads value and mtime)", async () => {
    const store = new ZooKeeperStore(`zk://${zk.connectString}/layout`);
    try {
      await store.commit({ group: 'burrow-group', writes: [w(0, 17n)], requestId: 'l1' });
      const first = await getData('/layout/consumers/burrow-group/offsets/orders/0');
      expect(first.data).toBe('17');
      // Created and setData'd in one multi: version 1, never 0 (see the transaction bug).
      expect(first.stat.version).toBe(1);
      expect((await getData('/layout/consumers/burrow-group/kop-state')).stat.version).toBe(1);
      expect(
        JSON.parse((await getData('/layout/consumers/burrow-group/kop-offset-meta/orders/0')).data),
      ).toEqual({
        o: '17',
        e: 4,
        m: 'meta',
        c: '1700000000000',
        x: '-1',
      });
      await new Promise((r) => setTimeout(r, 20));
      await store.commit({ group: 'burrow-group', writes: [w(0, 18n)], requestId: 'l2' });
      const second = await getData('/layout/consumers/burrow-group/offsets/orders/0');
      expect(second.data).toBe('18');
      expect(second.stat.version).toBe(2);
      expect(second.stat.mtime.readBigInt64BE(0)).toBeGreaterThan(first.stat.mtime.readBigInt64BE(0));
    } finally {
      await store.close();
    }
  });

  it('creates <chroot>/consumers on connect, so a Burrow-style reader watching it sees groups arrive', async () => {
    const store = new ZooKeeperStore(`zk://${zk.connectString}/fresh-root`);
    try {
      await store.ping();
      // A reader that starts before the first commit: /consumers is there, empty, and watchable.
      const deadline = Date.now() + 5000;
      let children: string[] | null = null;
      while (children === null && Date.now() < deadline) {
        children = await p<string[]>((cb) => raw.getChildren('/fresh-root/consumers', cb)).catch(() => null);
        if (children === null) await new Promise((r) => setTimeout(r, 50));
      }
      expect(children).toEqual([]);
      const arrived = new Promise<string[]>((resolve) =>
        raw.getChildren(
          '/fresh-root/consumers',
          () => void p<string[]>((cb) => raw.getChildren('/fresh-root/consumers', cb)).then(resolve),
          () => undefined,
        ),
      );
      await store.commit({ group: 'late-reader', writes: [w(2, 5n)], requestId: 'fr1' });
      expect(await arrived).toEqual(['late-reader']);
      expect((await getData('/fresh-root/consumers/late-reader/offsets/orders/2')).data).toBe('5');
      // What a Kafka 0.8 reader does not find: owner and member znodes (the broker runs the group).
      const kids = await p<string[]>((cb) => raw.getChildren('/fresh-root/consumers/late-reader', cb));
      expect(kids.sort()).toEqual(['kop-offset-meta', 'kop-requests', 'kop-state', 'offsets']);
    } finally {
      await store.close();
    }
  });

  it('reads offsets a Kafka 0.8 consumer wrote (no metadata znode; mtime as commit time)', async () => {
    await p((cb) => raw.mkdirp('/legacy/consumers/old-group/offsets/orders', cb));
    await p((cb) => raw.create('/legacy/consumers/old-group/offsets/orders/3', Buffer.from('1234'), cb));
    const store = new ZooKeeperStore(`zk://${zk.connectString}/legacy`);
    try {
      const [o] = await store.fetch('old-group', null);
      expect(o).toMatchObject({
        topic: 'orders',
        partition: 3,
        offset: 1234n,
        leaderEpoch: -1,
        metadata: '',
        expireTimestamp: -1n,
      });
      expect(Number(o!.commitTimestamp)).toBeGreaterThan(Date.now() - 60_000);
      // And commits over it (the metadata znode is created on the way).
      expect(
        await store.commit({
          group: 'old-group',
          writes: [w(3, 1300n, { expectedOffset: 1234n })],
          requestId: 'legacy-1',
        }),
      ).toEqual({ status: 'ok' });
      expect((await store.fetch('old-group', null))[0]?.offset).toBe(1300n);
    } finally {
      await store.close();
    }
  });

  it('the library skips a version-0 check inside a transaction (the bug we work around)', async () => {
    await p((cb) => raw.mkdirp('/bug/a', cb));
    // /bug/a is at version 0. A multi "check version 0" must pass; "check version 7" should fail,
    // and does; but "setData version 0" on a version-1 znode passes when it must not.
    await p((cb) => raw.setData('/bug/a', Buffer.from('x'), -1, cb)); // now version 1
    await expect(
      p((cb) => raw.transaction().setData('/bug/a', Buffer.from('y'), 7).commit(cb)),
    ).rejects.toThrow(/BAD_VERSION/);
    await p((cb) => raw.transaction().setData('/bug/a', Buffer.from('y'), 0).commit(cb)); // should be BAD_VERSION, is not
    expect((await getData('/bug/a')).data).toBe('y');
  });

  it('CAS on a version-0 offset znode (made by someone else) is still exclusive', async () => {
    const a = new ZooKeeperStore(`zk://${zk.connectString}/v0`);
    const b = new ZooKeeperStore(`zk://${zk.connectString}/v0`);
    try {
      for (let round = 0; round < 8; round++) {
        const group = `v0-${round}`;
        await p((cb) => raw.mkdirp(`/v0/consumers/${group}/offsets/orders`, cb));
        await p((cb) => raw.create(`/v0/consumers/${group}/offsets/orders/0`, Buffer.from('5'), cb));
        expect((await getData(`/v0/consumers/${group}/offsets/orders/0`)).stat.version).toBe(0);
        const [ra, rb] = await Promise.all([
          a.commit({ group, writes: [w(0, 6n, { expectedOffset: 5n })], requestId: `${group}-a` }),
          b.commit({ group, writes: [w(0, 7n, { expectedOffset: 5n })], requestId: `${group}-b` }),
        ]);
        expect([ra.status, rb.status].sort()).toEqual(['cas-mismatch', 'ok']);
        expect((await getData(`/v0/consumers/${group}/offsets/orders/0`)).data).toBe(
          ra.status === 'ok' ? '6' : '7',
        );
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a non-numeric offset znode fails that group only, with StoreCorruptError', async () => {
    await p((cb) => raw.mkdirp('/corrupt/consumers/bad/offsets/orders', cb));
    await p((cb) => raw.create('/corrupt/consumers/bad/offsets/orders/0', Buffer.from('twelve'), cb));
    await p((cb) => raw.mkdirp('/corrupt/consumers/bad-state', cb));
    await p((cb) => raw.create('/corrupt/consumers/bad-state/kop-state', Buffer.from('{'), cb));
    const store = new ZooKeeperStore(`zk://${zk.connectString}/corrupt`);
    try {
      await expect(store.fetch('bad', null)).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(
        store.commit({ group: 'bad', writes: [w(0, 1n, { expectedOffset: 0n })], requestId: 'c1' }),
      ).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(store.getGroup('bad-state')).rejects.toBeInstanceOf(StoreCorruptError);
      expect(await store.commit({ group: 'good', writes: [w(0, 1n)], requestId: 'c2' })).toEqual({
        status: 'ok',
      });
    } finally {
      await store.close();
    }
  });

  it('encodes only what ZooKeeper forbids in names', () => {
    for (const name of ['plain.group-1_x', '', '.', '..', 'a/b', '50%', 'emoji 🚀', 'tab\tx', 'ü']) {
      expect(decodeSegment(encodeSegment(name))).toBe(name);
      expect(encodeSegment(name)).not.toMatch(/\//);
    }
    expect(encodeSegment('plain.group-1_x')).toBe('plain.group-1_x');
    expect(parseZooKeeperUrl('zk://a:1,b:2/kafka/offsets')).toEqual({
      connectString: 'a:1,b:2',
      chroot: '/kafka/offsets',
    });
    expect(() => parseZooKeeperUrl('zk://a/x')).toThrow(/host:port/);
    expect(() => parseZooKeeperUrl('zk://a:1//x')).toThrow(/chroot/);
    expect(parseZooKeeperUrl('zk://a:1/c?maxMultiBytes=2000000')).toEqual({
      connectString: 'a:1',
      chroot: '/c',
      maxMultiBytes: 2_000_000,
    });
    expect(parseZooKeeperUrl('zk://a:1?maxMultiBytes=4096').maxMultiBytes).toBe(4096);
    expect(() => parseZooKeeperUrl('zk://a:1?maxMultiBytes=100')).toThrow(/maxMultiBytes must be/);
    expect(() => parseZooKeeperUrl('zk://a:1?maxMultiBytes=1e6')).toThrow(/maxMultiBytes must be/);
    expect(() => parseZooKeeperUrl('zk://a:1?maxMultiByte=4096')).toThrow(/unknown option/);
  });

  it("the size estimate is the server's: a multi of exactly jute.maxbuffer is accepted, a byte more is not", async () => {
    const client = createClient(zk.connectString, { retries: 0 });
    await new Promise<void>((resolve) => {
      client.once('connected', () => resolve());
      client.connect();
    });
    try {
      await p((cb) => client.mkdirp('/maxbuffer/a', cb));
      // setData of one znode, repeated: the last op's data fills the request up to the size wanted.
      const multi = (bytes: number) => {
        const ops = range(8).map(() => ({
          type: 'setData' as const,
          path: '/maxbuffer/a',
          data: Buffer.alloc(100_000),
          version: -1,
        }));
        const last = ops.at(-1)!;
        last.data = Buffer.alloc(last.data.length + bytes - multiBytes(ops));
        expect(multiBytes(ops)).toBe(bytes);
        return p((cb) => toTransaction(client.transaction(), ops).commit(cb));
      };
      // The server takes a packet of up to jute.maxbuffer (default 1,048,575) bytes after the length prefix.
      await multi(4 + 1_048_575);
      await expect(multi(4 + 1_048_576)).rejects.toThrow(/CONNECTION_LOSS/);
    } finally {
      client.close();
    }
  });

  it('a commit larger than one multi: several multis in order, each fenced, the marker in the last', async () => {
    const store = new ZooKeeperStore(`zk://${zk.connectString}/split?maxMultiBytes=4096`);
    try {
      await store.ping();
      let lostOnce = false;
      const multis = interceptMultis(store, async (m) => {
        const err = await m.send();
        // The last multi's answer is lost once: the marker read back says it applied.
        if (err === null && m.ops.at(-1)!.path.includes('/kop-requests/') && !lostOnce) {
          lostOnce = true;
          return connectionLoss();
        }
        return err;
      });
      const writes = range(40).map((i) => w(i, BigInt(1000 + i), { metadata: `m${i}` }));
      expect(await store.commit({ group: 'big', writes, requestId: 'big-1' })).toEqual({ status: 'ok' });
      expect(lostOnce).toBe(true);
      expect(multis.length).toBeGreaterThan(2);
      expect(multis.flatMap(partitionsOf)).toEqual(range(40));
      multis.forEach((m, n) => {
        const state = '/split/consumers/big/kop-state';
        // The first creates the group's state znode (create + setData), every later one checks its version.
        if (n === 0)
          expect(m.ops.slice(0, 2).map((op) => [op.type, op.path])).toEqual([
            [OP_CREATE, state],
            [OP_SET_DATA, state],
          ]);
        else expect([m.ops[0]!.type, m.ops[0]!.path]).toEqual([OP_CHECK, state]);
        expect(m.ops.some((op) => op.path.includes('/kop-requests/'))).toBe(n === multis.length - 1);
      });
      expect((await offsetsOf(store, 'big')).map((o) => [o.partition, o.offset, o.metadata])).toEqual(
        range(40).map((i) => [i, BigInt(1000 + i), `m${i}`]),
      );
      // A resend of the same request is answered from the marker: no multi.
      const sent = multis.length;
      expect(await store.commit({ group: 'big', writes, requestId: 'big-1' })).toEqual({ status: 'ok' });
      expect(multis.length).toBe(sent);
    } finally {
      await store.close();
    }
  });

  it('a multi delivered after its commit was answered loses to every later commit of its partitions', async () => {
    // A's multi is held (a frozen server, a slow link) until A's caller has its answer and B, the
    // client's next commit of the same partitions, is acknowledged; then it reaches ZooKeeper.
    const store = new ZooKeeperStore(`zk://${zk.connectString}/late`, { operationTimeoutMs: 500 });
    const other = new ZooKeeperStore(`zk://${zk.connectString}/late`, { operationTimeoutMs: 2_000 });
    try {
      await store.commit({ group: 'late', writes: [w(0, 1n), w(1, 1n)], requestId: 'late-0' });
      let release: () => void = () => undefined;
      const held = new Promise<void>((r) => (release = r));
      let late: Error | null | undefined;
      interceptMultis(store, async (m) => {
        await held;
        late = await m.send();
        return late;
      });
      const a = await store
        .commit({ group: 'late', writes: [w(0, 3n), w(1, 3n)], requestId: 'late-a' })
        .catch((e: unknown) => e);
      expect(a).toBeInstanceOf(StoreUnavailableError);
      expect(
        await other.commit({ group: 'late', writes: [w(0, 5n), w(1, 5n)], requestId: 'late-b' }),
      ).toEqual({ status: 'ok' });
      release();
      await until(() => late !== undefined);
      expect(code(late)).toBe(Exception.BAD_VERSION);
      expect((await offsetsOf(other, 'late')).map((o) => [o.partition, o.offset])).toEqual([
        [0, 5n],
        [1, 5n],
      ]);
    } finally {
      await store.close();
      await other.close();
    }
  });

  it('a commit answered "timed out" while ZooKeeper was away is not written when it comes back', async () => {
    const relay = await ZooKeeperRelay.start({
      host: '127.0.0.1',
      port: Number(zk.connectString.split(':')[1]),
    });
    const store = new ZooKeeperStore(`${relay.url}/away`, { operationTimeoutMs: 500 });
    try {
      await store.commit({ group: 'away', writes: [w(0, 1n)], requestId: 'away-1' });
      relay.sever();
      const error = await store
        .commit({ group: 'away', writes: [w(0, 3n)], requestId: 'away-3' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).timedOut).toBe(true);
      await new Promise((r) => setTimeout(r, 700));
      relay.restore();
      // Connected again (a new attempt would have run by now), and nothing of that commit is there.
      await store.ping();
      await new Promise((r) => setTimeout(r, 500));
      expect((await offsetsOf(store, 'away')).map((o) => o.offset)).toEqual([1n]);
      expect(await p<string[]>((cb) => raw.getChildren('/away/consumers/away/kop-requests', cb))).toEqual([
        'away-1',
      ]);
    } finally {
      await store.close();
      await relay.close();
    }
  });

  it('a split commit whose fence changes between multis: the rest is judged again (applied parts stay)', async () => {
    const m1 = { memberId: 'm1', groupInstanceId: null };
    const m2 = { memberId: 'm2', groupInstanceId: null };
    const writes = range(40).map((i) => w(i, 7n));
    /** Commits `writes` as m1 of generation 1 in several multis; `update` lands right after the first. */
    const commitAround = async (group: string, update: GroupUpdate) => {
      const store = new ZooKeeperStore(`zk://${zk.connectString}/split-fence?maxMultiBytes=4096`);
      try {
        const identity = await stable(store, group);
        const seen = interceptMultis(store, async (m) => {
          const err = await m.send();
          if (m.n === 0) await store.updateGroup(group, update);
          return err;
        });
        const outcome = await store.commit({ group, identity, writes, requestId: group });
        return { outcome, seen, stored: (await offsetsOf(store, group)).map((o) => o.partition) };
      } finally {
        await store.close();
      }
    };

    // A member joins the same generation: the second multi fails on the state znode's version, the
    // commit is judged again (still fine) and the retry sends only what the first multi had not.
    const same = await commitAround('same-gen', { kind: 'joined', generationId: 1, ...m2 });
    expect(same.outcome).toEqual({ status: 'ok' });
    const first = partitionsOf(same.seen[0]!);
    expect(same.seen.length).toBeGreaterThan(2);
    expect(same.seen.slice(2).flatMap(partitionsOf)).toEqual(range(40).filter((i) => !first.includes(i)));
    expect(same.stored).toEqual(range(40));

    // A new generation: the rest is refused; the first multi's partitions stay written (several
    // atomic steps, not one) and no marker was written.
    const next = await commitAround('new-gen', { kind: 'joined', generationId: 2, ...m1, members: [m1] });
    expect(next.outcome).toEqual({ status: 'fenced', error: 22 });
    expect(next.seen).toHaveLength(2);
    expect(next.stored).toEqual(partitionsOf(next.seen[0]!));
    expect(next.stored.length).toBeGreaterThan(0);
    expect(
      await p<string[]>((cb) => raw.getChildren('/split-fence/consumers/new-gen/kop-requests', cb)),
    ).toEqual([]);
  });

  it('compare-and-set in a split commit: decided in the first multi, and a lost answer is our own write', async () => {
    const store = new ZooKeeperStore(`zk://${zk.connectString}/split-cas?maxMultiBytes=4096`);
    try {
      await store.ping();
      const base = range(40).map((i) => w(i, 10n));
      expect(await store.commit({ group: 'cas', writes: base, requestId: 'base' })).toEqual({ status: 'ok' });

      // CAS partitions last in the request: they still go in the first multi. Another writer
      // changes one of them after our reads: the first multi fails, the commit is judged again
      // and refused, and nothing at all was written.
      const writes = range(40).map((i) => (i < 35 ? w(i, 20n) : w(i, 20n, { expectedOffset: 10n })));
      const seen = interceptMultis(store, async (m) => {
        if (m.n === 0) {
          expect(partitionsOf(m).slice(0, 5)).toEqual([35, 36, 37, 38, 39]);
          await p((cb) =>
            raw.setData('/split-cas/consumers/cas/offsets/orders/38', Buffer.from('11'), -1, cb),
          );
        }
        return m.send();
      });
      expect(await store.commit({ group: 'cas', writes, requestId: 'cas-1' })).toEqual({
        status: 'cas-mismatch',
        mismatches: [{ topic: 'orders', partition: 38, expected: 10n, actual: 11n }],
      });
      expect(seen).toHaveLength(1);
      expect((await offsetsOf(store, 'cas')).map((o) => o.offset)).toEqual(
        range(40).map((i) => (i === 38 ? 11n : 10n)),
      );
    } finally {
      await store.close();
    }
  });

  it('a compare-and-set commit across several multis whose answers are lost still succeeds once', async () => {
    const store = new ZooKeeperStore(`zk://${zk.connectString}/split-cas-lost?maxMultiBytes=4096`);
    try {
      await store.ping();
      const base = range(40).map((i) => w(i, 10n));
      expect(await store.commit({ group: 'lost', writes: base, requestId: 'base' })).toEqual({
        status: 'ok',
      });
      // Every partition compare-and-set: they span several multis. The answer of the first is lost
      // (it applied); on the retry the first is answered and the second's answer is lost.
      const writes = range(40).map((i) => w(i, 30n + BigInt(i), { expectedOffset: 10n }));
      const seen = interceptMultis(store, async (m) => {
        const err = await m.send();
        return err === null && (m.n === 0 || m.n === 2) ? connectionLoss() : err;
      });
      expect(await store.commit({ group: 'lost', writes, requestId: 'lost-1' })).toEqual({ status: 'ok' });
      const [first, again, second, secondAgain] = seen.map(partitionsOf);
      // The retry sends the first multi again (its partitions hold our own write: matched), then
      // after the second's lost answer only what no answered multi wrote.
      expect(again).toEqual(first);
      expect(secondAgain).toEqual(second);
      expect(seen.slice(3).flatMap(partitionsOf)).toEqual(range(40).filter((i) => !first!.includes(i)));
      expect((await offsetsOf(store, 'lost')).map((o) => o.offset)).toEqual(
        range(40).map((i) => 30n + BigInt(i)),
      );
    } finally {
      await store.close();
    }
  });

  it('removes request markers after their TTL', async () => {
    const store = new ZooKeeperStore(`zk://${zk.connectString}/markers`, { requestTtlMs: 1000 });
    try {
      for (let i = 1n; i <= 3n; i++)
        await store.commit({ group: 'mk', writes: [w(0, i)], requestId: `m${i}` });
      const list = () => p<string[]>((cb) => raw.getChildren('/markers/consumers/mk/kop-requests', cb));
      expect((await list()).sort()).toEqual(['m1', 'm2', 'm3']);
      await new Promise((r) => setTimeout(r, 1100));
      await store.commit({ group: 'mk', writes: [w(0, 4n)], requestId: 'm4' });
      await (store as unknown as { sweepMarkers(): Promise<void> }).sweepMarkers();
      expect(await list()).toEqual(['m4']);
      expect((await store.fetch('mk', null))[0]?.offset).toBe(4n);
    } finally {
      await store.close();
    }
  });

  it('session expired: the store makes a new client and commits go on, nothing lost', async () => {
    const store = new ZooKeeperStore(`zk://${zk.connectString}/expiry`, {
      operationTimeoutMs: 5000,
      sessionTimeoutMs: 4000,
    });
    try {
      expect(await store.commit({ group: 'exp', writes: [w(0, 1n)], requestId: 'e1' })).toEqual({
        status: 'ok',
      });
      const first = clientOf(store);
      let expired = false;
      first.on('state', (st: { getName(): string }) => (expired ||= st.getName() === 'EXPIRED'));
      // Whichever notices first: the store's client seeing EXPIRED, or a later thief told that the
      // session is gone (the store may have replaced its client before the old one saw the state).
      let gone = false;
      // A commit in flight while the session is being ended still succeeds (retried on a new client).
      const during = store.commit({ group: 'exp', writes: [w(0, 2n), w(1, 2n)], requestId: 'e2' });
      // End the store's session from outside: join it from another connection, then close it. The
      // store's client may win the session back before the close lands, so repeat until it expires.
      for (let attempt = 0; attempt < 20 && !expired && !gone; attempt++) {
        const thief = createClient(zk.connectString, {
          sessionId: first.getSessionId(),
          sessionPassword: first.getSessionPassword(),
        });
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 2000);
          thief.once('connected', () => {
            clearTimeout(timer);
            resolve();
          });
          thief.once('expired', () => {
            gone = true;
            clearTimeout(timer);
            resolve();
          });
          thief.connect();
        });
        try {
          thief.close();
        } catch {
          // close() of a client that never connected throws inside the library
        }
        await new Promise((r) => setTimeout(r, 300));
      }
      expect(expired || gone, 'the session was ended').toBe(true);
      expect(await during).toEqual({ status: 'ok' });
      expect(await store.commit({ group: 'exp', writes: [w(0, 8n), w(1, 8n)], requestId: 'e8' })).toEqual({
        status: 'ok',
      });
      expect(clientOf(store)).not.toBe(first);
      expect((await store.fetch('exp', null)).map((o) => o.offset)).toEqual([8n, 8n]);
    } finally {
      await store.close();
    }
  });

  it('ZooKeeper restarted: StoreUnavailableError within the deadline, then recovery with nothing acknowledged lost', async () => {
    const deadline = 1500;
    const store = new ZooKeeperStore(`zk://${zk.connectString}/restart`, {
      operationTimeoutMs: deadline,
      sessionTimeoutMs: 4000,
    });
    const acked: bigint[] = [];
    let stop = false;
    const writer = (async () => {
      for (let i = 1n; !stop; i++) {
        try {
          if (
            (await store.commit({ group: 'restart', writes: [w(0, i), w(1, i)], requestId: `restart-${i}` }))
              .status === 'ok'
          )
            acked.push(i);
        } catch (e) {
          expect(e).toBeInstanceOf(StoreUnavailableError);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    })();
    try {
      await new Promise((r) => setTimeout(r, 500));
      await zk.stop();
      const ackedBeforeStop = acked.length;
      expect(ackedBeforeStop).toBeGreaterThan(0);
      const t0 = Date.now();
      await expect(store.fetch('restart', null)).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(Date.now() - t0).toBeLessThan(deadline + 500);
      await new Promise((r) => setTimeout(r, 500));
      await zk.start();
      // Commits resume on the same store object.
      const resumeFrom = acked.length;
      for (let i = 0; i < 200 && acked.length <= resumeFrom + 3; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(acked.length).toBeGreaterThan(resumeFrom + 3);
      stop = true;
      await writer;
      const last = acked.at(-1)!;
      const stored = (await store.fetch('restart', null)).map((o) => o.offset);
      expect(stored).toEqual([last, last]);
    } finally {
      stop = true;
      await writer;
      await store.close();
    }
  });
});
