/**
 * Kafka's own verifiable consumers, killed and replaced, directly against the broker and through
 * the proxy (issue #18): how many records are processed twice each way.
 *
 *   npm run verifiable-run -- [--records 200000] [--rate 5000] [--kill-every 6] [--consumers 3]
 *     [--protocols classic,consumer] [--membership static,dynamic] [--commit manual,auto]
 *     [--targets direct,proxy] [--store <url>] [--kafka-version 4.4.0] [--json <file>]
 *
 * For each combination of protocol, membership and commit mode, on each target: a fresh topic of
 * 6 partitions; Kafka's VerifiableProducer writes `records` at `rate` per second (directly to the
 * broker); `consumers` VerifiableConsumers (one group, a slot each; static members keep their
 * slot's group.instance.id) consume from the beginning. Every `kill-every` seconds one consumer,
 * in turn, is SIGKILLed and a replacement started at once; a consumer that exits by itself (a
 * fatal error, e.g. FENCED_INSTANCE_ID) is counted and replaced too, as a supervisor would. The
 * run ends when every record was consumed (or 120 s after the producer finished).
 *
 * Counted from the consumers' own JSON events: records consumed in all, distinct records (the
 * rest are duplicates), records never consumed, commits that failed and why, consumers that died
 * by themselves, and the uncommitted window: what each killed consumer had consumed beyond its
 * last successful commit, which its successor must read again. Duplicates beyond that window are
 * the fence's doing. Classic dynamic members get a 10 s session timeout and KIP-848 groups a 10 s
 * consumer.session.timeout.ms, so a killed dynamic member's partitions move on within the run.
 *
 * KOP_BOOTSTRAP=host:port uses that cluster instead of the bed's broker. Exit code 1 when, on the
 * proxy, a record was never consumed, a consumer died of a fencing error, or the duplicates exceed
 * the uncommitted window while the direct run's did not.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';
import { createTopics } from '../bed/clients/kafkajs.js';
import { FAST_JVM_FLAGS } from '../bed/clients/java.js';
import { KAFKA_VERSION, kafkaClasspath, startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { Conn, fetchOffsets, setGroupConfigs } from '../harness/group-members.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';

type Protocol = 'classic' | 'consumer';
type Membership = 'static' | 'dynamic';
type CommitMode = 'manual' | 'auto';
type TargetName = 'direct' | 'proxy';

export interface VerifiableRunOptions {
  records: number;
  rate: number;
  killEverySeconds: number;
  consumers: number;
  protocols: Protocol[];
  membership: Membership[];
  commit: CommitMode[];
  targets: TargetName[];
  store?: string;
  kafkaVersion: string;
  json?: string;
  /** A running cluster of kafkaVersion (else KOP_BOOTSTRAP, else the bed's broker is started). */
  bootstrap?: string;
}

export interface CaseResult {
  target: TargetName;
  protocol: Protocol;
  membership: Membership;
  commit: CommitMode;
  records: number;
  consumed: number;
  distinct: number;
  duplicates: number;
  missing: number;
  /** Records the killed consumers had consumed beyond their last successful commit. */
  uncommittedWindow: number;
  kills: number;
  /** Consumers that exited by themselves, with the last line of their error output. */
  deaths: string[];
  commitsOk: number;
  /** Failed commits by error. */
  commitErrors: Record<string, number>;
  seconds: number;
}

const PARTITIONS = 6;
const SESSION_MS = 10_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface ConsumedRange {
  partition: number;
  minOffset: number;
  maxOffset: number;
}

/**
 * A JSON event of Kafka's verifiable clients, or null for any other line; the tool's log goes to
 * stdout too, and a line of it that names an error is passed to `onErrorLine`.
 */
export function toolEvent(line: string, onErrorLine: (line: string) => void): Record<string, unknown> | null {
  if (!line.startsWith('{')) {
    if (/Exception|Error/.test(line)) onErrorLine(line);
    return null;
  }
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/** One consumer process and what it reported. */
class Consumer {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  killed = false;
  /** The partitions assigned to it now. */
  readonly owned = new Set<number>();
  /** Per partition: the highest offset it consumed. */
  readonly consumedTo = new Map<number, number>();
  private stderr = '';

  constructor(
    args: string[],
    classpath: string,
    private readonly onRange: (r: ConsumedRange) => void,
    private readonly onCommit: (ok: boolean, error: string | null) => void,
  ) {
    this.child = spawn(
      'java',
      [...FAST_JVM_FLAGS, '-cp', classpath, 'org.apache.kafka.tools.VerifiableConsumer', ...args],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr = (this.stderr + d.toString()).slice(-4000)));
    readline.createInterface({ input: this.child.stdout! }).on('line', (line) => this.event(line));
  }

  private event(line: string): void {
    const e = toolEvent(line, (log) => (this.stderr = (this.stderr + log + '\n').slice(-4000)));
    if (e === null) return;
    if (e['name'] === 'records_consumed') {
      for (const p of e['partitions'] as { partition: number; minOffset: number; maxOffset: number }[]) {
        this.onRange(p);
        this.consumedTo.set(p.partition, Math.max(this.consumedTo.get(p.partition) ?? -1, p.maxOffset));
      }
    } else if (e['name'] === 'partitions_assigned' || e['name'] === 'partitions_revoked') {
      for (const p of e['partitions'] as { partition: number }[])
        if (e['name'] === 'partitions_assigned') this.owned.add(p.partition);
        else this.owned.delete(p.partition);
    } else if (e['name'] === 'offsets_committed') {
      const ok = e['success'] === true;
      this.onCommit(ok, ok ? null : String(e['error'] ?? 'unknown'));
    }
  }

  /**
   * What it consumed of its partitions beyond the group's committed offsets (`committed`, -1:
   * none): what its successor must read again.
   */
  uncommitted(committed: bigint[]): number {
    let n = 0;
    for (const p of this.owned) {
      const from = Number(committed[p] ?? -1n);
      n += Math.max(0, (this.consumedTo.get(p) ?? -1) + 1 - Math.max(0, from));
    }
    return n;
  }

  lastError(): string {
    const lines = this.stderr.split('\n').filter((l) => /Exception|Error/.test(l));
    return (lines.at(-1) ?? this.stderr.split('\n').at(-2) ?? '').slice(0, 300);
  }
}

/** Kafka's VerifiableProducer (acks=all) to the broker itself: `records` records at `rate` per second. */
export function spawnVerifiableProducer(
  classpath: string,
  broker: string,
  topic: string,
  records: number,
  rate: number,
): ChildProcess {
  return spawn(
    'java',
    [
      ...FAST_JVM_FLAGS.filter((f) => !f.startsWith('-XX:TieredStopAtLevel')),
      '-cp',
      classpath,
      'org.apache.kafka.tools.VerifiableProducer',
      '--bootstrap-server',
      broker,
      '--topic',
      topic,
      '--max-messages',
      String(records),
      '--throughput',
      String(rate),
      '--acks',
      '-1',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

/** The VerifiableProducer, to the broker itself: `records` records at `rate` per second. */
async function produce(
  classpath: string,
  broker: string,
  topic: string,
  opts: VerifiableRunOptions,
): Promise<void> {
  const child = spawnVerifiableProducer(classpath, broker, topic, opts.records, opts.rate);
  let acked = 0;
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
  readline.createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line.includes('"producer_send_success"')) acked += 1;
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0 || acked !== opts.records)
    throw new Error(`VerifiableProducer: exit ${code}, ${acked}/${opts.records} acknowledged\n${err}`);
}

/** The group's committed offsets of every partition, as the target answers them. */
async function committedOffsets(bootstrap: string, group: string): Promise<bigint[]> {
  const conn = await Conn.open(bootstrap);
  try {
    const all = Array.from({ length: PARTITIONS }, (_, i) => i);
    return (await fetchOffsets(conn, group, group, all, undefined, 8)).offsets;
  } finally {
    conn.close();
  }
}

async function runCase(
  classpath: string,
  broker: string,
  bootstrap: string,
  target: TargetName,
  protocol: Protocol,
  membership: Membership,
  commit: CommitMode,
  opts: VerifiableRunOptions,
): Promise<CaseResult> {
  const t0 = Date.now();
  const tag = `vc-${target}-${protocol}-${membership}-${commit}-${Date.now().toString(36)}`;
  await createTopics({ bootstrap: broker }, [{ topic: tag, partitions: PARTITIONS, replicationFactor: 1 }]);
  if (protocol === 'consumer') {
    const admin = await Conn.open(broker);
    try {
      const code = await setGroupConfigs(admin, tag, {
        'consumer.session.timeout.ms': String(SESSION_MS),
        'consumer.heartbeat.interval.ms': '2000',
      });
      if (code !== 0) throw new Error(`group configs refused: ${code}`);
    } finally {
      admin.close();
    }
  }
  const seen = Array.from({ length: PARTITIONS }, () => new Uint8Array(opts.records));
  const result: CaseResult = {
    target,
    protocol,
    membership,
    commit,
    records: opts.records,
    consumed: 0,
    distinct: 0,
    duplicates: 0,
    missing: 0,
    uncommittedWindow: 0,
    kills: 0,
    deaths: [],
    commitsOk: 0,
    commitErrors: {},
    seconds: 0,
  };
  const onRange = (r: ConsumedRange) => {
    const bits = seen[r.partition]!;
    for (let o = r.minOffset; o <= r.maxOffset; o++) {
      result.consumed += 1;
      if (bits[o]) result.duplicates += 1;
      else {
        bits[o] = 1;
        result.distinct += 1;
      }
    }
  };
  const onCommit = (ok: boolean, error: string | null) => {
    if (ok) result.commitsOk += 1;
    else result.commitErrors[error!] = (result.commitErrors[error!] ?? 0) + 1;
  };
  const argsFor = (slot: number): string[] => [
    '--bootstrap-server',
    bootstrap,
    '--topic',
    tag,
    '--group-id',
    tag,
    '--group-protocol',
    protocol,
    '--reset-policy',
    'earliest',
    ...(protocol === 'classic' ? ['--session-timeout', String(SESSION_MS)] : []),
    ...(membership === 'static' ? ['--group-instance-id', `${tag}-slot-${slot}`] : []),
    ...(commit === 'auto' ? ['--enable-autocommit'] : []),
  ];
  let stopping = false;
  const slots: Consumer[] = [];
  const start = (slot: number): void => {
    const c = new Consumer(argsFor(slot), classpath, onRange, onCommit);
    slots[slot] = c;
    void c.exited.then(async (code) => {
      if (c.killed || stopping) return;
      result.deaths.push(`slot ${slot} exit ${code}: ${c.lastError()}`);
      await sleep(1000);
      if (!stopping && slots[slot] === c) start(slot);
    });
  };
  for (let i = 0; i < opts.consumers; i++) start(i);
  let producing = true;
  const producer = produce(classpath, broker, tag, opts).finally(() => (producing = false));
  const killer = (async () => {
    let next = 0;
    while (producing) {
      await sleep(opts.killEverySeconds * 1000);
      if (!producing) break;
      const slot = next++ % opts.consumers;
      const victim = slots[slot]!;
      victim.killed = true;
      victim.child.kill('SIGKILL');
      await victim.exited;
      result.kills += 1;
      result.uncommittedWindow += victim.uncommitted(await committedOffsets(bootstrap, tag));
      start(slot);
    }
  })();
  try {
    await producer;
    if (process.env['KOP_VR_DEBUG']) console.log(`produced at ${Math.round((Date.now() - t0) / 1000)} s`);
    await killer;
    const deadline = Date.now() + 120_000;
    while (result.distinct < opts.records && Date.now() < deadline) await sleep(500);
    if (process.env['KOP_VR_DEBUG'])
      console.log(`consumed ${result.distinct} at ${Math.round((Date.now() - t0) / 1000)} s`);
  } finally {
    stopping = true;
    for (const c of slots) c.child.kill('SIGTERM');
    await Promise.all(
      slots.map((c) => Promise.race([c.exited, sleep(15_000).then(() => c.child.kill('SIGKILL'))])),
    );
  }
  result.missing = opts.records - result.distinct;
  result.seconds = Math.round((Date.now() - t0) / 1000);
  return result;
}

function parseList<T extends string>(value: string, allowed: readonly T[], name: string): T[] {
  const items = value.split(',') as T[];
  for (const i of items) if (!allowed.includes(i)) throw new Error(`${name}: ${i}? (${allowed.join(', ')})`);
  return items;
}

function parseArgs(argv: string[]): VerifiableRunOptions {
  const opts: VerifiableRunOptions = {
    records: 200_000,
    rate: 5000,
    killEverySeconds: 6,
    consumers: 3,
    protocols: ['classic', 'consumer'],
    membership: ['static', 'dynamic'],
    commit: ['manual', 'auto'],
    targets: ['direct', 'proxy'],
    kafkaVersion: KAFKA_VERSION,
  };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i]!;
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    const num = () => {
      const n = Number(value);
      if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag}: ${value}?`);
      return n;
    };
    if (flag === '--records') opts.records = num();
    else if (flag === '--rate') opts.rate = num();
    else if (flag === '--kill-every') opts.killEverySeconds = num();
    else if (flag === '--consumers') opts.consumers = num();
    else if (flag === '--protocols') opts.protocols = parseList(value, ['classic', 'consumer'], flag);
    else if (flag === '--membership') opts.membership = parseList(value, ['static', 'dynamic'], flag);
    else if (flag === '--commit') opts.commit = parseList(value, ['manual', 'auto'], flag);
    else if (flag === '--targets') opts.targets = parseList(value, ['direct', 'proxy'], flag);
    else if (flag === '--store') opts.store = value;
    else if (flag === '--kafka-version') opts.kafkaVersion = value;
    else if (flag === '--json') opts.json = value;
    else throw new Error(`unknown argument ${flag}`);
  }
  return opts;
}

/** Runs every combination on every target; the results in the order run. */
export async function verifiableRun(
  opts: VerifiableRunOptions,
  log: (line: string) => void = console.log,
): Promise<CaseResult[]> {
  let kafka: KafkaCluster | undefined;
  let proxy: ProxyProcess | undefined;
  const results: CaseResult[] = [];
  try {
    const external = opts.bootstrap ?? process.env['KOP_BOOTSTRAP'];
    const broker = external ?? (kafka = await startKafka({ version: opts.kafkaVersion })).bootstrap;
    const classpath = await kafkaClasspath(opts.kafkaVersion);
    if (opts.targets.includes('proxy')) {
      await ensureBuilt();
      proxy = await spawnProxy([
        '--bootstrap-server',
        broker,
        ...(opts.store ? ['--store', opts.store] : []),
      ]);
    }
    for (const protocol of opts.protocols)
      for (const membership of opts.membership)
        for (const commit of opts.commit)
          for (const target of opts.targets) {
            const bootstrap = target === 'direct' ? broker : proxy!.bootstrap;
            const r = await runCase(classpath, broker, bootstrap, target, protocol, membership, commit, opts);
            results.push(r);
            log(formatRow(r));
          }
    return results;
  } finally {
    await proxy?.stop();
    await kafka?.stop();
  }
}

export const HEADER =
  '| protocol | members | commit | target | kills | consumed | duplicates | uncommitted window | missing | died | failed commits |\n' +
  '|---|---|---|---|---:|---:|---:|---:|---:|---:|---|';

export function formatRow(r: CaseResult): string {
  const errors = Object.entries(r.commitErrors)
    .map(([e, n]) => `${n} ${e}`)
    .join(', ');
  return `| ${r.protocol} | ${r.membership} | ${r.commit} | ${r.target} | ${r.kills} | ${r.consumed} | ${r.duplicates} | ${r.uncommittedWindow} | ${r.missing} | ${r.deaths.length} | ${errors || '0'} |`;
}

/** Proxy runs worse than the direct run of the same case (see the file's comment). */
export function proxyFailures(results: CaseResult[]): string[] {
  const failures: string[] = [];
  for (const r of results.filter((x) => x.target === 'proxy')) {
    const name = `${r.protocol} ${r.membership} ${r.commit}`;
    const direct = results.find(
      (d) =>
        d.target === 'direct' &&
        d.protocol === r.protocol &&
        d.membership === r.membership &&
        d.commit === r.commit,
    );
    if (r.missing > 0) failures.push(`${name}: ${r.missing} records never consumed`);
    // Deaths happen directly too (a KIP-848 static member's replacement that starts before the
    // broker released its instance gets UNRELEASED_INSTANCE_ID, fatal to the client); a fence's
    // refusal of a live member is the proxy's own.
    const fenced = r.deaths.filter((d) => /FencedInstanceId|FENCED_INSTANCE_ID|fenced/i.test(d));
    if (fenced.length > 0) failures.push(`${name}: consumers fenced to death: ${fenced.join('; ')}`);
    if (r.duplicates > r.uncommittedWindow && (!direct || direct.duplicates <= direct.uncommittedWindow))
      failures.push(
        `${name}: ${r.duplicates} duplicates, beyond the uncommitted window of ${r.uncommittedWindow}`,
      );
  }
  return failures;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const opts = parseArgs(process.argv.slice(2));
  console.log(HEADER);
  verifiableRun(opts).then(
    (results) => {
      for (const r of results)
        for (const d of r.deaths) console.log(`${r.target} ${r.protocol} ${r.membership} ${r.commit}: ${d}`);
      if (opts.json) writeFileSync(opts.json, JSON.stringify(results, null, 2));
      const failures = proxyFailures(results);
      for (const f of failures) console.log(`FAIL ${f}`);
      process.exit(failures.length > 0 ? 1 : 0);
    },
    (err: unknown) => {
      console.error(err);
      process.exit(2);
    },
  );
}
