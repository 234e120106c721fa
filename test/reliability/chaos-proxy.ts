/**
 * A proxy instance of the chaos run: the built CLI on fixed ports (so clients find it again after a
 * SIGKILL and restart), its /readyz polled every 250 ms into unready and unanswered intervals
 * (chaos-readiness.ts), its VmRSS sampled.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePortRange } from '../harness/proxy.js';
import { memoryOf, sleep } from './commit-checker.js';
import { anonGrowth } from './chaos-memory.js';
import type { AnonGrowth, MemorySample } from './chaos-memory.js';
import { ReadinessTrack, probeReadyz } from './chaos-readiness.js';
import type { UnreadyInterval } from './chaos-readiness.js';

/** How much of an incarnation's output is kept (its tail). */
const LOG_TAIL_CHARS = 200_000;

/** A /readyz poll without an answer this long is "unanswered", not unready (chaos-readiness.ts). */
const PROBE_TIMEOUT_MS = 5000;

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/kafka-offset-proxy.js');
const MB = 1024 * 1024;

export interface RssSummary {
  startMb: number;
  endMb: number;
  maxMb: number;
  endIncarnation: number;
  anonGrowth: AnonGrowth | null;
}

export class ChaosProxy {
  private child: ChildProcess | null = null;
  private log = '';
  /** Output of earlier incarnations too (a SIGKILLed one's last lines matter). */
  private fullLog = '';
  private readonly readiness = new ReadinessTrack();
  private polling = false;
  /** [seconds, VmRSS MB] of the current incarnation, and the first incarnation's first sample. */
  readonly rss: MemorySample[] = [];
  incarnation = 0;
  restarts = 0;
  /** Starts that exited at once (and were retried). */
  failedStarts = 0;

  private constructor(
    readonly name: string,
    readonly port: number,
    readonly httpPort: number,
    private readonly args: string[],
    private readonly clock: () => number,
  ) {}

  /** Picks free ports and starts it. */
  static async start(name: string, args: string[], clock: () => number): Promise<ChaosProxy> {
    const port = await freePortRange(8);
    const httpPort = await freePortRange(0);
    const p = new ChaosProxy(name, port, httpPort, args, clock);
    await p.spawn();
    return p;
  }

  get bootstrap(): string {
    return `127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.exitCode === null && this.child.signalCode === null ? this.child.pid : undefined;
  }

  output(): string {
    return this.fullLog + this.log;
  }

  async spawn(): Promise<void> {
    this.fullLog += this.log;
    this.log = '';
    const child = spawn(
      process.execPath,
      [
        BIN,
        '--listen',
        `127.0.0.1:${this.port}`,
        '--http',
        `127.0.0.1:${this.httpPort}`,
        // A killed predecessor's broker ports are free again at once; bind retries cover the rest.
        '--bind-failure',
        'unready',
        ...this.args,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    this.incarnation++;
    const append = (d: Buffer) => {
      // Only the tail is kept: a long run logs a warning per refused commit. It starts at a
      // line's start, so warnings() never counts a line cut in the middle as an event of its own.
      const joined = this.log + d.toString();
      if (joined.length <= LOG_TAIL_CHARS) this.log = joined;
      else {
        const tail = joined.slice(-LOG_TAIL_CHARS);
        this.log = tail.slice(tail.indexOf('\n') + 1);
      }
    };
    child.stdout!.on('data', append);
    child.stderr!.on('data', append);
    const deadline = Date.now() + 60_000;
    while (!this.log.includes('"listening"')) {
      if (child.exitCode !== null)
        throw new Error(`${this.name} exited with ${child.exitCode}:\n${this.log}`);
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`${this.name} did not start listening:\n${this.log}`);
      }
      await sleep(50);
    }
  }

  /** SIGKILL; resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
  }

  /**
   * Starts it again, as a supervisor would: a start that fails (the embedded store on a full disk
   * exits 2) is retried every 2 s, for up to 5 minutes.
   */
  async restart(): Promise<void> {
    this.restarts++;
    const deadline = Date.now() + 300_000;
    for (;;) {
      try {
        await this.spawn();
        return;
      } catch (err) {
        this.failedStarts++;
        if (Date.now() > deadline) throw err;
        await sleep(2000);
      }
    }
  }

  /** SIGTERM (then SIGKILL after 15 s); the exit code. */
  async stop(): Promise<number | null> {
    this.polling = false;
    const child = this.child;
    if (child === null) return null;
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    const gone = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const code = await gone;
    clearTimeout(timer);
    return code;
  }

  /** Polls /readyz (and samples VmRSS every 5 s) until stop(). */
  startPolling(): void {
    this.polling = true;
    void (async () => {
      let lastRss = -Infinity;
      while (this.polling) {
        const at = this.clock();
        const outcome = await probeReadyz(`http://127.0.0.1:${this.httpPort}/readyz`, PROBE_TIMEOUT_MS);
        this.readiness.record(at, this.clock(), outcome);
        const pid = this.pid;
        if (pid !== undefined && at - lastRss >= 5) {
          lastRss = at;
          try {
            const m = memoryOf(pid);
            this.rss.push({ atS: at, mb: m.rss / MB, anonMb: m.anon / MB, incarnation: this.incarnation });
          } catch {
            // the process went away between the check and the read
          }
        }
        await sleep(250);
      }
    })();
  }

  /** Intervals it answered 503 or nothing listened on its port. */
  get unready(): UnreadyInterval[] {
    return this.readiness.unready;
  }

  /** Intervals its /readyz gave no answer within PROBE_TIMEOUT_MS (the machine, not a verdict). */
  get unanswered(): UnreadyInterval[] {
    return this.readiness.unanswered;
  }

  /** When its /readyz first answered 200 (run clock, s), null: never. */
  get firstReadyS(): number | null {
    return this.readiness.firstReadyS;
  }

  stopPolling(): void {
    this.polling = false;
  }

  lastRssMb(): number {
    return this.rss.at(-1)?.mb ?? NaN;
  }

  /**
   * VmRSS at the first and last sample of the run, and the largest, with the incarnation of the
   * last; and the anonymous memory's growth (chaos-memory.ts).
   */
  rssSummary(): RssSummary {
    const run = this.rss.filter((r) => r.atS >= 0 && Number.isFinite(r.mb));
    return {
      anonGrowth: anonGrowth(run),
      startMb: run[0]?.mb ?? NaN,
      endMb: run.at(-1)?.mb ?? NaN,
      maxMb: Math.max(...run.map((r) => r.mb)),
      endIncarnation: run.at(-1)?.incarnation ?? 0,
    };
  }

  /** Warn and error log lines by event (of every incarnation, each its last LOG_TAIL_CHARS of output). */
  warnings(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const line of this.output().split('\n')) {
      if (!/"level":"(warn|error)"/.test(line)) continue;
      let key = line.slice(0, 100);
      try {
        const e = JSON.parse(line) as { event?: string; reason?: string };
        key = [e.event, e.reason].filter((x) => x !== undefined).join(': ');
      } catch {
        // counted by its start
      }
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return counts;
  }
}
