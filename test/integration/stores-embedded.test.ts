// The embedded (LMDB) store: the shared contract, a corrupt record, and crash safety: a child
// process commits, is SIGKILLed right after an acknowledgement, and the data is there on reopen;
// the same for a proxy taking commits from many connections at once (they share transactions:
// group commit), killed right after a run of acknowledgements.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { open } from 'lmdb';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { runStoreContract, write } from '../../backends/contract.js';
import { groupKey, offsetKey, requestKey, requestTimeKey } from '../../backends/embedded-keys.js';
import { openDatabases } from '../../backends/embedded-databases.js';
import type { EmbeddedDatabases } from '../../backends/embedded-databases.js';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { encodeBlockWrites, mergeBlock } from '../../backends/embedded-value.js';
import { newRequestId } from '../../backends/request-id.js';
import { StoreCorruptError, StoreUnavailableError } from '../../backends/errors.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultOffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import { RawClient } from '../harness/raw-client.js';

const root = mkdtempSync(join(tmpdir(), 'kop-stores-embedded-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

runStoreContract('embedded', async () => new EmbeddedStore({ dataDir: join(root, 'contract') }));

const PARTITIONS = 10;

/** A child that commits offsets 1, 2, 3... to PARTITIONS partitions and prints each acknowledgement. */
const CHILD = `
const { EmbeddedStore } = await import(${JSON.stringify(resolve('backends/embedded-store.ts'))});
const store = new EmbeddedStore({ dataDir: process.env.KOP_TEST_EMBEDDED_DIR });
for (let i = 1n; ; i++) {
  const writes = [];
  for (let p = 0; p < ${PARTITIONS}; p++) writes.push({ topic: 't', partition: p, offset: i, leaderEpoch: 1, metadata: 'm'.repeat(100), commitTimestamp: 1n, expireTimestamp: -1n });
  const r = await store.commit({ group: 'crash', writes, requestId: 'c' + i });
  if (r.status !== 'ok') throw new Error('commit refused');
  process.stdout.write('acked ' + i + '\\n');
}
`;

describe('embedded store', () => {
  it('an acknowledged commit survives kill -9 of the committing process, all partitions together', async () => {
    const dir = join(root, 'crash');
    for (const killAfter of [5, 40, 200]) {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD], {
        env: { ...process.env, KOP_TEST_EMBEDDED_DIR: dir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const lastAcked = await new Promise<bigint>((resolveAck, reject) => {
        let buf = '';
        let base: bigint | undefined;
        child.stdout.on('data', (d: Buffer) => {
          buf += d.toString();
          const lines = buf.split('\n');
          buf = lines.pop()!;
          for (const line of lines) {
            const n = BigInt(line.slice('acked '.length));
            base ??= n;
            if (n - base + 1n >= BigInt(killAfter)) {
              // Killed the moment the acknowledgement is seen: no chance to flush anything later.
              child.kill('SIGKILL');
              resolveAck(n);
              return;
            }
          }
        });
        child.once('exit', (code, signal) => {
          if (signal !== 'SIGKILL') reject(new Error(`child exited ${code}: ${stderr}`));
        });
      });
      await new Promise((r) => child.once('close', r));
      const store = new EmbeddedStore({ dataDir: dir });
      try {
        const offsets = (await store.fetch('crash', null)).map((o) => o.offset);
        expect(offsets).toHaveLength(PARTITIONS);
        // At least what was acknowledged (commits in flight when the signal landed may be there
        // too, acknowledged or not); never torn: every partition of one commit, or none.
        expect(offsets[0]).toBeGreaterThanOrEqual(lastAcked);
        expect(new Set(offsets).size).toBe(1);
      } finally {
        await store.close();
      }
      // The next round's child starts its offsets at 1 again: clear the group.
      const cleaner = new EmbeddedStore({ dataDir: dir });
      await cleaner.deleteGroup('crash');
      await cleaner.close();
    }
  });

  it('every commit a proxy acknowledged to many connections at once survives its kill -9', async () => {
    const CONNECTIONS = 24;
    const COMMIT_PARTITIONS = 20;
    const topic = uniqueName('crash-many');
    await createTopics({ bootstrap: inject('kafkaBootstrap') }, [{ topic, partitions: COMMIT_PARTITIONS }]);
    await ensureBuilt();
    const dir = join(root, 'crash-many');
    for (const killAfter of [30, 400]) {
      const proxy = await spawnProxy(['--bootstrap-server', inject('kafkaBootstrap'), '--data-dir', dir]);
      const clients = await Promise.all(
        Array.from({ length: CONNECTIONS }, () => RawClient.connect(proxy.bootstrap)),
      );
      // Per group (one per connection): the highest offset acknowledged without an error.
      const acked = new Map<string, bigint>();
      let acks = 0;
      let killed = false;
      const round = `${killAfter}`;
      await Promise.all(
        clients.map(async (client, c) => {
          const group = `crash-many-${round}-${c}`;
          for (let offset = 1n; !killed; offset++) {
            const request = {
              ...defaultOffsetCommitRequest(),
              groupId: group,
              generationIdOrMemberEpoch: -1,
              topics: [
                {
                  name: topic,
                  topicId: ZERO_UUID,
                  partitions: Array.from({ length: COMMIT_PARTITIONS }, (_, p) => ({
                    partitionIndex: p,
                    committedOffset: offset,
                    committedLeaderEpoch: -1,
                    committedMetadata: '',
                  })),
                },
              ],
            };
            const correlationId = Number(offset);
            client.write(
              encodeRequestFrame(
                { apiKey: ApiKey.OffsetCommit, apiVersion: 8, correlationId, clientId: 'crash' },
                request,
              ),
            );
            let frame: Buffer;
            try {
              [frame] = (await client.read(1, 60_000)) as [Buffer];
            } catch (err) {
              if (killed) return; // the proxy died with this commit in flight
              throw err;
            }
            const response = decodeResponseFrame(frame, ApiKey.OffsetCommit, 8).body as OffsetCommitResponse;
            const errors = response.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
            expect(errors).toEqual(Array<number>(COMMIT_PARTITIONS).fill(0));
            // Any answer the proxy sent is an acknowledgement, also one read after the kill.
            acked.set(group, offset);
            if (++acks >= killAfter && !killed) {
              // Killed the moment the acknowledgement is seen: no chance to flush anything later.
              killed = true;
              proxy.child.kill('SIGKILL');
            }
          }
        }),
      );
      for (const client of clients) client.close();
      await proxy.stop();
      expect(acked.size).toBeGreaterThan(0);
      const store = new EmbeddedStore({ dataDir: dir });
      try {
        for (const [group, offset] of acked) {
          const offsets = (await store.fetch(group, null)).map((o) => o.offset);
          expect(offsets, group).toHaveLength(COMMIT_PARTITIONS);
          // At least the acknowledged offset, and one commit's: every partition of it, or none.
          expect(offsets[0]! >= offset, `${group}: ${offsets[0]} < acknowledged ${offset}`).toBe(true);
          expect(new Set(offsets).size, group).toBe(1);
        }
      } finally {
        await store.close();
      }
    }
  });

  it('a commit that waited past its deadline for the writer is answered "timed out" and never written', async () => {
    const dir = join(root, 'late');
    const store = new EmbeddedStore({ dataDir: dir, operationTimeoutMs: 300 });
    try {
      await store.commit({ group: 'late', writes: [write('t', 0, 1n)], requestId: 'l1' });
      // Another process holds LMDB's writer lock for 1.5 s (as a slow disk or a big sweep would).
      const holder = spawn(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `const { open } = await import('lmdb');
           const env = open({ path: ${JSON.stringify(dir)}, maxDbs: 16 });
           env.transactionSync(() => {
             process.stdout.write('holding\\n');
             Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
           });
           await env.close();`,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      await new Promise<void>((resolveHeld, reject) => {
        holder.stdout.on('data', (d: Buffer) => d.toString().includes('holding') && resolveHeld());
        holder.once('exit', (code) => reject(new Error(`lock holder exited ${code}`)));
      });
      const error = await store
        .commit({ group: 'late', writes: [write('t', 0, 2n)], requestId: 'l2' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).timedOut).toBe(true);
      await new Promise((r) => holder.once('close', r));
      // The queued transaction ran once the lock was free, found its deadline passed and wrote nothing.
      await store.commit({ group: 'other', writes: [write('t', 0, 1n)], requestId: 'l3' });
      expect((await store.fetch('late', null)).map((o) => o.offset)).toEqual([1n]);
      expect(await store.commit({ group: 'late', writes: [write('t', 0, 3n)], requestId: 'l4' })).toEqual({
        status: 'ok',
      });
      expect((await store.fetch('late', null)).map((o) => o.offset)).toEqual([3n]);
    } finally {
      await store.close();
    }
  });

  it('forgets request outcomes after their TTL', async () => {
    const store = new EmbeddedStore({ dataDir: join(root, 'ttl'), requestTtlMs: 300 });
    const w = (offset: bigint) => ({
      topic: 't',
      partition: 0,
      offset,
      leaderEpoch: -1,
      metadata: '',
      commitTimestamp: 0n,
      expireTimestamp: -1n,
    });
    try {
      await store.commit({ group: 'g', writes: [w(1n)], requestId: 'r1' });
      await store.commit({ group: 'g', writes: [w(2n)], requestId: 'r2' });
      // Within the TTL a repeat is answered, not applied.
      await store.commit({ group: 'g', writes: [w(1n)], requestId: 'r1' });
      expect((await store.fetch('g', null))[0]?.offset).toBe(2n);
      await new Promise((r) => setTimeout(r, 400));
      await store.sweepRequests();
      // After it, the same id is a new request.
      await store.commit({ group: 'g', writes: [w(1n)], requestId: 'r1' });
      expect((await store.fetch('g', null))[0]?.offset).toBe(1n);
    } finally {
      await store.close();
    }
  });

  it('one sweep removes every expired request record, however many batches that takes', async () => {
    const store = new EmbeddedStore({ dataDir: join(root, 'sweep'), requestTtlMs: 1, sweepBatch: 7 });
    const inner = store as unknown as {
      sweepRequests(): Promise<void>;
      db: { requests: { getKeys(): Iterable<unknown> }; requestTimes: { getKeys(): Iterable<unknown> } };
    };
    try {
      for (let i = 0; i < 30; i++)
        await store.commit({ group: 'g', writes: [write('t', 0, BigInt(i))], requestId: `s${i}` });
      expect([...inner.db.requests.getKeys()]).toHaveLength(30);
      expect([...inner.db.requestTimes.getKeys()]).toHaveLength(30);
      await new Promise((r) => setTimeout(r, 20));
      await inner.sweepRequests();
      expect([...inner.db.requests.getKeys()]).toHaveLength(0);
      expect([...inner.db.requestTimes.getKeys()]).toHaveLength(0);
    } finally {
      await store.close();
    }
  });

  it('time-ordered request ids: records in requests-v3 only, answered on resend, swept in key order', async () => {
    const store = new EmbeddedStore({ dataDir: join(root, 'ordered'), requestTtlMs: 400, sweepBatch: 7 });
    const inner = store as unknown as { sweepRequests(): Promise<void>; db: EmbeddedDatabases };
    const keys = (db: { getKeys(): Iterable<unknown> }): unknown[] => [...db.getKeys()];
    try {
      const ids = Array.from({ length: 30 }, newRequestId);
      for (const [i, id] of ids.entries())
        await store.commit({ group: `g${i % 3}`, writes: [write('t', 0, BigInt(i))], requestId: id });
      expect(keys(inner.db.orderedRequests)).toHaveLength(30);
      expect(keys(inner.db.requests)).toHaveLength(0);
      expect(keys(inner.db.requestTimes)).toHaveLength(0);
      // Within the TTL a resend is answered, not applied (g0 holds 27, from ids[27]).
      await store.commit({ group: 'g0', writes: [write('t', 0, 100n)], requestId: ids[0]! });
      expect((await store.fetch('g0', null))[0]?.offset).toBe(27n);
      await new Promise((r) => setTimeout(r, 500));
      await inner.sweepRequests();
      expect(keys(inner.db.orderedRequests)).toHaveLength(0);
      // After it, the same id is a new request.
      await store.commit({ group: 'g0', writes: [write('t', 0, 100n)], requestId: ids[0]! });
      expect((await store.fetch('g0', null))[0]?.offset).toBe(100n);
    } finally {
      await store.close();
    }
  });

  it('a time-ordered id issued long before it is written goes to requests-v2, and is answered from there', async () => {
    const store = new EmbeddedStore({ dataDir: join(root, 'ordered-stale') });
    const inner = store as unknown as { db: EmbeddedDatabases };
    const stale = (Date.now() - 600_000).toString(16).padStart(12, '0') + newRequestId().slice(12);
    try {
      await store.commit({ group: 'g', writes: [write('t', 0, 1n)], requestId: stale });
      expect([...inner.db.orderedRequests.getKeys()]).toHaveLength(0);
      expect([...inner.db.requests.getKeys()]).toHaveLength(1);
      await store.commit({ group: 'g', writes: [write('t', 0, 2n)], requestId: stale });
      expect((await store.fetch('g', null))[0]?.offset).toBe(1n);
    } finally {
      await store.close();
    }
  });

  it("an older release's request records (random ids, requests-v2) are answered after an upgrade, and expire", async () => {
    const dir = join(root, 'upgrade-requests');
    await new EmbeddedStore({ dataDir: dir }).close();
    // What the release before time-ordered ids wrote for a commit of offset 5 with a v4 UUID.
    const id = randomUUID();
    const env = open({ path: dir, maxDbs: 16 });
    const old = openDatabases(env);
    const reqKey = requestKey(groupKey('g'), id);
    const at = Date.now();
    await old.root.transaction(() => {
      old.offsets.putSync(
        offsetKey(groupKey('g'), 't', 0),
        mergeBlock(undefined, encodeBlockWrites([write('t', 0, 5n)])[0]!, 'g'),
      );
      old.groups.putSync(groupKey('g'), { n: 'g', s: null });
      old.requests.putSync(reqKey, { at, r: { s: 'ok' } });
      old.requestTimes.putSync(requestTimeKey(at, reqKey), 1);
    });
    await env.close();
    const store = new EmbeddedStore({ dataDir: dir, requestTtlMs: 400 });
    const inner = store as unknown as { sweepRequests(): Promise<void>; db: EmbeddedDatabases };
    try {
      // The client resends that commit through the new release: answered, not applied again.
      expect(await store.commit({ group: 'g', writes: [write('t', 0, 9n)], requestId: id })).toEqual({
        status: 'ok',
      });
      expect((await store.fetch('g', null))[0]?.offset).toBe(5n);
      await new Promise((r) => setTimeout(r, 500));
      await inner.sweepRequests();
      expect([...inner.db.requests.getKeys()]).toHaveLength(0);
      expect([...inner.db.requestTimes.getKeys()]).toHaveLength(0);
      await store.commit({ group: 'g', writes: [write('t', 0, 9n)], requestId: id });
      expect((await store.fetch('g', null))[0]?.offset).toBe(9n);
    } finally {
      await store.close();
    }
  });

  it('a corrupt record fails that group only, with StoreCorruptError', async () => {
    const dir = join(root, 'corrupt');
    const store = new EmbeddedStore({ dataDir: dir });
    const w = {
      topic: 't',
      partition: 0,
      offset: 1n,
      leaderEpoch: -1,
      metadata: '',
      commitTimestamp: 0n,
      expireTimestamp: -1n,
    };
    try {
      await store.commit({ group: 'good', writes: [w], requestId: 'r1' });
      const env = open({ path: dir, maxDbs: 16 });
      const db = openDatabases(env);
      // Block 0 of topic t: the header says so, then a record cut short.
      await db.offsets.put(
        offsetKey(groupKey('bad'), 't', 0),
        Buffer.from([3, 0, 0, 0, 1, 0x74, 0, 0, 0, 0, 0, 0, 0, 12]),
      );
      await db.groups.put(groupKey('bad-state'), 'not a record' as never);
      // A record under another group's key (what a digest collision would look like).
      await db.groups.put(groupKey('borrowed'), { n: 'lender', s: null });
      await env.close();
      await expect(store.fetch('bad', null)).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(
        store.commit({ group: 'bad', writes: [{ ...w, expectedOffset: 0n }], requestId: 'r2' }),
      ).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(store.getGroup('bad-state')).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(store.commit({ group: 'bad-state', writes: [w], requestId: 'r3' })).rejects.toBeInstanceOf(
        StoreCorruptError,
      );
      await expect(store.getGroup('borrowed')).rejects.toThrow(/names group "lender"/);
      expect((await store.fetch('good', null))[0]?.offset).toBe(1n);
      // Issued in one turn, these share one write transaction (group commit): the corrupt groups'
      // commits fail alone, and the good ones in the same transaction are written.
      const together = await Promise.allSettled([
        store.commit({ group: 'good', writes: [{ ...w, offset: 2n }], requestId: 'r4' }),
        store.commit({ group: 'bad', writes: [{ ...w, expectedOffset: 0n }], requestId: 'r5' }),
        store.commit({ group: 'bad-state', writes: [w], requestId: 'r6' }),
        store.commit({ group: 'good-too', writes: [{ ...w, offset: 7n }], requestId: 'r7' }),
      ]);
      expect(together.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
      for (const r of together.filter((x) => x.status === 'rejected'))
        expect((r as PromiseRejectedResult).reason).toBeInstanceOf(StoreCorruptError);
      expect((await store.fetch('good', null))[0]?.offset).toBe(2n);
      expect((await store.fetch('good-too', null))[0]?.offset).toBe(7n);
    } finally {
      await store.close();
    }
  });
});
