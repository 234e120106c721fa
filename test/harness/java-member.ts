// A live Java consumer group member for the store-outage tests: Driver.java's `consume
// --until-stop`, run as a child process whose JSON lines are read as they come. It consumes on and
// on, commits every 200 ms (each commit one line: acknowledged, or the exception and whether it
// is retriable), reports its member id and generation (the member epoch under KIP-848) whenever
// they change, and its rebalance callbacks; "stop" on its stdin ends it with a read-back of what
// the group coordinator has.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { DRIVER, programArgv } from '../bed/clients/java.js';
import { followJsonLines } from '../bed/clients/run.js';
import type { GroupProtocol } from '../bed/clients/java.js';
import { until } from '../reliability/fault-helpers.js';
import { setConsumerGroupSession } from './group-members.js';

export type MemberLine = Record<string, unknown> & { type: string };

export interface PartitionOffset {
  partition: number;
  offset: number;
}

export interface CommitLine extends MemberLine {
  type: 'commit';
  ok: boolean;
  offsets: PartitionOffset[];
  /** The commit's number, 1, 2, ... in the order the member made them. */
  n: number;
  /** Wall-clock ms when commitSync was called and when it returned. */
  started: number;
  t: number;
  ms: number;
  error?: string;
  retriable?: boolean;
}

export class JavaMember {
  readonly lines: MemberLine[] = [];
  private err = '';

  private constructor(
    readonly protocol: GroupProtocol,
    /** The member's session: classic, the client's session.timeout.ms; KIP-848, the group's. */
    readonly sessionMs: number,
    readonly child: ChildProcess,
  ) {
    followJsonLines(child.stdout!, (line) => this.lines.push(line as MemberLine));
    child.stderr!.on('data', (d: Buffer) => (this.err = (this.err + d.toString()).slice(-20_000)));
  }

  /**
   * `session`: the member's session; without it, 10 s (classic, Driver.java's) or the broker's
   * default, 45 s (KIP-848). Under KIP-848 it is the group's consumer.session.timeout.ms, set on
   * the broker at `session.brokerBootstrap` (the member may bootstrap through the proxy) before the
   * member joins.
   */
  static async start(
    classpath: string,
    bootstrap: string,
    opts: {
      topic: string;
      group: string;
      protocol: GroupProtocol;
      commitTimeoutMs?: number;
      session?: { ms: number; brokerBootstrap: string };
    },
  ): Promise<JavaMember> {
    const args = ['consume', '--until-stop', '--topic', opts.topic, '--group', opts.group];
    args.push('--protocol', opts.protocol, '--client-id', `${opts.group}-member`);
    args.push('--commit-interval-ms', '200', '--commit-timeout-ms', String(opts.commitTimeoutMs ?? 3000));
    let sessionMs = opts.protocol === 'classic' ? 10_000 : 45_000;
    if (opts.session && opts.protocol === 'classic') {
      sessionMs = opts.session.ms;
      args.push('--session-timeout-ms', String(sessionMs));
    } else if (opts.session) {
      sessionMs = opts.session.ms;
      await setConsumerGroupSession(opts.session.brokerBootstrap, opts.group, sessionMs);
    }
    const argv = await programArgv(classpath, DRIVER, { bootstrap }, args);
    return new JavaMember(opts.protocol, sessionMs, spawn('java', argv, { stdio: ['pipe', 'pipe', 'pipe'] }));
  }

  commits(): CommitLine[] {
    return this.lines.filter((l): l is CommitLine => l.type === 'commit');
  }

  acked(): CommitLine[] {
    return this.commits().filter((c) => c.ok);
  }

  /** Waits for `n` acknowledged commits that began after `since` (wall-clock ms). */
  async ackedSince(since: number, n: number, what: string, timeoutMs = 90_000): Promise<void> {
    await until(
      () => this.acked().filter((c) => c.started > since).length >= n,
      `${this.protocol} (${this.sessionMs / 1000} s session): ${what}`,
      timeoutMs,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${this.explain()}`);
    });
  }

  /** Says "stop" and waits for its read-back and close. */
  async stop(): Promise<void> {
    this.child.stdin!.write('stop\n');
    await until(
      () => this.lines.some((l) => l.type === 'done' || l.type === 'error'),
      'the member to close',
      90_000,
    );
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }

  explain(): string {
    const shown = this.lines.filter((l) => l.type !== 'commit' || l['ok'] !== true).slice(-60);
    return `${this.protocol} (${this.sessionMs / 1000} s session) member lines (acknowledged commits left out, ${this.acked().length} of them):\n${shown
      .map((l) => JSON.stringify(l))
      .join('\n')}\nstderr:\n${this.err.slice(-4000)}`;
  }
}
