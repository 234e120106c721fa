/**
 * Runs one scheduled fault of the chaos run from its start to its end: injects it, waits its
 * duration, undoes it and waits until the component is back (a restarted broker or proxy
 * listening again), recording when each happened on the run's clock. Faults overlap: each runs as
 * its own task.
 */
import { execFileSync } from 'node:child_process';
import type { KafkaCluster } from '../bed/kafka.js';
import type { ChaosProxy } from './chaos-proxy.js';
import type { ScheduledFault } from './chaos-schedule.js';
import type { ChaosStore } from './chaos-stores.js';
import { sleep } from './commit-checker.js';

export interface FaultRecord extends Omit<ScheduledFault, 'kind'> {
  /** An injected kind, or a fault the store made on its own and the run observed (chaos-store-events.ts). */
  kind: ScheduledFault['kind'] | 'sentinel-failover' | 'sentinel-demotion';
  /** When it was injected and when the component was back, on the run's clock (s). */
  startedS: number;
  endedS: number;
  /** What happened (the process killed, the failover's answer, an error of the injection). */
  note: string;
}

export interface FaultEnv {
  proxies: ChaosProxy[];
  kafka: Pick<KafkaCluster, 'brokers' | 'startBroker'>;
  store: ChaosStore;
  /** Seconds since the start of the measured run. */
  clock(): number;
}

/** The pid listening on a local TCP port (`ss`), or undefined. */
export function pidOnPort(port: number): number | undefined {
  try {
    const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
    const m = /pid=(\d+)/.exec(out);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Faults running now, by kind and target: one that is due while its like still runs is skipped. */
const running = new Set<string>();

/**
 * Injects `f`, holds it for its duration, ends it; never throws (an error goes into the note). A
 * fault whose like still runs (a broker restart can take longer than the schedule allowed for) is
 * skipped and says so.
 */
export async function runFault(f: ScheduledFault, env: FaultEnv): Promise<FaultRecord> {
  const record: FaultRecord = { ...f, startedS: env.clock(), endedS: NaN, note: '' };
  const key = `${f.kind}/${f.target}`;
  if (running.has(key)) {
    record.endedS = record.startedS;
    record.note = 'skipped: the previous one of its kind still runs';
    return record;
  }
  running.add(key);
  const hold = () => sleep(f.durationS * 1000);
  try {
    switch (f.kind) {
      case 'proxy-kill': {
        const proxy = env.proxies[f.target]!;
        await proxy.kill();
        await hold();
        await proxy.restart();
        record.note = `${proxy.name} SIGKILLed, restarted`;
        break;
      }
      case 'broker-kill': {
        const broker = env.kafka.brokers[0]!;
        const pid = pidOnPort(broker.port);
        if (pid === undefined) throw new Error(`no process listens on broker port ${broker.port}`);
        process.kill(pid, 'SIGKILL');
        await hold();
        await env.kafka.startBroker(broker.nodeId);
        record.note = `broker ${broker.nodeId} (pid ${pid}) SIGKILLed, restarted`;
        break;
      }
      case 'store-kill': {
        const restart = await env.store.kill();
        await hold();
        await restart();
        record.note = 'SIGKILL, restarted on its data';
        break;
      }
      case 'store-stop': {
        const thaw = await env.store.freeze();
        await hold();
        thaw();
        record.note = 'SIGSTOP, SIGCONT';
        break;
      }
      case 'store-partition': {
        for (const r of env.store.relays) r.freeze();
        await hold();
        const held = env.store.relays.reduce((n, r) => n + r.pendingBytes(), 0);
        for (const r of env.store.relays) r.thaw();
        record.note = `relays frozen, then ${held} held bytes delivered`;
        break;
      }
      case 'store-drop': {
        for (const r of env.store.relays) {
          r.refusing = true;
          r.drop();
        }
        await hold();
        for (const r of env.store.relays) r.refusing = false;
        record.note = 'connections reset, new ones refused';
        break;
      }
      case 'store-failover': {
        const answer = await env.store.failover!();
        await hold();
        record.note = `failover: ${answer}`;
        break;
      }
      case 'store-node-cut': {
        const { relay, port } = await env.store.masterRelay!();
        relay.freeze();
        await hold();
        const held = relay.pendingBytes();
        relay.thaw();
        record.note = `the network to the master :${port} frozen, then ${held} held bytes delivered`;
        break;
      }
      case 'store-split': {
        const { split, heal } = await env.store.split!();
        await hold();
        heal();
        record.note = `the ensemble split ${split} (the leader alone), then healed`;
        break;
      }
      case 'disk-full': {
        const free = env.store.fillDisk!();
        await hold();
        free();
        record.note = 'tmpfs filled, then freed';
        break;
      }
      case 'disk-stall': {
        const release = env.store.stallDisk!();
        await hold();
        release();
        record.note = 'writes stalled, then released';
        break;
      }
    }
  } catch (err) {
    record.note += ` injection error: ${(err as Error).message.split('\n')[0]}`;
  } finally {
    running.delete(key);
  }
  record.endedS = env.clock();
  return record;
}
