// Expiring another process's ZooKeeper session. The classic way (Curator's KillSession) opens a
// second connection with the session's id and password and closes the session from there; the
// server then answers the owner's next reconnect with "expired". The id and password live in the
// proxy process, so the proxy reaches ZooKeeper through this relay, which reads them from the
// handshakes it forwards (ZooKeeper's ConnectRequest / ConnectResponse, jute encoding).
import net from 'node:net';

export interface Handshake {
  /** The session the client asked to resume (0n: a new session). */
  requested: bigint;
  /** The server's answer; timeoutMs 0 means it found the requested session expired. */
  granted?: { session: bigint; timeoutMs: number; password: Buffer };
}

/** The first length-prefixed frame of a stream, once it is complete. */
function firstFrame(onFrame: (frame: Buffer) => void): (chunk: Buffer) => void {
  let buffered = Buffer.alloc(0);
  let done = false;
  return (chunk) => {
    if (done) return;
    buffered = Buffer.concat([buffered, chunk]);
    if (buffered.length < 4 || buffered.length < 4 + buffered.readInt32BE(0)) return;
    done = true;
    onFrame(buffered.subarray(4, 4 + buffered.readInt32BE(0)));
  };
}

// ConnectRequest: protocolVersion int, lastZxidSeen long, timeOut int, sessionId long, passwd buffer.
const requestedSession = (frame: Buffer) => frame.readBigInt64BE(16);
// ConnectResponse: protocolVersion int, timeOut int, sessionId long, passwd buffer (int length + bytes).
function connectResponse(frame: Buffer) {
  return {
    timeoutMs: frame.readInt32BE(4),
    session: frame.readBigInt64BE(8),
    password: Buffer.from(frame.subarray(20, 20 + frame.readInt32BE(16))),
  };
}

export class ZooKeeperRelay {
  readonly handshakes: Handshake[] = [];
  private readonly sockets = new Set<net.Socket>();
  private severed = false;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<ZooKeeperRelay> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
    const relay = new ZooKeeperRelay(server, (server.address() as net.AddressInfo).port);
    server.on('connection', (client) => relay.relay(client, target));
    return relay;
  }

  /** zk://127.0.0.1:<relay port> */
  get url(): string {
    return `zk://127.0.0.1:${this.port}`;
  }

  private relay(client: net.Socket, target: { host: string; port: number }): void {
    if (this.severed) {
      client.destroy();
      return;
    }
    const upstream = net.connect(target);
    const handshake: Handshake = { requested: -1n };
    this.handshakes.push(handshake);
    const pair = [client, upstream];
    for (const s of pair) {
      this.sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        this.sockets.delete(s);
        for (const other of pair) other.destroy();
      });
    }
    client.on(
      'data',
      firstFrame((f) => (handshake.requested = requestedSession(f))),
    );
    upstream.on(
      'data',
      firstFrame((f) => (handshake.granted = connectResponse(f))),
    );
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Drops every relayed connection and refuses new ones until restore(). */
  sever(): void {
    this.severed = true;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.severed = false;
  }

  /** The session the server granted last (a new one or a resumed one). */
  lastSession(): { session: bigint; password: Buffer } | undefined {
    return this.handshakes.findLast((h) => h.granted !== undefined && h.granted.timeoutMs > 0)?.granted;
  }

  /** Resumes of an existing session that the server answered with "expired". */
  expiredAnswers(): Handshake[] {
    return this.handshakes.filter((h) => h.requested > 0n && h.granted?.timeoutMs === 0);
  }

  async close(): Promise<void> {
    this.sever();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function frame(body: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeInt32BE(body.length);
  return Buffer.concat([length, body]);
}

/**
 * Closes `session` from a second connection that presents its id and password (the server drops
 * the owner's connection when this one resumes the session, then ends the session on closeSession).
 */
export async function closeSession(
  target: { host: string; port: number },
  session: bigint,
  password: Buffer,
  timeoutMs = 5000,
): Promise<void> {
  const socket = net.connect(target);
  const frames: Buffer[] = [];
  let buffered = Buffer.alloc(0);
  let wake: () => void = () => undefined;
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 4 && buffered.length >= 4 + buffered.readInt32BE(0)) {
      frames.push(buffered.subarray(4, 4 + buffered.readInt32BE(0)));
      buffered = buffered.subarray(4 + buffered.readInt32BE(0));
    }
    wake();
  });
  let failure: Error | undefined;
  socket.on('error', (e) => (failure = e));
  socket.on('close', () => wake());
  const next = async (what: string): Promise<Buffer> => {
    const deadline = Date.now() + timeoutMs;
    while (frames.length === 0) {
      if (failure || socket.destroyed || Date.now() > deadline)
        throw new Error(`closeSession: no ${what} from ZooKeeper${failure ? `: ${failure.message}` : ''}`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 50);
      });
    }
    return frames.shift()!;
  };
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const connect = Buffer.alloc(4 + 8 + 4 + 8 + 4 + password.length + 1);
    connect.writeInt32BE(0, 0); // protocol version
    connect.writeBigInt64BE(0n, 4); // last zxid seen
    connect.writeInt32BE(timeoutMs, 12);
    connect.writeBigInt64BE(session, 16);
    connect.writeInt32BE(password.length, 24);
    password.copy(connect, 28);
    // readOnly = false (the last byte)
    socket.write(frame(connect));
    const answer = connectResponse(await next('ConnectResponse'));
    if (answer.timeoutMs === 0 || answer.session !== session)
      throw new Error(`closeSession: ZooKeeper did not resume session 0x${session.toString(16)}`);
    const close = Buffer.alloc(8);
    close.writeInt32BE(1, 0); // xid
    close.writeInt32BE(-11, 4); // OpCode.closeSession
    socket.write(frame(close));
    const reply = await next('closeSession reply'); // xid int, zxid long, err int
    if (reply.readInt32BE(12) !== 0) throw new Error(`closeSession: error ${reply.readInt32BE(12)}`);
  } finally {
    socket.destroy();
  }
}
