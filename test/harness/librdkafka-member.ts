// A live librdkafka group member for the store-outage tests: test/bed/clients/outage_consumer.py
// (python confluent-kafka), run as a child process whose JSON lines are read as they come. It
// commits every 200 ms (each commit one line: acknowledged, or the error's name), reports its
// rebalance callbacks and client errors, and on "stop" reads back what the coordinator has.
// Which librdkafka, which group protocol and which session: LIBRDKAFKA_MEMBERS.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { PYTHON } from '../bed/clients/python.js';
import { followJsonLines } from '../bed/clients/run.js';
import { modernPython } from '../bed/clients/python-modern.js';
import { setConsumerGroupSession } from './group-members.js';

const CONSUMER = fileURLToPath(new URL('../bed/clients/outage_consumer.py', import.meta.url));

export interface LibrdkafkaMemberKind {
  /** For test output and the report line. */
  label: string;
  /** Short, for topic and group names. */
  tag: string;
  modern: boolean;
  protocol: 'classic' | 'consumer';
  /** classic: the client's session.timeout.ms; KIP-848: the group's consumer.session.timeout.ms. */
  sessionMs: number;
}

/**
 * Every librdkafka and group protocol the bed has, each with a 10 s and a 45 s session where it
 * has both. Debian's librdkafka 2.0.2 (the oldest the bed tests) speaks only the classic protocol;
 * librdkafka 2.16.0 (python-modern.ts) both. Under KIP-848 the session is the broker's: the group's
 * consumer.session.timeout.ms, set on the broker before the member joins (the bed's brokers allow
 * sessions from 1 s, `group.consumer.min.session.timeout.ms`; the default is 45 s).
 */
export const LIBRDKAFKA_MEMBERS: LibrdkafkaMemberKind[] = [
  {
    label: 'librdkafka 2.0.2 classic, 10 s session',
    tag: 'old-classic',
    modern: false,
    protocol: 'classic',
    sessionMs: 10_000,
  },
  {
    label: 'librdkafka 2.16.0 classic, 45 s session',
    tag: 'classic-45',
    modern: true,
    protocol: 'classic',
    sessionMs: 45_000,
  },
  {
    label: 'librdkafka 2.16.0 KIP-848, 10 s session',
    tag: 'kip848-10',
    modern: true,
    protocol: 'consumer',
    sessionMs: 10_000,
  },
  {
    label: 'librdkafka 2.16.0 KIP-848, 45 s session',
    tag: 'kip848-45',
    modern: true,
    protocol: 'consumer',
    sessionMs: 45_000,
  },
];

/** One line of the member; `at` is when the test read it (Date.now()). */
export type MemberEvent = Record<string, unknown> & { type: string; t: number; at: number };

export class LibrdkafkaMember {
  readonly lines: MemberEvent[] = [];
  private err = '';

  private constructor(
    readonly kind: LibrdkafkaMemberKind,
    readonly group: string,
    readonly child: ChildProcess,
  ) {
    followJsonLines(child.stdout!, (line, at) => this.lines.push({ ...(line as MemberEvent), at }));
    child.stderr!.on('data', (d: Buffer) => (this.err = (this.err + d.toString()).slice(-4000)));
  }

  /**
   * Starts a member of `group` (KIP-848: after setting the group's session on `brokerBootstrap`)
   * that consumes `topic` through `bootstrap`.
   */
  static async start(
    kind: LibrdkafkaMemberKind,
    brokerBootstrap: string,
    bootstrap: string,
    topic: string,
    group: string,
  ): Promise<LibrdkafkaMember> {
    const args = [CONSUMER, '--bootstrap', bootstrap, '--topic', topic, '--group', group];
    args.push('--group-protocol', kind.protocol);
    if (kind.protocol === 'consumer') {
      await setConsumerGroupSession(brokerBootstrap, group, kind.sessionMs);
    } else {
      args.push('--session-timeout-ms', String(kind.sessionMs));
    }
    const python = kind.modern ? await modernPython() : PYTHON;
    return new LibrdkafkaMember(kind, group, spawn(python, args, { stdio: ['pipe', 'pipe', 'pipe'] }));
  }

  commits(): MemberEvent[] {
    return this.lines.filter((l) => l.type === 'commit');
  }

  acked(): MemberEvent[] {
    return this.commits().filter((l) => l['ok'] === true);
  }

  stop(): void {
    this.child.stdin!.write('stop\n');
  }

  kill(): void {
    this.child.kill('SIGKILL');
  }

  explain(): string {
    return `${this.kind.label} (${this.group}):\n${this.lines.map((l) => JSON.stringify(l)).join('\n')}\n${this.err}`;
  }
}
