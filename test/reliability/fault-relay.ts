// A TCP relay between the proxy and its store that can misbehave the way networks do:
// - freeze(): stop forwarding in both directions, connections kept open (a partition or a
//   stalled hop), until thaw() forwards what was held (also what the proxy sent on a connection
//   it closed meanwhile, as TCP would); freezeFrom() does it to the connections from one source
//   address only (one peer cut off while the others still get through);
// - drop(): reset every connection;
// - hold() + cutClients() + deliverHeld(): buffer what the proxy sends on its current
//   connections, reset the proxy's side so it reconnects through a fresh connection (which is
//   relayed normally), then write the held bytes late on the old, still open server-side sockets
//   (a hop that buffered packets during a partition and delivered them after it healed);
//   deliverHeldThen() does the same and knows when the server has run them;
// - closePort() + openPort(): nothing listens for a while, so reconnects fail before they connect
//   (as when the server is down), which is not the same to a client as a connection reset at once.
import net from 'node:net';

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  /** Client → server bytes not forwarded yet (held or frozen). */
  up: Buffer[];
  /** Server → client bytes not forwarded yet (frozen). */
  down: Buffer[];
  holding: boolean;
  /** Server → client bytes of this connection are dropped (replies lost). */
  muted: boolean;
  /** The proxy's side was cut: whatever the server answers goes nowhere. */
  orphan: boolean;
}

export class FaultRelay {
  private readonly pairs = new Set<Pair>();
  private frozen = false;
  /** Connections from these source addresses are frozen (freezeFrom()). */
  private readonly frozenFrom = new Set<string>();
  /** New connections are reset at once (the store's reconnects fail). */
  refusing = false;
  /** Client → server bytes written late by deliverHeld(), for the report. */
  deliveredBytes = 0;
  connections = 0;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    private target: { host: string; port: number },
  ) {}

  /** New connections go to `target` from now on (a failover's address switch; drop() the old ones). */
  retarget(target: { host: string; port: number }): void {
    this.target = target;
  }

  static async start(target: { host: string; port: number }): Promise<FaultRelay> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
    const relay = new FaultRelay(server, (server.address() as net.AddressInfo).port, target);
    server.on('connection', (client) => relay.relay(client));
    return relay;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  private relay(client: net.Socket): void {
    if (this.refusing) {
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    this.connections++;
    const upstream = net.connect(this.target);
    const pair: Pair = { client, upstream, up: [], down: [], holding: false, muted: false, orphan: false };
    this.pairs.add(pair);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    client.on('data', (chunk: Buffer) => {
      if (pair.holding || this.isFrozen(pair)) pair.up.push(chunk);
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (pair.orphan || pair.muted) return;
      if (this.isFrozen(pair)) pair.down.push(chunk);
      else client.write(chunk);
    });
    client.on('close', () => {
      if (pair.orphan) return;
      // What the proxy sent before it closed still reaches the server, as over TCP (the FIN comes
      // after the data): bytes held or frozen wait for deliverHeld() or thaw().
      if (pair.up.length > 0) {
        pair.orphan = true;
        return;
      }
      upstream.destroy();
      this.pairs.delete(pair);
    });
    upstream.on('close', () => {
      client.destroy();
      this.pairs.delete(pair);
    });
  }

  /** Stops forwarding in both directions; connections stay open, new ones are accepted and held. */
  freeze(): void {
    this.frozen = true;
  }

  /** freeze() for the connections whose client connects from `address` (open and new ones). */
  freezeFrom(address: string): void {
    this.frozenFrom.add(address);
  }

  private isFrozen(pair: Pair): boolean {
    return this.frozen || this.frozenFrom.has(pair.client.remoteAddress ?? '');
  }

  /** Forwards what was held while frozen (by freeze() or any freezeFrom()), and everything after it. */
  thaw(): void {
    this.frozen = false;
    this.frozenFrom.clear();
    for (const p of [...this.pairs]) {
      if (p.holding) continue;
      for (const b of p.up.splice(0)) p.upstream.write(b);
      if (!p.orphan) for (const b of p.down.splice(0)) p.client.write(b);
      else {
        // The proxy closed this one while frozen: its last bytes are delivered, then the FIN.
        p.upstream.end();
        this.pairs.delete(p);
      }
    }
  }

  /** Connections the proxy has open through the relay now. */
  get open(): number {
    let n = 0;
    for (const p of this.pairs) if (!p.orphan) n++;
    return n;
  }

  /** Resets every connection (both sides). */
  drop(): void {
    for (const p of this.pairs) {
      p.client.resetAndDestroy();
      p.upstream.resetAndDestroy();
    }
    this.pairs.clear();
  }

  /** From now on, the replies on the connections open now are dropped (the requests still go). */
  muteReplies(): void {
    for (const p of this.pairs) p.muted = true;
  }

  /** From now on, what the proxy sends on the connections open now is held, not forwarded. */
  hold(): number {
    let n = 0;
    for (const p of this.pairs) {
      if (p.orphan) continue;
      p.holding = true;
      n++;
    }
    return n;
  }

  /**
   * Resets the proxy's side of every held connection and keeps the server's side open, so the
   * proxy reconnects (through a new, normally relayed connection) while its held bytes wait.
   */
  cutClients(): void {
    for (const p of this.pairs) {
      if (!p.holding || p.orphan) continue;
      p.orphan = true;
      p.client.resetAndDestroy();
    }
  }

  /** Client → server bytes not forwarded yet, held or frozen. */
  pendingBytes(): number {
    let n = 0;
    for (const p of this.pairs) for (const b of p.up) n += b.length;
    return n;
  }

  /** Bytes held for late delivery. */
  heldBytes(): number {
    let n = 0;
    for (const p of this.pairs) if (p.holding) for (const b of p.up) n += b.length;
    return n;
  }

  /** Whether the bytes held for late delivery contain `needle` (within one connection's bytes). */
  heldContains(needle: string): boolean {
    for (const p of this.pairs) if (p.holding && Buffer.concat(p.up).includes(needle)) return true;
    return false;
  }

  /**
   * Writes the held bytes on the old server-side sockets, waits `lingerMs` for the server to run
   * them, and closes those sockets.
   */
  async deliverHeld(lingerMs = 500): Promise<number> {
    const held = [...this.pairs].filter((p) => p.holding);
    const bytes = this.writeHeld(held);
    await new Promise((r) => setTimeout(r, lingerMs));
    for (const p of held) {
      p.upstream.destroy();
      this.pairs.delete(p);
    }
    return bytes;
  }

  /**
   * deliverHeld(), and then `request` on each held connection, whose answer `reply` (the last bytes
   * the server sends on it) proves the server has processed everything delivered before it: a
   * test can then read the server's state without waiting for an arbitrary time. Rejects when a
   * server closes such a connection before answering.
   */
  async deliverHeldThen(request: Buffer, reply: Buffer): Promise<number> {
    const held = [...this.pairs].filter((p) => p.holding);
    const answered = held.map(
      (p) =>
        new Promise<void>((resolve, reject) => {
          let seen = Buffer.alloc(0);
          p.upstream.on('data', (chunk: Buffer) => {
            seen = Buffer.concat([seen, chunk]).subarray(-reply.length);
            if (seen.equals(reply)) resolve();
          });
          p.upstream.on('close', () => reject(new Error('the server closed a held connection')));
        }),
    );
    const bytes = this.writeHeld(held);
    for (const p of held) p.upstream.write(request);
    try {
      await Promise.all(answered);
    } finally {
      for (const p of held) {
        p.upstream.destroy();
        this.pairs.delete(p);
      }
    }
    return bytes;
  }

  /** Writes what `held` connections held on their server-side sockets; returns the bytes. */
  private writeHeld(held: Pair[]): number {
    let bytes = 0;
    for (const p of held) {
      for (const b of p.up.splice(0)) {
        bytes += b.length;
        p.upstream.write(b);
      }
    }
    this.deliveredBytes += bytes;
    return bytes;
  }

  /** Stops listening: new connections are refused by the kernel; open ones stay as they are. */
  closePort(): void {
    // The listening socket is closed at once; the 'close' event would wait for the open ones.
    this.server.close();
  }

  /** Listens again on the same port (after closePort()); rejects if something else took it. */
  async openPort(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host: '127.0.0.1', port: this.port }, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
  }

  async close(): Promise<void> {
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    this.pairs.clear();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
