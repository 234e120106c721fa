/**
 * Issue 43, sequence (a): commits the proxy read on a connection but had not started yet start
 * after the client gave that connection up, reconnected and had a newer commit acknowledged. The
 * proxy answers a connection's store-served requests one at a time and drops a closed
 * connection's queued ones when it sees the close; while it does not read the client (here: the
 * in-flight limit, --max-in-flight 4, reached) it sees the close late, and the older commits
 * queued behind a slow one apply after the newer one. "Later read wins" (docs/design.md): each is
 * superseded, answered as applied, and the acknowledged offset stays.
 *
 * A real KafkaProxy and OffsetService on a MemoryStore. The slow commit is a gate, not a delay:
 * the store applies commit 1 at once and holds its answer until the test has had the newer
 * commit acknowledged on a second connection, so what comes after is in the same order whatever
 * the load. The broker is a listener that accepts and never answers: nothing here goes to it.
 */
import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import type { CommitOutcome, CommitRequest } from '../../backends/store.js';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import {
  defaultOffsetCommitRequest,
  defaultOffsetCommitRequestTopic,
} from '../../protocol/messages/offset-commit-request.js';
import { KafkaProxy } from '../../proxy/core/server.js';
import { COMMITS_IN_PROGRESS } from '../../proxy/offsets/commits-in-progress.js';
import { OffsetService } from '../../proxy/offsets/service.js';
import { gate, until } from '../harness/connection-flow-bed.js';
import { standaloneServiceOptions } from '../harness/offset-service.js';

const HOST = '127.0.0.1';
const GROUP = 'late-commit';

/** Applies every commit at once; commit `heldOffset` then waits for `release` before it answers. */
class HeldAnswerStore extends MemoryStore {
  readonly held = gate();
  readonly release = gate();
  /** The offset each commit wrote or tried to write, in the order they reached the store. */
  readonly started: bigint[] = [];
  /** Per commit in `started`, whether the proxy sent it as contended (CommitOrder.contended). */
  readonly contended: (boolean | undefined)[] = [];
  inFlight = 0;
  constructor(private readonly heldOffset: bigint) {
    super();
  }
  override async commit(request: CommitRequest): Promise<CommitOutcome> {
    this.started.push(request.writes[0]!.offset);
    this.contended.push(request.order?.contended);
    this.inFlight++;
    try {
      const outcome = await super.commit(request);
      if (request.writes[0]!.offset === this.heldOffset) {
        this.held.open();
        await this.release.opened;
      }
      return outcome;
    } finally {
      this.inFlight--;
    }
  }
}

const commit = (correlationId: number, offset: bigint): Buffer =>
  encodeRequestFrame(
    { apiKey: ApiKey.OffsetCommit, apiVersion: 8, correlationId, clientId: 'load' },
    {
      ...defaultOffsetCommitRequest(),
      groupId: GROUP,
      topics: [
        {
          ...defaultOffsetCommitRequestTopic(),
          name: 't',
          partitions: [
            { partitionIndex: 0, committedOffset: offset, committedLeaderEpoch: -1, committedMetadata: '' },
          ],
        },
      ],
    },
  );

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function start(maxInFlight: number) {
  // A broker that accepts and never answers: the commits are the proxy's to answer.
  const broker = net.createServer((s) => s.on('error', () => undefined));
  await new Promise<void>((r) => broker.listen({ host: HOST, port: 0 }, r));
  cleanups.push(() => new Promise((r) => broker.close(() => r())));
  const store = new HeldAnswerStore(1n);
  const superseded: number[] = [];
  const service = new OffsetService({
    ...standaloneServiceOptions(store, 'off'),
    metrics: {
      commitAccepted: () => undefined,
      commitRefused: () => undefined,
      commitSuperseded: (_g, n) => superseded.push(n),
      mirrored: () => undefined,
    },
  });
  const closed: string[] = [];
  const extension = Object.assign(Object.create(service) as OffsetService, {
    connectionClosed: (id: string) => {
      closed.push(id);
      service.connectionClosed(id);
    },
  });
  const proxy = new KafkaProxy({
    bootstrapServers: [{ host: HOST, port: (broker.address() as net.AddressInfo).port }],
    listen: { host: HOST, port: 0 },
    discoverBrokers: async () => [],
    extension,
    maxInFlight,
    nativeRelay: false,
  });
  await proxy.start();
  cleanups.push(() => proxy.stop());
  return { store, proxy, closed, superseded };
}

function connect(port: number): Promise<{ socket: net.Socket; answers: () => number[] }> {
  return new Promise((resolve, reject) => {
    const codes: number[] = [];
    const splitter = new FrameSplitter({ maxFrameSize: 1 << 20 });
    const socket = net.connect({ host: HOST, port }, () => resolve({ socket, answers: () => codes }));
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      for (const frame of splitter.push(chunk)) {
        const { body } = decodeResponseFrame(frame, ApiKey.OffsetCommit, 8);
        codes.push(body.topics[0]!.partitions[0]!.errorCode);
      }
    });
  });
}

describe('a commit read before a newer acknowledged one never overwrites it', () => {
  test('older commits queued on a connection the client gave up start after its newer commit: superseded', async () => {
    const { store, proxy, closed, superseded } = await start(4);
    // The client pipelines five commits; the first one's answer is slow, the proxy reaches its
    // in-flight limit and stops reading the connection.
    const old = await connect(proxy.address.port);
    old.socket.write(Buffer.concat([1n, 2n, 3n, 4n, 5n].map((o, i) => commit(i + 1, o))));
    await store.held.opened;
    // No answer in time: the client closes the connection and commits its newest offset on a new
    // one, which is acknowledged.
    old.socket.destroy();
    const fresh = await connect(proxy.address.port);
    fresh.socket.write(commit(1, 120n));
    await until(() => fresh.answers().length === 1, 'the newer commit answered');
    expect(fresh.answers()).toEqual([0]);
    // The slow answer comes: the proxy writes it, starts the next commit it had read, and only
    // then finds the connection closed.
    store.release.open();
    await until(
      () => closed.length >= 1 && store.inFlight === 0,
      'the old connection closed, its commits done',
    );
    // The sequence happened: at least one older commit reached the store after the newer one.
    expect(store.started.indexOf(120n)).toBeLessThan(store.started.length - 1);
    expect((await store.fetch(GROUP, null)).map((o) => o.offset)).toEqual([120n]);
    expect(superseded.reduce((a, b) => a + b, 0)).toBe(
      store.started.length - 1 - store.started.indexOf(120n),
    );
    // The newer commit was sent while older ones it was read after were still queued: contended,
    // so a store that records orders only then (Redis) records it. The first one was alone.
    expect(store.contended[store.started.indexOf(120n)]).toBe(true);
    expect(store.contended[0]).toBe(false);
    await until(() => COMMITS_IN_PROGRESS.size === 0, 'no commit left in progress');
    fresh.socket.destroy();
  });
});
