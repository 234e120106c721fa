import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { SocketWriter, rawWritesAvailable } from './socket-writer.js';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

function pattern(n: number, seed = 0): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + (i >> 8) + seed) & 0xff;
  return b;
}

/** A client dialling a server that accepts one connection, paused (it reads nothing until resumed). */
async function dial(): Promise<{ client: net.Socket; peer: Promise<net.Socket> }> {
  let accepted!: (s: net.Socket) => void;
  const peer = new Promise<net.Socket>((resolve) => (accepted = resolve));
  const server = net.createServer({ pauseOnConnect: true }, (s) => {
    closers.push(() => s.destroy());
    accepted(s);
  });
  closers.push(() => server.close());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  closers.push(() => client.destroy());
  return { client, peer };
}

/** A connected pair: `client` dialled, `peer` accepted and paused. */
async function pair(): Promise<{ client: net.Socket; peer: net.Socket }> {
  const { client, peer } = await dial();
  await new Promise<void>((resolve) => client.once('connect', resolve));
  return { client, peer: await peer };
}

/** Everything `peer` receives until `total` bytes are in. */
function receive(peer: net.Socket, total: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  return new Promise((resolve) => {
    peer.on('data', (chunk: Buffer) => {
      parts.push(chunk);
      n += chunk.length;
      if (n >= total) resolve(Buffer.concat(parts));
    });
    peer.resume();
  });
}

/** The writes that reach `socket`'s handle, each as its buffers' lengths. */
function spyOnWrites(socket: net.Socket): number[][] {
  const writes: number[][] = [];
  type Write = (req: unknown, data: Buffer | Buffer[], all?: boolean) => number;
  const handle = (socket as unknown as { _handle: { writeBuffer: Write; writev: Write } })._handle;
  const { writeBuffer, writev } = handle;
  handle.writeBuffer = function (req, data) {
    writes.push([(data as Buffer).length]);
    return writeBuffer.call(this, req, data);
  };
  handle.writev = function (req, data, all) {
    writes.push((data as Buffer[]).map((b) => b.length));
    return writev.call(this, req, data, all);
  };
  return writes;
}

describe('SocketWriter', () => {
  test('this Node lets writes go to the handle (fails when an upgrade removes the internals)', () => {
    // The relay's CPU per relayed MB depends on it (docs/benchmarks.md); socket.write is the fallback.
    expect(rawWritesAvailable()).toBe(true);
  });

  test('a peer that does not read: unsent counts what the kernel did not take, drain comes once, bytes arrive in order', async () => {
    const { client, peer } = await pair();
    let drains = 0;
    const writer = new SocketWriter(client, () => drains++);
    const data = pattern(8 * 1024 * 1024);
    let off = 0;
    // Writes until the writer answers false, as the relay does before it stops reading.
    while (off < data.length) {
      const ok = writer.write(data.subarray(off, off + 65536));
      off += 65536;
      if (!ok) break;
    }
    expect(off).toBeLessThan(data.length);
    expect(writer.full).toBe(true);
    // Nothing went through the socket's Writable, yet what is unsent is counted.
    expect(client.writableLength).toBe(0);
    expect(writer.unsent).toBeGreaterThanOrEqual(client.writableHighWaterMark);
    expect(writer.unsent).toBeLessThanOrEqual(off);
    const got = receive(peer, data.length);
    const drained = new Promise<void>((resolve) => {
      const check = (): void => {
        if (!writer.full) return resolve();
        setTimeout(check, 5);
      };
      check();
    });
    await drained;
    expect(drains).toBe(1);
    expect(writer.unsent).toBe(0);
    // The rest, held and released as one read's writes are.
    writer.hold();
    for (; off < data.length; off += 65536) writer.write(data.subarray(off, off + 65536));
    writer.release();
    expect((await got).equals(data)).toBe(true);
  });

  test('held adjacent views of one buffer go out as one slice, others after them, in order', async () => {
    const { client, peer } = await pair();
    const writes = spyOnWrites(client);
    const writer = new SocketWriter(client, () => undefined);
    const read = pattern(40_000, 7);
    const other = pattern(3_000, 9);
    const expected = Buffer.concat([read, other, read.subarray(0, 100)]);
    writer.hold();
    for (let at = 0; at < read.length; at += 4_000) writer.write(read.subarray(at, at + 4_000));
    writer.write(other);
    writer.hold();
    writer.write(read.subarray(0, 50));
    writer.write(read.subarray(50, 100));
    // An inner release writes nothing yet: the outer one does.
    expect(writer.release()).toBe(true);
    expect(writer.unsent).toBe(0);
    expect(writer.release()).toBe(true);
    expect(writes).toEqual([[40_000, 3_000, 100]]);
    // Read buffers may be overwritten once the kernel took the write (nothing unsent).
    if (writer.unsent === 0) read.fill(0);
    expect((await receive(peer, expected.length)).equals(expected)).toBe(true);
  });

  test('a write never passes bytes still queued in the socket’s Writable', async () => {
    const { client, peer } = await pair();
    const writer = new SocketWriter(client, () => undefined);
    const first = pattern(20_000, 1);
    const second = pattern(20_000, 2);
    client.cork();
    client.write(first);
    writer.write(second);
    client.uncork();
    const both = Buffer.concat([first, second]);
    expect((await receive(peer, both.length)).equals(both)).toBe(true);
  });

  test('writes on a socket still connecting go out once it is connected', async () => {
    const { client, peer: accepted } = await dial();
    expect(client.connecting).toBe(true);
    const writer = new SocketWriter(client, () => undefined);
    const data = pattern(100_000, 3);
    writer.write(data.subarray(0, 60_000));
    writer.write(data.subarray(60_000));
    expect((await receive(await accepted, data.length)).equals(data)).toBe(true);
  });

  test('a write to a reset connection destroys the socket with the error, as Node does', async () => {
    const { client, peer } = await pair();
    const writer = new SocketWriter(client, () => undefined);
    const errors: NodeJS.ErrnoException[] = [];
    client.on('error', (err: NodeJS.ErrnoException) => errors.push(err));
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    peer.resetAndDestroy();
    const data = pattern(65536);
    // Writes until the failure shows: the writer answers false from then on.
    const deadline = Date.now() + 10_000;
    while (!client.destroyed && Date.now() < deadline) {
      writer.write(data);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await closed;
    expect(client.destroyed).toBe(true);
    expect(errors.length).toBe(1);
    expect(['ECONNRESET', 'EPIPE']).toContain(errors[0]!.code);
    expect(writer.write(data)).toBe(false);
  });
});
