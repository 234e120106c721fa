/**
 * The relay's native data path (native/relay.c), seen from JavaScript: loading the addon, the plan
 * table it follows, the pairs handed to it and back, and its figures for the metrics.
 *
 * A connection pair whose frames the proxy only passes on (Produce, Fetch, ListOffsets,
 * ... whose answers go back unchanged) costs the event loop a JavaScript call per read and per
 * write on the JavaScript path; on the native path it costs none: the addon reads both sockets
 * on the same libuv loop, keeps the order of answers and the backpressure, and calls JavaScript
 * only to hand the pair back (a frame the proxy must read, an answer it must rewrite, anything
 * unexpected) or to report an end. The JavaScript connection (connection.ts) decides when a pair
 * goes native and takes it back whole, so every decision about a frame keeps one implementation.
 *
 * The addon is optional: built by `npm run build` where a C compiler and Node's headers are there
 * (scripts/build-native.mjs), else the proxy relays in JavaScript alone, as with
 * `--native-relay off`.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { requestHeaderVersion } from '../../protocol/messages/api-info.js';
import { ProtocolError } from '../../protocol/errors.js';
import { unreachable } from './api-plan.js';
import type { ApiPlans, ApiPlan } from './api-plan.js';
import { rewriteFetchTail } from './fetch-stream.js';
import type { ExposeBrokerNow } from './fetch-stream.js';
import type { ProxyObserver } from './observer.js';
import { ALWAYS_READ_REQUEST_BYTES } from './request-pool.js';
import type { RequestBufferPool } from './request-pool.js';
import { readsIntoReusedBuffer } from './reused-reads.js';

/** The addon's functions (native/relay.c). */
export interface RelayBinding {
  readonly maxApi: number;
  readonly maxVersion: number;
  readonly statsHeader: number;
  readonly statsSamples: number;
  createContext(
    plans: Uint8Array,
    maxFrameSize: number,
    maxInFlight: number,
    nowMs: number,
    onHandback: (
      id: number,
      client: Buffer | undefined,
      broker: Buffer | undefined,
      pending: Float64Array,
    ) => void,
    onClosed: (id: number, reason: number, errorCode: string | undefined) => void,
    onStats: () => void,
    stats: Float64Array,
    streamLimit: number,
    onReserve: (id: number, bytes: number) => boolean,
    onFetchTail: (id: number, section: Buffer, apiVersion: number) => Buffer | undefined,
  ): object;
  attach(context: object, id: number, clientFd: number, brokerFd: number, pending: Float64Array): object;
  handBack(pair: object): void;
  close(pair: object): void;
  dispose(context: object): void;
  status(pair: object): [idleMs: number, awaiting: number, unsentToClient: number];
  /**
   * Makes the C library's stderr stream (LMDB's write errors, Node's fatal errors) write each of
   * its writes as one JSON line to fd 2, with `fields` (JSON members, each followed by a comma)
   * between "time" and "text" (native/c-stderr.c). False where it cannot (not Linux).
   */
  routeCStderr?(fields: string): boolean;
}

/** Plan bits, as native/relay.c reads them. */
const PLAN_AS_IS = 1;
const PLAN_WALK = 2;
const PLAN_FETCH = 3;
const PLAN_ACKS = 4;
const PLAN_FLEXIBLE = 8;

/**
 * What the native path reports when it stops on its own (native/relay.c, CLOSED_*, in order).
 * 'native relay failed': a Node-API call failed where the pair was to be handed back, so it could
 * not go back whole; the connection closes.
 */
export type NativeEnd =
  | 'client ended'
  | 'client error'
  | 'broker ended'
  | 'broker error'
  | 'native relay failed'
  | 'bad response from broker';
const ENDS: readonly NativeEnd[] = [
  'client ended',
  'client error',
  'broker ended',
  'broker error',
  'native relay failed',
  // A Fetch answer being streamed was malformed: part of it has gone, so the pair ends.
  'bad response from broker',
];

/** A request handed over or back, awaiting the broker's answer. */
export interface NativePending {
  correlationId: number;
  apiKey: number;
  apiVersion: number;
  /** performance.now() when it arrived. */
  started: number;
  /** Its answer is a Produce v10+ one, walked for NodeEndpoints (when handed over). */
  walk?: boolean;
  /** Its answer is a Fetch v16+ one, streamed through the Fetch walk (when handed over). */
  fetch?: boolean;
}

/** The connection a pair belongs to: told when the addon hands the pair back or stops. */
export interface NativeHost {
  /**
   * The pair is JavaScript's again: `client` and `broker` are bytes read and not passed on (each
   * starts at a frame boundary), `pending` the requests awaiting their answers, oldest first.
   */
  nativeHandedBack(client: Buffer | undefined, broker: Buffer | undefined, pending: NativePending[]): void;
  /** A socket ended or failed; the pair is closed on the native side. */
  nativeEnded(end: NativeEnd, error: Error | undefined): void;
}

/** A pair on the native path. */
export interface NativePair {
  /** Stop at the next frame boundaries and hand the pair back (nativeHandedBack, later or now). */
  handBack(): void;
  /** Stop now; nothing more is reported. Queued writes are dropped (the sockets are closing). */
  close(): void;
  /** For the idle check: ms since the client's last read or write, answers awaited, bytes unsent to the client. */
  status(): { idleMs: number; awaiting: number; unsentToClient: number };
}

interface TcpHandle {
  fd?: number;
  reading?: boolean;
}

function handleOf(socket: Socket): TcpHandle | null {
  return (socket as unknown as { _handle?: TcpHandle | null })._handle ?? null;
}

/**
 * The descriptor of a plain TCP socket whose reads go into a reused buffer (reused-reads.ts), the
 * only sockets the native path takes: their pause() stops the handle's reads at once, and no
 * TLS or other layer sits between the bytes and the descriptor. -1 for any other socket.
 */
export function nativeFd(socket: Socket): number {
  if (!readsIntoReusedBuffer(socket)) return -1;
  const fd = handleOf(socket)?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : -1;
}

/** Node reads `socket` no more (after pause()): the native path may read it. */
export function pausedForNative(socket: Socket): boolean {
  const handle = handleOf(socket);
  return handle !== null && handle.reading === false;
}

let loaded: { binding: RelayBinding | null; why: string } | undefined;

/** Where `npm run build` puts the addon: dist/native/, seen from dist/proxy/core/ or proxy/core/. */
const CANDIDATES = ['../../native/kop-relay.node', '../../dist/native/kop-relay.node'];

/** The addon, or null with the reason it is not there. Loaded once. */
export function loadNativeRelay(): { binding: RelayBinding | null; why: string } {
  if (loaded !== undefined) return loaded;
  const require = createRequire(import.meta.url);
  let why = 'not built (npm run build compiles it where a C compiler is installed)';
  for (const candidate of CANDIDATES) {
    const file = fileURLToPath(new URL(candidate, import.meta.url));
    if (!existsSync(file)) continue;
    try {
      loaded = { binding: require(file) as RelayBinding, why: file };
      return loaded;
    } catch (err) {
      why = `${file} does not load: ${(err as Error).message}`;
    }
  }
  loaded = { binding: null, why };
  return loaded;
}

/** The plan byte of (apiKey, apiVersion) for the addon: 0 when JavaScript must read the frame. */
export function nativePlan(plan: ApiPlan, apiKey: number, apiVersion: number): number {
  switch (plan.kind) {
    case 'relay':
      break;
    case 'rewrite':
      // Passed on unread; the answer streamed natively up to its NodeEndpoints (onFetchTail).
      return plan.answer.response === 'fetch-stream' ? PLAN_FETCH : 0;
    case 'read':
    case 'answer-locally':
    case 'refuse':
    case 'api-versions-unsupported':
      return 0;
    default:
      return unreachable(plan);
  }
  let bits = plan.answer.response === 'walk-produce' ? PLAN_WALK : PLAN_AS_IS;
  if (plan.mayBeUnanswered) {
    bits |= PLAN_ACKS;
    if (requestHeaderVersion(apiKey, apiVersion) >= 2) bits |= PLAN_FLEXIBLE;
  }
  return bits;
}

export interface NativeRelayOptions {
  plans: ApiPlans;
  maxFrameSize: number;
  maxInFlight: number;
  observer: ProxyObserver;
  /**
   * The request memory pool the connections share (--max-buffered-request-bytes): a request over
   * ALWAYS_READ_REQUEST_BYTES that spans reads is passed on natively only with a reservation of
   * its declared size in it. None: no bound (the tests').
   */
  requestPool?: RequestBufferPool;
  /**
   * Learns a broker named in a Fetch answer's NodeEndpoints (as ResponsePath's): the native path
   * rewrites those through it. None: such an answer ends its pair ('bad response from broker').
   */
  exposeBroker?: ExposeBrokerNow;
}

/**
 * The native path of one proxy server: its plan table, its pairs, and the figures it hands to
 * the observer (at least once a second, whenever its sample buffer fills, and on `flushStats`).
 */
export class NativeRelay {
  private readonly context: object;
  private readonly hosts = new Map<number, NativeHost>();
  /** Reservations in the request memory pool of the pairs passing a large request on now. */
  private readonly reserved = new Map<number, number>();
  private nextId = 1;
  private readonly stats: Float64Array;
  private readonly timer: NodeJS.Timeout;
  /** Pairs attached since the start, and handed back since the start. */
  attached = 0;
  handedBackTotal = 0;
  /** Pairs on the native path now. */
  get pairs(): number {
    return this.hosts.size;
  }

  constructor(
    private readonly binding: RelayBinding,
    private readonly opts: NativeRelayOptions,
  ) {
    const { maxApi, maxVersion } = binding;
    const table = new Uint8Array(maxApi * maxVersion);
    for (let api = 0; api < maxApi; api++) {
      for (let v = 0; v < maxVersion; v++)
        table[api * maxVersion + v] = nativePlan(opts.plans.of(api, v), api, v);
    }
    this.stats = new Float64Array(binding.statsHeader + 3 * binding.statsSamples);
    this.context = binding.createContext(
      table,
      opts.maxFrameSize,
      opts.maxInFlight,
      performance.now(),
      (id, client, broker, pending) => this.handedBack(id, client, broker, pending),
      (id, reason, code) => this.ended(id, reason, code),
      () => this.flushStats(),
      this.stats,
      ALWAYS_READ_REQUEST_BYTES,
      (id, bytes) => this.reserve(id, bytes),
      (_id, section, apiVersion) => this.fetchTail(section, apiVersion),
    );
    this.timer = setInterval(() => this.flushStats(), 1000);
    this.timer.unref();
  }

  /**
   * Hands the two sockets' descriptors to the addon, with the requests already sent and awaiting
   * their answers. The sockets must not be read nor written by Node until the pair is handed back.
   * Throws when the addon cannot take them (nothing was read then).
   */
  attach(
    host: NativeHost,
    clientFd: number,
    brokerFd: number,
    pending: readonly NativePending[],
  ): NativePair {
    const id = this.nextId++;
    const encoded = new Float64Array(pending.length * 5);
    pending.forEach((p, i) => {
      encoded[5 * i] = p.correlationId;
      encoded[5 * i + 1] = p.apiKey;
      encoded[5 * i + 2] = p.apiVersion;
      encoded[5 * i + 3] = p.fetch === true ? PLAN_FETCH : p.walk === true ? PLAN_WALK : PLAN_AS_IS;
      encoded[5 * i + 4] = p.started;
    });
    const pair = this.binding.attach(this.context, id, clientFd, brokerFd, encoded);
    this.hosts.set(id, host);
    this.attached++;
    const binding = this.binding;
    const hosts = this.hosts;
    return {
      handBack: () => binding.handBack(pair),
      close: () => {
        hosts.delete(id);
        binding.close(pair);
        this.release(id);
      },
      status: () => {
        const [idleMs, awaiting, unsentToClient] = binding.status(pair);
        return { idleMs, awaiting, unsentToClient };
      },
    };
  }

  /**
   * Called by the addon in the middle of a read (a plain call: it must touch no pair): `bytes` > 0
   * asks to reserve them for a large request it is about to pass on as it arrives (true: go on),
   * `bytes` < 0 lets that reservation go (its last byte is passed on).
   */
  private reserve(id: number, bytes: number): boolean {
    if (bytes < 0) {
      this.release(id);
      return true;
    }
    const pool = this.opts.requestPool;
    if (pool !== undefined && !pool.reserve(bytes)) return false;
    this.reserved.set(id, bytes);
    return true;
  }

  /**
   * Called by the addon in the middle of a read (a plain call: it must touch no pair) with the
   * top-level tagged fields of a streamed Fetch answer that holds NodeEndpoints: the same bytes
   * with those rewritten to the proxy's addresses (fetch-stream.ts), or dropped when a broker's
   * listener is not open yet (the addon cannot wait; the client refreshes its metadata instead).
   * Undefined when the section is malformed: the pair ends.
   */
  private fetchTail(section: Buffer, apiVersion: number): Buffer | undefined {
    const expose = this.opts.exposeBroker;
    if (expose === undefined) return undefined;
    try {
      return rewriteFetchTail(section, expose, apiVersion, false).tail;
    } catch (err) {
      // Thrown in the addon's read, anything would reach 'uncaughtException': the pair ends instead.
      if (err instanceof ProtocolError) this.opts.observer.frameRejected('broker_protocol');
      return undefined;
    }
  }

  /** The pair's reservation, if it holds one, goes back to the pool. */
  private release(id: number): void {
    const bytes = this.reserved.get(id);
    if (bytes === undefined) return;
    this.reserved.delete(id);
    this.opts.requestPool?.release(bytes);
  }

  /** Large requests being passed on natively now, and the bytes they reserve. */
  get reservations(): { count: number; bytes: number } {
    let bytes = 0;
    for (const b of this.reserved.values()) bytes += b;
    return { count: this.reserved.size, bytes };
  }

  /** Hands the figures gathered since the last call to the observer. */
  flushStats(): void {
    const s = this.stats;
    const observer = this.opts.observer;
    if (s[1]! > 0) observer.bytes('client_in', s[1]!);
    if (s[2]! > 0) observer.bytes('client_out', s[2]!);
    if (s[3]! > 0) observer.bytes('broker_in', s[3]!);
    if (s[4]! > 0) observer.bytes('broker_out', s[4]!);
    const samples = s[0]!;
    const at = this.binding.statsHeader;
    for (let i = 0; i < samples; i++) {
      observer.responded(s[at + 3 * i]!, s[at + 3 * i + 1]!, 'broker', s[at + 3 * i + 2]!);
    }
    s.fill(0, 0, 5);
  }

  /** After the last pair: hands over the last figures and lets the addon forget this object. */
  stop(): void {
    clearInterval(this.timer);
    this.flushStats();
    this.binding.dispose(this.context);
    // Nothing is reported after dispose: what a pair still relaying reserved is let go now.
    for (const id of [...this.reserved.keys()]) this.release(id);
  }

  private handedBack(
    id: number,
    client: Buffer | undefined,
    broker: Buffer | undefined,
    encoded: Float64Array,
  ): void {
    const host = this.hosts.get(id);
    this.hosts.delete(id);
    this.release(id);
    if (host === undefined) return;
    this.handedBackTotal++;
    const pending: NativePending[] = [];
    for (let i = 0; i < encoded.length; i += 5) {
      pending.push({
        correlationId: encoded[i]!,
        apiKey: encoded[i + 1]!,
        apiVersion: encoded[i + 2]!,
        started: encoded[i + 4]!,
      });
    }
    // Answered requests are counted before the connection goes on with those that are not.
    this.flushStats();
    host.nativeHandedBack(client, broker, pending);
  }

  private ended(id: number, reason: number, code: string | undefined): void {
    const host = this.hosts.get(id);
    this.hosts.delete(id);
    this.release(id);
    if (host === undefined) return;
    this.flushStats();
    const end = ENDS[reason - 1] ?? 'client error';
    const error = code === undefined ? undefined : Object.assign(new Error(`${end}: ${code}`), { code });
    host.nativeEnded(end, error);
  }
}
