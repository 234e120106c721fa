/**
 * The chaos run's real consumer groups: a producer writing to the broker directly all run long
 * (Kafka's VerifiableProducer, acks=all; only what it was told was written counts), and one
 * consumer per group: Kafka's VerifiableConsumer with the classic protocol and with KIP-848
 * (`group.protocol=consumer`), and librdkafka (python confluent-kafka, chaos_consumer.py), each
 * through a proxy, plus a classic VerifiableConsumer directly on the broker as the reference.
 *
 * The check, per group, kept here and not asked of the proxy: every record the producer had
 * acknowledged is consumed at least once; a record consumed again is a duplicate, and it must lie
 * in the group's uncommitted window: at or above the highest offset the group had a commit of
 * acknowledged for that partition. A record below it consumed again means the group resumed from
 * an offset older than an acknowledged commit: a lost or stale commit, seen by a real client.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { FAST_JVM_FLAGS } from '../bed/clients/java.js';
import { PYTHON } from '../bed/clients/python.js';
import { sleep } from './commit-checker.js';
import { spawnVerifiableProducer, toolEvent } from './verifiable-run.js';

export type ConsumerKind = 'java-classic' | 'java-consumer' | 'librdkafka' | 'direct-classic';

const PY_CONSUMER = fileURLToPath(new URL('./chaos_consumer.py', import.meta.url));

interface Range {
  partition: number;
  minOffset: number;
  maxOffset: number;
}

/** A growable bitmap of offsets per partition. */
class Seen {
  private bits: Uint8Array[] = [];
  has(p: number, o: number): boolean {
    return (this.bits[p]?.[o] ?? 0) === 1;
  }
  add(p: number, o: number): void {
    let b = this.bits[p];
    if (b === undefined || o >= b.length) {
      const next = new Uint8Array(Math.max(1024, (o + 1) * 2));
      if (b !== undefined) next.set(b);
      this.bits[p] = b = next;
    }
    b[o] = 1;
  }
}

export interface GroupReport {
  kind: ConsumerKind;
  group: string;
  bootstrap: string;
  consumed: number;
  duplicates: number;
  /** Duplicates below an acknowledged commit of their partition (must be 0). */
  duplicatesOutsideWindow: number;
  /** Examples of those: partition, offset, acknowledged commit at the time. */
  outsideExamples: string[];
  /** Records the producer acknowledged that the group never consumed (must be 0). */
  missing: number;
  commitsOk: number;
  commitsFailed: Record<string, number>;
  /** Assignments after the first (rebalances the member went through). */
  reassignments: number;
  /** When each of those came, on the run's clock (s): the rebalance verdict attributes them. */
  reassignedAtS: number[];
  /** Its first assignment with partitions (run clock, s): the end of its warm-up; null: none. */
  firstAssignedAtS: number | null;
  /** The proxy instance the group goes through (its index), null for the direct reference. */
  proxy: number | null;
  /** Consumer processes that exited by themselves (restarted at once). */
  deaths: string[];
}

export class ChaosGroup {
  private child: ChildProcess | null = null;
  private readonly seen = new Seen();
  /** Per partition: the highest offset of an acknowledged commit. */
  private readonly committed: number[] = [];
  private stopping = false;
  private assignments = 0;
  private lastErr = '';
  readonly report: GroupReport;

  constructor(
    readonly kind: ConsumerKind,
    private readonly topic: string,
    group: string,
    bootstrap: string,
    private readonly classpath: string,
    proxy: number | null,
    /** Seconds since the start of the measured run. */
    private readonly clock: () => number,
  ) {
    this.report = {
      kind,
      group,
      bootstrap,
      consumed: 0,
      duplicates: 0,
      duplicatesOutsideWindow: 0,
      outsideExamples: [],
      missing: 0,
      commitsOk: 0,
      commitsFailed: {},
      reassignments: 0,
      reassignedAtS: [],
      firstAssignedAtS: null,
      proxy,
      deaths: [],
    };
  }

  start(): void {
    const { group, bootstrap } = this.report;
    const child =
      this.kind === 'librdkafka'
        ? spawn(PYTHON, [PY_CONSUMER, '--bootstrap', bootstrap, '--topic', this.topic, '--group', group], {
            stdio: ['ignore', 'pipe', 'pipe'],
          })
        : spawn(
            'java',
            [
              ...FAST_JVM_FLAGS,
              '-cp',
              this.classpath,
              'org.apache.kafka.tools.VerifiableConsumer',
              '--bootstrap-server',
              bootstrap,
              '--topic',
              this.topic,
              '--group-id',
              group,
              '--group-protocol',
              this.kind === 'java-consumer' ? 'consumer' : 'classic',
              '--reset-policy',
              'earliest',
              ...(this.kind === 'java-consumer' ? [] : ['--session-timeout', '10000']),
            ],
            { stdio: ['ignore', 'pipe', 'pipe'] },
          );
    this.child = child;
    child.stderr!.on('data', (d: Buffer) => (this.lastErr = (this.lastErr + d.toString()).slice(-2000)));
    readline.createInterface({ input: child.stdout! }).on('line', (line) => this.event(line));
    child.once('exit', (code) => {
      if (this.stopping) return;
      const why = this.lastErr.split('\n').filter((l) => /Exception|Error/.test(l));
      this.report.deaths.push(`exit ${code}: ${(why.at(-1) ?? '').slice(0, 200)}`);
      setTimeout(() => {
        if (!this.stopping) this.start();
      }, 1000);
    });
  }

  private event(line: string): void {
    const e = toolEvent(line, (log) => (this.lastErr = (this.lastErr + log + '\n').slice(-2000)));
    if (e === null) return;
    const r = this.report;
    if (e['name'] === 'records_consumed') {
      for (const { partition: p, minOffset, maxOffset } of e['partitions'] as Range[]) {
        for (let o = minOffset; o <= maxOffset; o++) {
          r.consumed++;
          if (!this.seen.has(p, o)) {
            this.seen.add(p, o);
            continue;
          }
          r.duplicates++;
          const acked = this.committed[p] ?? -1;
          if (o < acked) {
            r.duplicatesOutsideWindow++;
            if (r.outsideExamples.length < 5) r.outsideExamples.push(`p${p} offset ${o} < commit ${acked}`);
          }
        }
      }
    } else if (e['name'] === 'offsets_committed') {
      if (e['success'] === true) {
        r.commitsOk++;
        for (const { partition, offset } of e['offsets'] as { partition: number; offset: number }[])
          this.committed[partition] = Math.max(this.committed[partition] ?? -1, offset);
      } else {
        const why = String(e['error'] ?? 'unknown').slice(0, 80);
        r.commitsFailed[why] = (r.commitsFailed[why] ?? 0) + 1;
      }
    } else if (e['name'] === 'partitions_assigned') {
      if ((e['partitions'] as unknown[]).length > 0) r.firstAssignedAtS ??= this.clock();
      if ((e['partitions'] as unknown[]).length > 0 && this.assignments++ > 0) {
        r.reassignments++;
        r.reassignedAtS.push(this.clock());
      }
    }
  }

  /** Per partition: the highest offset of a commit the group was told succeeded (-1: none). */
  ackedCommits(partitions: number): number[] {
    return Array.from({ length: partitions }, (_, p) => this.committed[p] ?? -1);
  }

  /** Acknowledged records not consumed yet. */
  countMissing(acked: ProducedRecords): number {
    let n = 0;
    acked.forEach((p, o) => {
      if (!this.seen.has(p, o)) n++;
    });
    return n;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const child = this.child;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([gone, sleep(15_000).then(() => child.kill('SIGKILL'))]);
  }
}

/** What the producer was told was written: (partition, offset) pairs. */
export class ProducedRecords {
  private readonly byPartition: number[][] = [];
  count = 0;
  add(p: number, o: number): void {
    (this.byPartition[p] ??= []).push(o);
    this.count++;
  }
  forEach(f: (p: number, o: number) => void): void {
    this.byPartition.forEach((offsets, p) => offsets.forEach((o) => f(p, o)));
  }
}

/** Kafka's VerifiableProducer to the broker: `rate` records/s for `seconds`; resolves when it exits. */
export function runProducer(
  classpath: string,
  broker: string,
  topic: string,
  rate: number,
  seconds: number,
  into: ProducedRecords,
): { done: Promise<{ code: number | null; errors: number }>; kill: () => void } {
  const child = spawnVerifiableProducer(classpath, broker, topic, Math.round(rate * seconds), rate);
  child.stderr!.resume();
  let errors = 0;
  readline.createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line.includes('"producer_send_success"')) {
      const e = JSON.parse(line) as { partition: number; offset: number };
      into.add(e.partition, e.offset);
    } else if (line.includes('"producer_send_error"')) errors++;
  });
  const done = new Promise<{ code: number | null; errors: number }>((resolve) =>
    child.once('exit', (code) => resolve({ code, errors })),
  );
  return { done, kill: () => child.kill('SIGKILL') };
}
