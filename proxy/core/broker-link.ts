/**
 * The broker side of one client connection, opened when the client first needs the broker.
 *
 * A client connection that has sent nothing, or only part of a request, costs the broker nothing:
 * idle and slowloris connections hold no broker connection (each held one, with its descriptor and
 * a slot of the broker's connection limits, when the proxy opened it at accept). The first request
 * the broker must see (ApiVersions for most clients, or an authorization probe) opens it. Frames
 * written before the connection is up are queued and `write` returns false, as a full socket
 * would, so the caller stops reading its client until `drain`: the queue holds at most the frames
 * of one client read.
 */
import type { Socket } from 'node:net';
import type { BrokerLoss } from './close-reason.js';
import { readSocket } from './reused-reads.js';
import type { ChunkReader } from './reused-reads.js';
import { SocketWriter } from './socket-writer.js';

/**
 * What the link tells its client connection: methods of one object, for the reason in
 * reused-reads.ts. The broker's reads go to a reader of their own (the connection's response
 * path), given to the link as it is made.
 */
export interface BrokerLinkEvents {
  /** Writes may go on (after `write` returned false). */
  brokerDrained(): void;
  /** The connection is open (counted as a broker connection from now until `destroy`). */
  brokerOpened(): void;
  /** The connection could not be opened, failed or was closed by the broker. */
  brokerLost(reason: BrokerLoss, err?: unknown): void;
}

/**
 * The queue once the connection is open or destroyed, when nothing is queued any more: one array
 * for every link rather than an empty one each for as long as it lives. Frozen: a push is a bug.
 */
const NOTHING_QUEUED: Buffer[] = Object.freeze([]) as unknown as Buffer[];

export class BrokerLink {
  private socket: Socket | null = null;
  private writer: SocketWriter | null = null;
  private opening = false;
  private queued: Buffer[] = [];
  private paused = false;
  private destroyed = false;
  /** The writer `cork` held, until `uncork`. */
  private corked: SocketWriter | null = null;

  /**
   * `reads`: each read of the broker connection, `buffer[0, end)`, valid only during the call (the
   * read buffer may be used again); it answers true when some of them are still referenced
   * afterwards (queued in a socket write).
   */
  constructor(
    private readonly open: () => Promise<Socket>,
    private readonly events: BrokerLinkEvents,
    private readonly reads: ChunkReader,
  ) {}

  /**
   * Bytes handed to `write` that are not all in the kernel yet: queued until the connection is
   * open, or waiting in the socket. Views written meanwhile must stay as they are.
   */
  get holdsWrites(): boolean {
    return this.queued.length > 0 || (this.writer !== null && this.writer.unsent > 0);
  }

  /** The socket once the connection is open (for the native path: native-relay.ts), else null. */
  get openSocket(): Socket | null {
    return this.socket;
  }

  /** The connection is open now (not merely being opened). */
  get isOpen(): boolean {
    return this.socket !== null;
  }

  /**
   * Sends `buf`, opening the connection first if needed. False: the caller should stop producing
   * until `drain`.
   */
  write(buf: Buffer): boolean {
    const writer = this.writer;
    if (writer !== null) return writer.write(buf);
    if (this.destroyed) return false;
    this.queued.push(buf);
    if (!this.opening) this.start();
    return false;
  }

  /**
   * Holds what `write` is given until `uncork`, so that the frames of one client read go to the
   * broker in one system call (nothing to hold while the connection is not open: writes queue).
   */
  cork(): void {
    if (this.corked !== null) return;
    this.corked = this.writer;
    this.corked?.hold();
  }

  /** Writes what `cork` held. False: the caller should stop producing until `drain`. */
  uncork(): boolean {
    const corked = this.corked;
    this.corked = null;
    // Nothing held: a write queued before the connection was open has answered false already.
    return corked === null || corked.release();
  }

  pause(): void {
    this.paused = true;
    this.socket?.pause();
  }

  resume(): void {
    this.paused = false;
    this.socket?.resume();
  }

  destroy(): void {
    this.destroyed = true;
    this.queued = NOTHING_QUEUED;
    this.socket?.destroy();
  }

  private start(): void {
    this.opening = true;
    this.open().then(
      (socket) => {
        this.opening = false;
        if (this.destroyed) {
          socket.destroy();
          return;
        }
        this.attach(socket);
      },
      (err: unknown) => {
        this.opening = false;
        if (!this.destroyed) this.events.brokerLost('no broker connection', err);
      },
    );
  }

  private attach(socket: Socket): void {
    this.socket = socket;
    const writer = new SocketWriter(socket, () => this.events.brokerDrained());
    this.writer = writer;
    socket.setNoDelay(true);
    readSocket(socket, this.reads);
    socket.on('error', (err) => this.events.brokerLost('broker error', err));
    socket.on('close', () => this.events.brokerLost('broker closed'));
    socket.on('end', () => this.events.brokerLost('broker ended'));
    if (this.paused) socket.pause();
    this.events.brokerOpened();
    const queued = this.queued;
    this.queued = NOTHING_QUEUED;
    // A full socket calls `drain` itself later; otherwise the caller may write on now.
    writer.hold();
    for (const b of queued) writer.write(b);
    if (writer.release()) this.events.brokerDrained();
  }
}
