import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, test } from 'vitest';
import {
  BULK_READ_BUFFER_BYTES,
  connectWithReusedReads,
  readSocket,
  readsIntoReusedBuffer,
  reuseAcceptedReads,
} from './reused-reads.js';
import type { ChunkReader } from './reused-reads.js';
import { KeepingReader } from '../../test/harness/keeping-reader.js';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

function pattern(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + (i >> 8)) & 0xff;
  return b;
}

/** A server accepting as the proxy does (paused), handing the accepted socket to `onSocket`. */
async function accepting(onSocket: (s: net.Socket) => void): Promise<number> {
  const server = net.createServer({ pauseOnConnect: true }, onSocket);
  closers.push(() => server.close());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

/** Writes `data` to `port` in pieces of `piece` bytes, one per event-loop turn, then ends. */
function send(port: number, data: Buffer, piece: number): void {
  const c = net.connect(port, '127.0.0.1', () => {
    let off = 0;
    const next = (): void => {
      if (off >= data.length) return void c.end();
      c.write(data.subarray(off, off + piece));
      off += piece;
      setImmediate(next);
    };
    next();
  });
  closers.push(() => c.destroy());
}

describe('reuseAcceptedReads', () => {
  test('an accepted socket reads into one buffer; a chunk the reader keeps is never overwritten', async () => {
    const data = pattern(3 * 1024 * 1024);
    const reader = new KeepingReader();
    let reused = false;
    const ended = new Promise<void>((resolve) => {
      void accepting((s) => {
        reused = reuseAcceptedReads(s);
        expect(readsIntoReusedBuffer(s)).toBe(reused);
        expect(readSocket(s, reader)).toBe(true);
        s.on('end', () => resolve());
        s.resume();
      }).then((port) => send(port, data, 10_000));
    });
    await ended;
    // The Node this project runs on (20) has what it takes: if an upgrade removes it, this fails
    // rather than the relay silently reading as before.
    expect(reused).toBe(true);
    reader.expectIntact(data);
    reader.expectReused();
    // A client connection starts with a small buffer, which its first full read grows to Node's
    // read size, and never beyond, however full its reads.
    const sizes = [...reader.buffers].map((b) => b.byteLength);
    expect(sizes.filter((size) => size === 512)).toHaveLength(1);
    expect(sizes.filter((size) => size !== 512).every((size) => size === 64 * 1024)).toBe(true);
  });

  test('an idle connection holds a small buffer until a read fills it', async () => {
    const reader = new SizingReader();
    let client!: net.Socket;
    const port = await accepting((s) => {
      reuseAcceptedReads(s);
      readSocket(s, reader);
      s.resume();
    });
    await new Promise<void>((resolve) => {
      client = net.connect(port, '127.0.0.1', resolve);
      closers.push(() => client.destroy());
    });
    client.setNoDelay(true);
    const readTo = async (n: number): Promise<void> => {
      while (reader.reads.reduce((sum, r) => sum + r.bytes, 0) < n)
        await new Promise((r) => setTimeout(r, 5));
    };
    // Requests of an idle client (ApiVersions, Metadata): each read in the first buffer.
    const small = pattern(3 * 300);
    for (let off = 0; off < small.length; off += 300) {
      client.write(small.subarray(off, off + 300));
      await readTo(off + 300);
    }
    expect(reader.reads.map((r) => r.size)).toEqual([512, 512, 512]);
    // A larger request fills it: the reads after it go into a buffer of Node's read size.
    const large = pattern(20_000);
    client.write(large);
    await readTo(small.length + large.length);
    const after = reader.reads.slice(3);
    expect(after[0]).toEqual({ size: 512, bytes: 512 });
    expect(after.slice(1).every((r) => r.size === 64 * 1024)).toBe(true);
    expect(after.length).toBeGreaterThan(1);
    reader.inner.expectIntact(Buffer.concat([small, large]));
  });

  test('pause and resume hold and restart reading', async () => {
    const data = pattern(1024 * 1024);
    const got: Buffer[] = [];
    let pausedReads = 0;
    let paused = false;
    const ended = new Promise<void>((resolve) => {
      void accepting((s) => {
        reuseAcceptedReads(s);
        readSocket(s, {
          readBytes: (buffer: Buffer, end: number) => {
            if (paused) pausedReads++;
            got.push(Buffer.from(buffer.subarray(0, end)));
            if (got.length === 2) {
              paused = true;
              s.pause();
              setTimeout(() => {
                paused = false;
                s.resume();
              }, 100);
            }
            return false;
          },
        });
        s.on('end', () => resolve());
        s.resume();
      }).then((port) => send(port, data, 4096));
    });
    await ended;
    expect(pausedReads).toBe(0);
    expect(Buffer.concat(got).equals(data)).toBe(true);
  });

  test('a socket that is not a plain TCP socket, or already reading, reads as Node does', async () => {
    const plain = new net.Socket();
    expect(reuseAcceptedReads(plain)).toBe(false);
    const tlsSocket = new tls.TLSSocket(new net.Socket());
    expect(reuseAcceptedReads(tlsSocket)).toBe(false);
    const result = new Promise<boolean>((resolve) => {
      const server = net.createServer((s) => {
        // Not paused at accept: reading has started.
        resolve(reuseAcceptedReads(s));
        s.destroy();
      });
      closers.push(() => server.close());
      server.listen(0, '127.0.0.1', () => {
        const c = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
        c.on('error', () => undefined);
        closers.push(() => c.destroy());
      });
    });
    expect(await result).toBe(false);
  });
});

describe('sockets reading at once', () => {
  test('never share a buffer: each reads its own bytes, and what each keeps stays as it was', async () => {
    const sent = [pattern(2 * 1024 * 1024), pattern(2 * 1024 * 1024 + 7).subarray(7)];
    const readers = [new KeepingReader(2), new KeepingReader(2)];
    let accepted = 0;
    const ended = new Promise<void>((resolve) => {
      let open = 2;
      void accepting((s) => {
        expect(reuseAcceptedReads(s)).toBe(true);
        readSocket(s, readers[accepted++]!);
        s.on('end', () => {
          if (--open === 0) resolve();
        });
        s.resume();
      }).then((port) => {
        // The first connection is accepted first: it sends the first pattern.
        send(port, sent[0]!, 8_000);
        setTimeout(() => send(port, sent[1]!, 8_000), 20);
      });
    });
    await ended;
    readers[0]!.expectIntact(sent[0]!);
    readers[1]!.expectIntact(sent[1]!);
    for (const b of readers[0]!.buffers) expect(readers[1]!.buffers.has(b)).toBe(false);
  });
});

/** A KeepingReader that also notes the size of each read's buffer and how much of it the read filled. */
class SizingReader implements ChunkReader {
  readonly inner = new KeepingReader();
  readonly reads: { size: number; bytes: number }[] = [];

  readBytes(buffer: Buffer, end: number): boolean {
    this.reads.push({ size: buffer.length, bytes: end });
    return this.inner.readBytes(buffer, end);
  }
}

describe('connectWithReusedReads', () => {
  test('a dialled socket reads into a buffer that grows while reads fill it and shrinks after small ones', async () => {
    const bulk = pattern(4 * 1024 * 1024);
    const trickle = pattern(100 * 1024).subarray(3);
    const reader = new SizingReader();
    let server!: net.Socket;
    const port = await new Promise<number>((resolve) => {
      const srv = net.createServer((s) => {
        server = s;
        // Each small write its own segment, not gathered by Nagle's algorithm.
        s.setNoDelay(true);
        s.write(bulk);
      });
      closers.push(() => srv.close());
      srv.listen(0, '127.0.0.1', () => resolve((srv.address() as net.AddressInfo).port));
    });
    const socket = connectWithReusedReads({ port, host: '127.0.0.1' });
    closers.push(() => socket.destroy());
    expect(readsIntoReusedBuffer(socket)).toBe(true);
    readSocket(socket, reader);
    const read = (n: number): Promise<void> =>
      new Promise((resolve) => {
        const check = (): void => {
          if (reader.reads.reduce((sum, r) => sum + r.bytes, 0) >= n) resolve();
          else setTimeout(check, 5);
        };
        check();
      });
    await read(bulk.length);
    const bulkReads = reader.reads.length;
    expect(reader.reads.some((r) => r.size === BULK_READ_BUFFER_BYTES && r.bytes > 64 * 1024)).toBe(true);
    // Then 1 KB writes, each once the one before is read: one small read each.
    for (let off = 0; off < trickle.length; off += 1024) {
      server.write(trickle.subarray(off, off + 1024));
      await read(bulk.length + Math.min(off + 1024, trickle.length));
    }
    const trickleReads = reader.reads.slice(bulkReads);
    expect(trickleReads.length).toBeGreaterThan(64);
    expect(trickleReads.every((r) => r.bytes <= 1024)).toBe(true);
    // After the last read of more than 64 KB: 64 small reads in the grown buffer, then Node's read size.
    const small = reader.reads.slice(reader.reads.findLastIndex((r) => r.bytes > 64 * 1024) + 1);
    expect(small.slice(0, 64).every((r) => r.size === BULK_READ_BUFFER_BYTES)).toBe(true);
    expect(small.slice(64).every((r) => r.size === 64 * 1024)).toBe(true);
    expect(small.length).toBeGreaterThan(64);
    reader.inner.expectIntact(Buffer.concat([bulk, trickle]));
  });
});
