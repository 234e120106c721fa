/**
 * ZooKeeper's sync(path), which node-zookeeper-client 1.1.x lacks. A ZooKeeper server answers
 * reads from its own copy: a follower's is behind the leader by the commits it has not applied
 * yet, and a member cut off from the others keeps answering from its copy until its tick-based
 * timeouts run out (syncLimit x tickTime: 2.5 s in the test bed, 10 s in ZooKeeper's sample
 * configuration), while the majority goes on. So a proxy whose session is on such a member
 * answers OffsetFetch with offsets older than commits another proxy has acknowledged
 * (reliability-zookeeper-split.test.ts measured 168 stale partitions, up to 52 offsets behind).
 * A sync goes through the leader and is answered once the server has applied everything the
 * leader had committed when the sync reached it; reads sent after it on the same connection see
 * at least that (a server answers a client's requests in order, and a session never reconnects to
 * a server behind what it has seen). A member cut off from the leader never answers it: the read
 * fails within its deadline (a retriable error) instead of answering from an old copy.
 *
 * The request is handed to the library's connection manager (reaching into it, as
 * zookeeper-session.ts's shutdown() does; pinned: node-zookeeper-client 1.1.x). The library picks
 * a reply's decoder by the request's type and drops the connection on a type it does not know,
 * SYNC among them: so the request's header says CREATE, whose reply has SYNC's shape (the path,
 * one string), and the bytes on the wire say SYNC.
 */
import type { Client } from 'node-zookeeper-client';

const OP_CREATE = 1;
const OP_SYNC = 9;

/** What the connection manager reads of a request (`jute.Request`'s shape). */
export interface RawRequest {
  header: { xid: number; type: number };
  payload: null;
  toBuffer(): Buffer;
}

/** A sync of `path`: length, xid (set by the connection manager when it sends it), SYNC, path. */
export function syncRequest(path: string): RawRequest {
  const header = { xid: 0, type: OP_CREATE };
  return {
    header,
    payload: null,
    toBuffer() {
      const p = Buffer.from(path, 'utf8');
      const b = Buffer.alloc(16 + p.length);
      b.writeInt32BE(b.length - 4, 0);
      b.writeInt32BE(header.xid, 4);
      b.writeInt32BE(OP_SYNC, 8);
      b.writeInt32BE(p.length, 12);
      p.copy(b, 16);
      return b;
    },
  };
}

interface ConnectionManager {
  queue(request: RawRequest, callback: (err: Error | null) => void): void;
}

/** Sends a sync of `path` on `client`'s connection; `cb` runs once the server has synced. */
export function sync(client: Client, path: string, cb: (err: Error | null, value: undefined) => void): void {
  const cm = (client as unknown as { connectionManager?: ConnectionManager }).connectionManager;
  if (typeof cm?.queue !== 'function') {
    cb(new Error('node-zookeeper-client has no connection manager to send a sync through'), undefined);
    return;
  }
  cm.queue(syncRequest(path), (err) => cb(err, undefined));
}
