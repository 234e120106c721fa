/**
 * What the parts of one client connection (connection.ts) share: what each asks of the connection
 * that holds them, and the one question each answers for the move to the native path.
 *
 * A part owns one job (reading requests, writing to the broker, answering, flow control, ...) and
 * is itself the target of the callbacks of that job (a reader's sink, a socket's reads). What one
 * part must set off in others (re-evaluating flow after anything changed, trying the native path
 * after a read) goes through the connection, so parts need not know each other's order of birth.
 */
import type { RequestInfo } from './extension.js';
import type { CloseReason } from './close-reason.js';

/** The request header fields a part hands on. */
export interface RequestKey {
  readonly correlationId: number;
  readonly apiKey: number;
  readonly apiVersion: number;
}

/** What a part asks of its connection. */
export interface ConnectionHost {
  /** The pair is closed: a part does nothing more. */
  readonly closed: boolean;
  close(reason: CloseReason, detail?: unknown): void;
  /**
   * Something held changed (bytes for the client, requests awaiting the broker): re-evaluates
   * which side is read and starts the local answers that may start.
   */
  updateFlow(): void;
  /** A read or an answer is wholly done: the pair may move to the native path. */
  maybeNative(): void;
  /** A read of the client or a write to it: the connection is not idle. */
  active(): void;
  /** What the extension is told of a request it answers or observes. */
  requestInfo(h: RequestKey): RequestInfo;
}

/**
 * A part with nothing half done: nothing of its job in flight that the native path would not
 * know of. The pair moves to the native path only when every part is quiescent.
 */
export interface Quiescent {
  readonly quiescent: boolean;
}

/** A frame's 4-byte size prefix. */
export function sizePrefix(length: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeInt32BE(length, 0);
  return b;
}

/** A frame (its payload) as the buffers to write: the size prefix, then the frame. */
export function withSize(frame: Buffer): Buffer[] {
  return [sizePrefix(frame.length), frame];
}
