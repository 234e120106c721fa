// One raw client connection of a load run and the generator state its connections share: it
// sends OffsetCommit, OffsetFetch and Metadata requests open-loop and checks every answer.
import net from 'node:net';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeResponseFrame, encodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { metadataRequest } from '../harness/raw-client.js';
import { commitBody } from './commit-checker.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import type { LoadRunOptions, LostCommit, Totals } from './load-run-types.js';

const COMMIT = 0;
const FETCH = 1;
const METADATA = 2;
const KIND_NAMES = ['commit', 'fetch', 'metadata'];
const COMMIT_VERSION = 8;
const FETCH_VERSION = 8;
const METADATA_VERSION = 12;
/** Eight bytes no encoded header or name contains: where the codec put each committedOffset. */
const SENTINEL = 0x7e3c5a9f1d2b4c6en;
export const MB = 1024 * 1024;

/** Requests in flight on one connection, oldest first (answers come in request order). */
class InFlight {
  size = 0;
  private head = 0;
  private kind = new Uint8Array(16);
  private group = new Uint16Array(16);
  private corr = new Int32Array(16);
  private at = new Float64Array(16);
  /** Commit: its k. Fetch: the lowest k acknowledged for the group when it was sent. */
  private a = new Float64Array(16);
  /** Fetch: the group's last k sent before it. */
  private b = new Float64Array(16);

  push(kind: number, group: number, corr: number, at: number, a: number, b: number): void {
    if (this.size === this.kind.length) this.grow();
    const i = (this.head + this.size) & (this.kind.length - 1);
    this.kind[i] = kind;
    this.group[i] = group;
    this.corr[i] = corr;
    this.at[i] = at;
    this.a[i] = a;
    this.b[i] = b;
    this.size++;
  }

  /** The oldest entry's fields, valid until the next shift. */
  peek(): { kind: number; group: number; corr: number; at: number; a: number; b: number } {
    const i = this.head;
    return {
      kind: this.kind[i]!,
      group: this.group[i]!,
      corr: this.corr[i]!,
      at: this.at[i]!,
      a: this.a[i]!,
      b: this.b[i]!,
    };
  }

  oldestAt(): number {
    return this.size === 0 ? Infinity : this.at[this.head]!;
  }

  shift(): void {
    this.head = (this.head + 1) & (this.kind.length - 1);
    this.size--;
  }

  private grow(): void {
    const cap = this.kind.length * 2;
    const order = Array.from({ length: this.size }, (_, j) => (this.head + j) & (this.kind.length - 1));
    const regrow = <T extends Uint8Array | Uint16Array | Int32Array | Float64Array>(
      old: T,
      make: (n: number) => T,
    ) => {
      const next = make(cap);
      order.forEach((from, to) => (next[to] = old[from]!));
      return next;
    };
    this.kind = regrow(this.kind, (n) => new Uint8Array(n));
    this.group = regrow(this.group, (n) => new Uint16Array(n));
    this.corr = regrow(this.corr, (n) => new Int32Array(n));
    this.at = regrow(this.at, (n) => new Float64Array(n));
    this.a = regrow(this.a, (n) => new Float64Array(n));
    this.b = regrow(this.b, (n) => new Float64Array(n));
    this.head = 0;
  }
}

export interface Shared {
  opts: LoadRunOptions;
  topic: string;
  host: string;
  port: number;
  /** The answer to every fully acknowledged commit, after its correlation id. */
  okCommitTail: Buffer;
  running: boolean;
  totals: Totals;
  interval: { sent: number; answered: number; failed: number; partitions: number; latencies: number[] };
  allLatencies: number[];
}

export function fail(s: Shared, cause: string, n = 1): void {
  if (n <= 0) return;
  s.totals.failed += n;
  s.interval.failed += n;
  s.totals.failures[cause] = (s.totals.failures[cause] ?? 0) + n;
}

/** Why a stored or fetched value is wrong for a partition, or null when it is right. */
function offsetProblem(
  value: number | null,
  p: number,
  ackedK: number,
  sentK: number,
  P: number,
): string | null {
  if (value === null || value < 0) return ackedK > 0 ? 'acknowledged commit missing' : null;
  if ((value - p) % P !== 0) return 'a value this run never sent to this partition';
  const k = (value - p) / P;
  if (k < ackedK) return 'below the highest acknowledged commit';
  if (k > sentK) return 'above the highest commit sent';
  return null;
}

export class LoadConnection {
  private socket: net.Socket | null = null;
  private splitter = new FrameSplitter({ maxFrameSize: 16 * MB });
  private readonly inflight = new InFlight();
  private correlation = 1;
  private round = 0;
  private readonly commitFrames: Buffer[] = [];
  /** Per group, where partition p's committedOffset sits in its frame. */
  private readonly offsetAt: number[][] = [];
  private readonly fetchFrames: Buffer[] = [];
  private readonly metadataFrame: Buffer;
  /** Per group: the last k sent. Per group × partition: the highest k acknowledged (0 = none). */
  readonly sentK: Float64Array;
  readonly ackedK: Float64Array;

  constructor(
    private readonly s: Shared,
    /** The connection's number: staggers its OffsetFetch requests against the other connections'. */
    private readonly index: number,
    readonly groups: string[],
  ) {
    const P = s.opts.partitionsPerCommit;
    this.sentK = new Float64Array(groups.length);
    this.ackedK = new Float64Array(groups.length * P);
    for (const group of groups) {
      const frame = encodeRequestFrame(
        { apiKey: ApiKey.OffsetCommit, apiVersion: COMMIT_VERSION, correlationId: 0, clientId: 'load-run' },
        commitBody(group, s.topic, P, SENTINEL) as never,
      );
      const marker = Buffer.alloc(8);
      marker.writeBigInt64BE(SENTINEL);
      const at: number[] = [];
      for (let i = frame.indexOf(marker); i >= 0; i = frame.indexOf(marker, i + 8)) at.push(i);
      if (at.length !== P) throw new Error(`found ${at.length} offsets in the commit frame, expected ${P}`);
      this.commitFrames.push(frame);
      this.offsetAt.push(at);
      this.fetchFrames.push(
        encodeRequestFrame(
          { apiKey: ApiKey.OffsetFetch, apiVersion: FETCH_VERSION, correlationId: 0, clientId: 'load-run' },
          {
            ...defaultOffsetFetchRequest(),
            groups: [
              {
                groupId: group,
                memberId: null,
                memberEpoch: -1,
                topics: [
                  {
                    name: s.topic,
                    topicId: ZERO_UUID,
                    partitionIndexes: Array.from({ length: P }, (_, p) => p),
                  },
                ],
              },
            ],
          },
        ),
      );
    }
    this.metadataFrame = metadataRequest(METADATA_VERSION, 0);
  }

  get inFlight(): number {
    return this.inflight.size;
  }

  connect(): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: this.s.host, port: this.s.port });
      socket.setNoDelay(true);
      socket.once('connect', () => {
        socket.removeListener('error', reject);
        if (!this.s.running) {
          socket.destroy(); // a reconnect that completed after the end of the run
          resolve();
          return;
        }
        socket.on('error', () => undefined); // 'close' follows
        this.socket = socket;
        this.splitter = new FrameSplitter({ maxFrameSize: 16 * MB });
        resolve();
      });
      socket.once('error', reject);
      socket.on('data', (chunk: Buffer) => this.onData(socket, chunk));
      socket.once('close', () => this.onClose(socket));
    });
  }

  close(): void {
    const socket = this.socket;
    this.socket = null;
    socket?.destroy();
  }

  /** The next commit of this connection (to its groups in turn), plus an OffsetFetch when due. */
  commit(now: number): void {
    const g = this.round++ % this.groups.length;
    if (this.socket === null) {
      fail(this.s, 'not sent: connection down');
      return;
    }
    const k = ++this.sentK[g]!;
    const P = this.s.opts.partitionsPerCommit;
    let frame = this.commitFrames[g]!;
    if (this.socket.writableLength > 0) {
      // Bytes of an earlier write may still be this buffer: never change a queued buffer.
      frame = Buffer.from(frame);
      this.s.totals.frameCopies++;
    }
    const at = this.offsetAt[g]!;
    for (let p = 0; p < P; p++) {
      const v = k * P + p;
      frame.writeUInt32BE(Math.floor(v / 0x1_0000_0000), at[p]!);
      frame.writeUInt32BE(v >>> 0, at[p]! + 4);
    }
    this.send(frame, COMMIT, g, now, k, 0);
    const every = this.s.opts.fetchEvery;
    // Staggered by connection, so the connections do not all send their first OffsetFetch in the
    // same second (the proxy's authorizer asks the broker about each connection's first one).
    if (every > 0 && (this.round + this.index) % every === 0) {
      // The group that was committed longest ago (the same group, pipelined, with one group).
      const fg = this.round % this.groups.length;
      let lowest = Infinity;
      for (let p = 0; p < P; p++) lowest = Math.min(lowest, this.ackedK[fg * P + p]!);
      this.send(this.fetchFrames[fg]!, FETCH, fg, now, lowest, this.sentK[fg]!);
    }
  }

  metadata(now: number): void {
    if (this.socket === null) {
      fail(this.s, 'not sent: connection down');
      return;
    }
    this.send(this.metadataFrame, METADATA, 0, now, 0, 0);
  }

  private send(frame: Buffer, kind: number, g: number, now: number, a: number, b: number): void {
    const socket = this.socket!;
    const corr = this.correlation;
    this.correlation = corr === 0x7fff_ffff ? 1 : corr + 1;
    if (kind !== COMMIT && socket.writableLength > 0) {
      frame = Buffer.from(frame);
      this.s.totals.frameCopies++;
    }
    frame.writeInt32BE(corr, 8); // size (4), api key (2), api version (2), correlation id
    this.inflight.push(kind, g, corr, now, a, b);
    this.s.totals.sent++;
    this.s.interval.sent++;
    socket.write(frame);
  }

  /** Fails the requests in flight when the oldest is older than the deadline; true if it did. */
  expire(now: number): boolean {
    if (now - this.inflight.oldestAt() <= this.s.opts.requestTimeoutMs) return false;
    fail(this.s, 'timeout', this.inflight.size);
    this.drop();
    return true;
  }

  private drop(): void {
    while (this.inflight.size > 0) this.inflight.shift();
    this.close();
    if (this.s.running) {
      this.s.totals.connectionsReopened++;
      // Until it connects: a proxy restarted by a chaos run is away for seconds.
      const retry = (): void => {
        if (this.s.running && this.socket === null) this.connect().catch(() => setTimeout(retry, 500));
      };
      setTimeout(retry, 200);
    }
  }

  private onClose(socket: net.Socket): void {
    if (socket !== this.socket) return; // closed by us (drop or end of run)
    fail(this.s, 'connection closed by the proxy', Math.max(1, this.inflight.size));
    this.drop();
  }

  private onData(socket: net.Socket, chunk: Buffer): void {
    if (socket !== this.socket) return;
    let frames: Buffer[];
    try {
      frames = this.splitter.push(chunk);
    } catch {
      fail(this.s, 'bad framing', Math.max(1, this.inflight.size));
      this.drop();
      return;
    }
    const now = performance.now();
    for (const frame of frames) {
      if (this.inflight.size === 0 || frame.readInt32BE(0) !== this.inflight.peek().corr) {
        fail(this.s, 'answer out of order', Math.max(1, this.inflight.size));
        this.drop();
        return;
      }
      const r = this.inflight.peek();
      this.inflight.shift();
      const ms = now - r.at;
      this.s.interval.latencies.push(ms);
      this.s.allLatencies.push(ms);
      this.s.totals.answered++;
      this.s.interval.answered++;
      try {
        if (r.kind === COMMIT) this.onCommitAnswer(frame, r.group, r.a);
        else if (r.kind === FETCH) this.onFetchAnswer(frame, r.group, r.a, r.b);
        else this.onMetadataAnswer(frame);
      } catch (err) {
        fail(this.s, `undecodable ${KIND_NAMES[r.kind]} answer: ${(err as Error).message}`);
      }
    }
  }

  private onCommitAnswer(frame: Buffer, g: number, k: number): void {
    const P = this.s.opts.partitionsPerCommit;
    let codes: number[] | null = null;
    if (this.s.okCommitTail.compare(frame, 4) !== 0) {
      this.s.totals.slowAnswers++;
      const { body } = decodeResponseFrame(frame, ApiKey.OffsetCommit, COMMIT_VERSION);
      codes = body.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
    }
    let ok = 0;
    for (let p = 0; p < P; p++) {
      const code = codes === null ? 0 : (codes[p] ?? -1);
      if (code === 0) {
        ok++;
        if (k > this.ackedK[g * P + p]!) this.ackedK[g * P + p] = k;
      } else {
        this.s.totals.errorCodes[code] = (this.s.totals.errorCodes[code] ?? 0) + 1;
      }
    }
    this.s.totals.partitionCommitsAcked += ok;
    this.s.interval.partitions += ok;
    if (ok === P) this.s.totals.commitsAcked++;
    else fail(this.s, 'error code');
  }

  private onFetchAnswer(frame: Buffer, g: number, lowestAcked: number, lastSent: number): void {
    this.s.totals.fetches++;
    const P = this.s.opts.partitionsPerCommit;
    const { body } = decodeResponseFrame(frame, ApiKey.OffsetFetch, FETCH_VERSION);
    const group = body.groups[0];
    if (group === undefined || group.errorCode !== 0) {
      fail(this.s, 'error code');
      return;
    }
    const values = new Map<number, number>();
    for (const t of group.topics) {
      for (const p of t.partitions) {
        if (p.errorCode !== 0) {
          fail(this.s, 'error code');
          return;
        }
        values.set(p.partitionIndex, Number(p.committedOffset));
      }
    }
    let stale = false;
    for (let p = 0; p < P; p++) {
      const v = values.get(p) ?? null;
      if (offsetProblem(v, p, lowestAcked, this.sentK[g]!, P) !== null) {
        fail(this.s, 'fetched offset wrong');
        return;
      }
      const earlierAcked = lastSent > 0 && this.ackedK[g * P + p]! >= lastSent;
      if (earlierAcked && (v === null || v < lastSent * P + p)) stale = true;
    }
    if (stale) this.s.totals.staleFetches++;
  }

  private onMetadataAnswer(frame: Buffer): void {
    this.s.totals.metadata++;
    const { body } = decodeResponseFrame(frame, ApiKey.Metadata, METADATA_VERSION);
    // Every broker rewritten to the proxy's port for it (bootstrap port + 1 + node id).
    const rewritten = body.brokers.every(
      (b) => b.host === this.s.host && b.port === this.s.port + 1 + b.nodeId,
    );
    if (body.brokers.length === 0 || !rewritten) fail(this.s, 'bad metadata answer');
  }

  /** Compares the store's offsets of every group of this connection with what was acknowledged. */
  async verify(read: (group: string) => Promise<Map<number, number>>, lost: LostCommit[]): Promise<void> {
    const P = this.s.opts.partitionsPerCommit;
    for (const [g, group] of this.groups.entries()) {
      const stored = await read(group);
      for (let p = 0; p < P; p++) {
        const v = stored.get(p) ?? null;
        const problem = offsetProblem(v, p, this.ackedK[g * P + p]!, this.sentK[g]!, P);
        if (problem !== null) {
          const ackedK = this.ackedK[g * P + p]!;
          lost.push({
            group,
            partition: p,
            acked: ackedK > 0 ? ackedK * P + p : -1,
            stored: v,
            sent: this.sentK[g]! * P + p,
            problem,
          });
        }
      }
    }
  }
}

/** The generator's state shared by its connections to one proxy (host and port set by the caller). */
export function newShared(opts: LoadRunOptions, topic: string): Shared {
  const P = opts.partitionsPerCommit;
  return {
    opts,
    topic,
    host: '',
    port: 0,
    okCommitTail: encodeResponseFrame(ApiKey.OffsetCommit, COMMIT_VERSION, 0, {
      throttleTimeMs: 0,
      topics: [
        {
          name: topic,
          partitions: Array.from({ length: P }, (_, p) => ({ partitionIndex: p, errorCode: 0 })),
        },
      ],
    }).subarray(8),
    running: true,
    totals: {
      sent: 0,
      answered: 0,
      failed: 0,
      commitsAcked: 0,
      partitionCommitsAcked: 0,
      fetches: 0,
      metadata: 0,
      failures: {},
      errorCodes: {},
      staleFetches: 0,
      frameCopies: 0,
      slowAnswers: 0,
      connectionsReopened: 0,
    },
    interval: { sent: 0, answered: 0, failed: 0, partitions: 0, latencies: [] },
    allLatencies: [],
  };
}
