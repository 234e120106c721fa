/**
 * The ZooKeeper store's connection: one node-zookeeper-client at a time (replaced after a session
 * expiry, a library fault or a stalled connection), requests through a window, writes that go out
 * now or not at all, and operations retried until their deadline.
 */
import type { Socket } from 'node:net';
import { createClient, Exception, State } from 'node-zookeeper-client';
import type { Client } from 'node-zookeeper-client';
import { StoreUnavailableError, withDeadline } from './errors.js';
import { RequestWindow } from './request-window.js';
import type { Read } from './zookeeper-znodes.js';

/** The ZooKeeper error code of a library exception, or undefined for anything else. */
export const code = (err: unknown): number | undefined =>
  err instanceof Exception ||
  (typeof err === 'object' && err !== null && typeof (err as Exception).getCode === 'function')
    ? (err as Exception).getCode()
    : undefined;

/** Turns a node-style callback API into a promise. */
function call<T>(fn: (cb: (err: Exception | Error | null, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));
}

/** An attempt that must start over from fresh reads (within the operation's deadline). */
export class Retry extends Error {}

/** A node-style callback request of the library. */
export type Request<T> = (cb: (err: Exception | Error | null, value: T) => void) => void;

/** Requests outstanding per client at most (see request-window.ts for why there is a limit). */
const WINDOW = 256;

interface ConnectionManagerInternals {
  socket?: Socket;
  connect(): void;
  /** Requests not yet written to the socket (sent on the next connection if this one ends). */
  packetQueue?: { queue?: unknown[] };
}

const internals = (client: Client): ConnectionManagerInternals | undefined =>
  (client as unknown as { connectionManager?: ConnectionManagerInternals }).connectionManager;

/** Whether the library holds requests of `client` it has not written to the socket yet. */
function queued(client: Client): boolean {
  return (internals(client)?.packetQueue?.queue?.length ?? 0) > 0;
}

/**
 * Ends a client for good. `close()` only ends a connected session: on a client that is still
 * connecting it writes to a socket that does not exist yet (a TypeError inside the library), and
 * the client keeps reconnecting. So we also stop its reconnect loop and destroy its socket,
 * reaching into the library's connection manager (pinned: node-zookeeper-client 1.1.x).
 */
function shutdown(client: Client): void {
  const cm = internals(client);
  const connected = client.getState() === State.SYNC_CONNECTED;
  try {
    client.close();
  } catch {
    // see above
  }
  if (connected || cm === undefined) return;
  cm.connect = () => undefined;
  const kill = () => cm.socket?.destroy();
  kill();
  // A server lookup already scheduled (spinDelay) may still open one socket.
  for (const ms of [300, 1000]) setTimeout(kill, ms).unref();
}

export interface ZooKeeperSessionOptions {
  connectString: string;
  /** `user:password` of ZooKeeper's digest scheme. */
  digest: string | undefined;
  sessionTimeoutMs: number;
  /** The deadline of one operation (`run`). */
  timeoutMs: number;
  /** A directory made as soon as a client has connected (what layout readers watch). */
  dirOnConnect: string;
}

export class ZooKeeperSession {
  private client: Client;
  /** Each client's request window (a replaced client's slots go with it). */
  private readonly windows = new WeakMap<Client, RequestWindow>();
  /** Parent znodes known to exist (forgotten when a write says otherwise). */
  private readonly knownDirs = new Set<string>();
  private readonly reconnectListeners: (() => void)[] = [];
  private stalls = 0;
  private closed = false;

  constructor(private readonly opts: ZooKeeperSessionOptions) {
    this.client = this.newClient();
  }

  /** The current client when it is connected, else null. */
  get connectedClient(): Client | null {
    return !this.closed && this.client.getState() === State.SYNC_CONNECTED ? this.client : null;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private newClient(): Client {
    const client = createClient(this.opts.connectString, {
      sessionTimeout: this.opts.sessionTimeoutMs,
      spinDelay: 200,
      retries: 0,
    });
    this.windows.set(client, new RequestWindow(WINDOW));
    // Every operation waiting for the connection listens for one state change (connected()).
    client.setMaxListeners(0);
    client.once(
      'connected',
      () => void this.ensureDir(client, this.opts.dirOnConnect).catch(() => undefined),
    );
    client.on('state', (state: State) => {
      if (state === State.SYNC_CONNECTED && this.client === client)
        for (const listener of this.reconnectListeners) listener();
      // Session expiry is final for a client object: replace it. Nothing is lost: an operation
      // in flight fails, reads back its marker and retries on the new client.
      if (state === State.EXPIRED && this.client === client && !this.closed) {
        shutdown(client);
        this.client = this.newClient();
      }
    });
    if (this.opts.digest !== undefined) client.addAuthInfo('digest', Buffer.from(this.opts.digest));
    client.connect();
    return client;
  }

  /** Starts over with a new client; operations in flight fail and retry on it. */
  replaceClient(): void {
    const old = this.client;
    this.client = this.newClient();
    shutdown(old);
  }

  onReconnect(listener: () => void): void {
    this.reconnectListeners.push(listener);
  }

  /**
   * The current client once connected. Requests are only issued then: the library would queue them
   * without a timeout. Waits no longer than the operation's deadline.
   */
  async connected(expired: () => boolean): Promise<Client> {
    for (;;) {
      if (this.closed) throw new StoreUnavailableError('zookeeper store: closed');
      const client = this.client;
      if (client.getState() === State.SYNC_CONNECTED) return client;
      if (expired()) throw new StoreUnavailableError('zookeeper store: not connected', { timedOut: true });
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          client.removeListener('state', done);
          resolve();
        };
        const timer = setTimeout(done, 100);
        client.once('state', done);
      });
    }
  }

  /** One request of `client`, through its window. */
  call<T>(client: Client, fn: Request<T>): Promise<T> {
    return this.windows.get(client)!.run(() => call(fn));
  }

  /**
   * A write of `client`, through its window, that goes out now or not at all: at the moment the
   * window admits it, the deadline must not have passed (its caller has been answered by then)
   * and the client must be connected with nothing queued before it. The library keeps requests
   * queued while disconnected, or behind a full socket, and sends them on the next connection,
   * however much later; a write that would wait there is not sent (Retry: the attempt starts over
   * from fresh reads, within the deadline). A write already sent may still apply after its
   * caller's deadline (its answer lost); commits are fenced so that it cannot overwrite a later
   * commit (see zookeeper-commit.ts).
   */
  write<T>(client: Client, expired: () => boolean, fn: Request<T>): Promise<T> {
    return this.windows.get(client)!.run(() => {
      if (expired())
        return Promise.reject(
          new StoreUnavailableError('zookeeper store: deadline passed before the write was sent', {
            timedOut: true,
          }),
        );
      if (
        this.closed ||
        client !== this.client ||
        client.getState() !== State.SYNC_CONNECTED ||
        queued(client)
      )
        return Promise.reject(new Retry());
      return call(fn);
    });
  }

  /**
   * Runs `op` until it succeeds or the deadline passes; `op` is told when the deadline has passed,
   * and no new attempt starts after it (the caller has its answer by then).
   */
  run<T>(what: string, op: (expired: () => boolean) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreUnavailableError(`zookeeper store: ${what}: closed`));
    const timeoutMs = this.opts.timeoutMs;
    const deadline = performance.now() + timeoutMs;
    const expired = () => performance.now() >= deadline;
    const result = withDeadline(`zookeeper store: ${what}`, timeoutMs, async () => {
      for (;;) {
        if (expired())
          throw new StoreUnavailableError(`zookeeper store: ${what}: no answer within ${timeoutMs} ms`, {
            timedOut: true,
          });
        try {
          return await op(expired);
        } catch (err) {
          if (expired() || this.closed) throw err;
          const c = code(err);
          if (err instanceof Retry || c === Exception.CONNECTION_LOSS || c === Exception.SESSION_EXPIRED) {
            await new Promise((r) => setTimeout(r, 20));
            continue;
          }
          throw err;
        }
      }
    });
    result.then(
      () => (this.stalls = 0),
      (err: unknown) => {
        // A connection that says "connected" but answers nothing (seen after a server restart
        // under load): after two timed-out operations in a row, start over with a new client.
        if (err instanceof StoreUnavailableError && err.timedOut && ++this.stalls >= 2 && !this.closed) {
          this.stalls = 0;
          this.replaceClient();
        }
      },
    );
    return result;
  }

  /** The znode at `path`, or null when there is none. */
  async read(client: Client, path: string): Promise<Read | null> {
    try {
      return await this.call<Read>(client, (cb) =>
        client.getData(path, (err, data, stat) => cb(err, { data, stat })),
      );
    } catch (err) {
      if (code(err) === Exception.NO_NODE) return null;
      throw err;
    }
  }

  /** The children of `path`, none when it does not exist. */
  async children(client: Client, path: string): Promise<string[]> {
    try {
      return await this.call<string[]>(client, (cb) => client.getChildren(path, cb));
    } catch (err) {
      if (code(err) === Exception.NO_NODE) return [];
      throw err;
    }
  }

  async ensureDir(client: Client, path: string): Promise<void> {
    if (this.knownDirs.has(path)) return;
    await this.call<string>(client, (cb) => client.mkdirp(path, cb));
    this.knownDirs.add(path);
  }

  /** After a write found parents gone (NO_NODE) or a group removed: make them again when needed. */
  forgetDirs(): void {
    this.knownDirs.clear();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    shutdown(this.client);
  }
}
