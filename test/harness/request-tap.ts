// A TCP tap that relays bytes unchanged and notes the (API key, version) of every request a
// client sends: it reads only the request header's first 4 bytes after each frame's size. Each
// connection is counted under the label the tap had when the client connected, so a test can run
// clients one after another through the same tap and tell their requests apart.
import net from 'node:net';

export interface TapAddress {
  host: string;
  port: number;
}

export class RequestTap {
  /** label -> "apiKey:version" -> requests seen. */
  private readonly seen = new Map<string, Map<string, number>>();
  private readonly servers: net.Server[] = [];
  private readonly sockets = new Set<net.Socket>();
  label = 'unlabelled';

  /** Relays connections to `listen` on to `target`; the tap may listen on several addresses. */
  async listen(listen: TapAddress, target: TapAddress): Promise<void> {
    const server = net.createServer((client) => this.relay(client, target));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: listen.host, port: listen.port }, () => resolve());
    });
    this.servers.push(server);
  }

  /** The (API key, version) pairs the connections of `label` sent, as "key:version", sorted. */
  pairs(label: string): string[] {
    return [...(this.seen.get(label)?.keys() ?? [])].sort(
      (a, b) =>
        Number(a.split(':')[0]) - Number(b.split(':')[0]) ||
        Number(a.split(':')[1]) - Number(b.split(':')[1]),
    );
  }

  private relay(client: net.Socket, target: TapAddress): void {
    const counts = this.seen.get(this.label) ?? new Map<string, number>();
    this.seen.set(this.label, counts);
    const upstream = net.connect(target);
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        this.sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    let pending: Buffer = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      // Frames: int32 size, then the request header (int16 api key, int16 api version, ...).
      while (pending.length >= 8) {
        const size = pending.readInt32BE(0);
        const name = `${pending.readInt16BE(4)}:${pending.readInt16BE(6)}`;
        if (pending.length < 4 + size) break;
        counts.set(name, (counts.get(name) ?? 0) + 1);
        pending = pending.subarray(4 + size);
      }
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await Promise.all(this.servers.map((s) => new Promise((resolve) => s.close(resolve))));
  }
}
