// A TCP tap that relays bytes unchanged and notes the (API key, version) of every request a
// client sends: it reads only the request header's first 8 bytes after each frame's size. Each
// connection is counted under the label the tap had when the client connected, so a test can run
// clients one after another through the same tap and tell their requests apart. Answers of the
// APIs a test names (`decodeAnswers`) are decoded too and handed to `onAnswer`, matched to their
// request by correlation id (`onRequest` sees those requests as they pass): what the client asked
// and was told, in the order it was told.
import net from 'node:net';
import { decodeRequestHeader, decodeResponseHeader } from '../../protocol/headers.js';
import { getApiCodec, requestHeaderVersion, responseHeaderVersion } from '../../protocol/messages/index.js';
import { Reader } from '../../protocol/reader.js';

export interface TapAddress {
  host: string;
  port: number;
}

/** A decoded request: the connection's label, its API key and version, and its body. */
export interface TappedRequest {
  label: string;
  apiKey: number;
  apiVersion: number;
  body: unknown;
}

/** A decoded answer, with the request it answers. */
export interface TappedAnswer extends TappedRequest {
  request: unknown;
}

/** Splits a byte stream into Kafka frames (int32 size, then the frame), calling `frame` for each. */
function framer(frame: (f: Buffer) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const size = pending.readInt32BE(0);
      if (pending.length < 4 + size) break;
      frame(pending.subarray(4, 4 + size));
      pending = pending.subarray(4 + size);
    }
  };
}

export class RequestTap {
  /** API keys whose answers are decoded and given to `onAnswer`. */
  decodeAnswers: ReadonlySet<number> = new Set();
  onAnswer: (answer: TappedAnswer) => void = () => undefined;
  onRequest: (request: TappedRequest) => void = () => undefined;
  /** A decoded request whose connection closed before its answer came (the client never saw one). */
  onUnanswered: (request: TappedRequest) => void = () => undefined;
  /** Requests or answers that could not be decoded (a test should expect none). */
  undecoded = 0;

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
    const label = this.label;
    const counts = this.seen.get(label) ?? new Map<string, number>();
    this.seen.set(label, counts);
    /** Correlation id -> (api key, version) of the requests whose answers are decoded. */
    const asked = new Map<number, { apiKey: number; apiVersion: number; request: unknown }>();
    const upstream = net.connect(target);
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        this.sockets.delete(s);
        client.destroy();
        upstream.destroy();
        const lost = [...asked.values()];
        asked.clear();
        for (const r of lost)
          this.onUnanswered({ label, apiKey: r.apiKey, apiVersion: r.apiVersion, body: r.request });
      });
    }
    // Frames: int32 size, then the request header (int16 api key, int16 api version, int32
    // correlation id, ...) or the response header (int32 correlation id, ...).
    const requests = framer((f) => {
      if (f.length < 8) return;
      const apiKey = f.readInt16BE(0);
      const apiVersion = f.readInt16BE(2);
      const name = `${apiKey}:${apiVersion}`;
      counts.set(name, (counts.get(name) ?? 0) + 1);
      if (!this.decodeAnswers.has(apiKey)) return;
      try {
        const r = new Reader(f);
        decodeRequestHeader(r, requestHeaderVersion(apiKey, apiVersion));
        const request = getApiCodec(apiKey)!.decodeRequest(r, apiVersion);
        asked.set(f.readInt32BE(4), { apiKey, apiVersion, request });
        this.onRequest({ label, apiKey, apiVersion, body: request });
      } catch {
        this.undecoded++;
      }
    });
    const answers = framer((f) => {
      if (asked.size === 0 || f.length < 4) return;
      const request = asked.get(f.readInt32BE(0));
      if (request === undefined) return;
      asked.delete(f.readInt32BE(0));
      try {
        const r = new Reader(f);
        decodeResponseHeader(r, responseHeaderVersion(request.apiKey, request.apiVersion));
        const body = getApiCodec(request.apiKey)!.decodeResponse(r, request.apiVersion);
        this.onAnswer({ label, ...request, body });
      } catch {
        this.undecoded++;
      }
    });
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      requests(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      client.write(chunk);
      answers(chunk);
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await Promise.all(this.servers.map((s) => new Promise((resolve) => s.close(resolve))));
  }
}
