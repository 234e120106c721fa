/**
 * Idle client connections found by one periodic sweep, not by a timer per socket.
 *
 * Node's socket.setTimeout re-arms the socket's timer on every read and every write (the timer is
 * taken out of its list and put back, with a clock read), which on a relay moving tens of
 * thousands of frames a second is a share of the event loop that the relaying itself does not
 * need. A broker does not keep a timer per connection either: its Selector notes each
 * connection's last activity and expires the idle ones as it polls. Here a connection notes the
 * sweep's tick count on activity (a field write), and a sweep every `resolutionMs` tells those
 * that have had none for at least `timeoutMs`, never earlier, at most `resolutionMs` later.
 *
 * One sweep serves every connection with the same timeout (`idleSweep`), and its interval runs
 * only while it has connections to watch, unref'ed, so it never keeps a process alive.
 */

export interface IdleWatched {
  /** The sweep's `tick` at the connection's last activity. */
  activeTick: number;
  /** No activity for `timeoutMs`; called again every `timeoutMs` for as long as none comes. */
  idleFor(): void;
}

export class IdleSweep {
  /** Sweeps so far: what a connection notes as the time of its last activity. */
  tick = 0;
  readonly resolutionMs: number;
  /** Ticks that cover `timeoutMs` whatever the moment of the activity within its tick. */
  private readonly ticksToIdle: number;
  private readonly watched = new Set<IdleWatched>();
  private timer: NodeJS.Timeout | null = null;

  constructor(readonly timeoutMs: number) {
    if (!(timeoutMs > 0)) throw new RangeError('timeoutMs must be positive');
    // A tenth of the timeout, from 10 ms (short timeouts of tests) to 1 s (the default 10 minutes).
    this.resolutionMs = Math.min(1000, Math.max(10, Math.floor(timeoutMs / 10)));
    // Activity noted at tick k happened after sweep k began: it is timeoutMs old only once the
    // ticks since cover timeoutMs plus that tick.
    this.ticksToIdle = Math.ceil(timeoutMs / this.resolutionMs) + 1;
  }

  /** Connections being watched. */
  get size(): number {
    return this.watched.size;
  }

  /** Watches `w` from now (its last activity is now). */
  add(w: IdleWatched): void {
    w.activeTick = this.tick;
    this.watched.add(w);
    if (this.timer === null) {
      this.timer = setInterval(() => this.sweep(), this.resolutionMs);
      this.timer.unref();
    }
  }

  delete(w: IdleWatched): void {
    this.watched.delete(w);
    if (this.watched.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  /** One sweep, every `resolutionMs`. */
  private sweep(): void {
    this.tick++;
    // A connection that closes in idleFor leaves the set during the loop, which Set allows.
    for (const w of this.watched) {
      if (this.tick - w.activeTick < this.ticksToIdle) continue;
      // Told again after another timeoutMs (ticksToIdle - 1 ticks) unless activity comes first.
      w.activeTick = this.tick - 1;
      w.idleFor();
    }
  }
}

const sweeps = new Map<number, IdleSweep>();

/** The sweep of every connection with this timeout. */
export function idleSweep(timeoutMs: number): IdleSweep {
  let s = sweeps.get(timeoutMs);
  if (s === undefined) {
    s = new IdleSweep(timeoutMs);
    sweeps.set(timeoutMs, s);
  }
  return s;
}
