import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { connectUpstream } from './upstream-socket.js';
import { readSocket } from './reused-reads.js';
import { KeepingReader } from '../../test/harness/keeping-reader.js';

const servers: net.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A server that writes `data` in pieces of `piece` bytes, one per event-loop turn, then ends. */
async function serve(data: Buffer, piece: number): Promise<number> {
  const server = net.createServer((s) => {
    let off = 0;
    const next = (): void => {
      if (off >= data.length) return void s.end();
      s.write(data.subarray(off, off + piece));
      off += piece;
      setImmediate(next);
    };
    next();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

function pattern(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + (i >> 8)) & 0xff;
  return b;
}

describe('connectUpstream with a reused read buffer', () => {
  test('every byte arrives in order; a chunk the reader keeps is never overwritten', async () => {
    const data = pattern(3 * 1024 * 1024);
    const port = await serve(data, 10_000);
    const socket = connectUpstream({ host: '127.0.0.1', port }, null, { reuseReadBuffer: true });
    const reader = new KeepingReader();
    readSocket(socket, reader);
    await new Promise((resolve) => socket.on('close', resolve));
    reader.expectIntact(data);
    reader.expectReused();
  });

  test('without the option, reads are Node buffers handed over as they are', async () => {
    const data = pattern(200_000);
    const port = await serve(data, 50_000);
    const socket = connectUpstream({ host: '127.0.0.1', port }, null);
    const chunks: Buffer[] = [];
    readSocket(socket, {
      readBytes: (chunk: Buffer, end: number) => {
        // Node's own buffer, exactly the bytes read.
        expect(end).toBe(chunk.length);
        chunks.push(chunk);
        return false;
      },
    });
    await new Promise((resolve) => socket.on('close', resolve));
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
  });
});
