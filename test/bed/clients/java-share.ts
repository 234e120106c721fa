// Share groups (KIP-932) with the official Java client: KafkaShareConsumer, through
// test/bed/java/ShareDriver.java run as a child process. Kafka 4.x client jars only.

import { assertSucceeded } from './run.js';
import { programRunner, SHARE_DRIVER, single } from './java.js';
import type { ClientTarget } from './types.js';

/**
 * How each delivery is acknowledged: implicitly (by the next poll), or explicitly: accept every
 * record; `cycle` (record i: i%3==0 accepted, 1 released on its first delivery and accepted on a
 * later one, 2 rejected); release every delivery (the broker archives a record at its delivery
 * count limit).
 */
export type ShareAck = 'implicit' | 'accept' | 'cycle' | 'release';

export interface ShareConsumeOptions {
  topic: string;
  group: string;
  /** Share consumers, each its own member on its own connections (threads of one JVM). Default 1. */
  consumers?: number;
  ack?: ShareAck;
  /** Stop once this many records were delivered in all (after quietMs more). */
  expectDeliveries?: number;
  /** Or once this many distinct keys were delivered (records delivered again count once). */
  expectDistinct?: number;
  /** How long to go on polling after expectDeliveries, to see any delivery that should not come. */
  quietMs?: number;
  timeoutMs?: number;
  /** The first consumer to get records reports them and SIGKILLs its own JVM without acknowledging. */
  sigkillWhenAcquired?: boolean;
}

export interface ShareDelivery {
  consumer: number;
  topic: string;
  partition: number;
  offset: number;
  key: string;
  value: string;
  deliveryCount: number;
  /** ACCEPT, RELEASE, REJECT, implicit, or held (by a consumer about to be killed). */
  ack: string;
}

export interface ShareConsumeResult {
  deliveries: ShareDelivery[];
  timedOut: boolean;
  /** The JVM killed itself (sigkillWhenAcquired). */
  killed: boolean;
}

export interface JavaShareClient {
  consume(target: ClientTarget, opts: ShareConsumeOptions): Promise<ShareConsumeResult>;
  /** Sets configs of a group (incrementalAlterConfigs on the GROUP resource). */
  configureGroup(target: ClientTarget, group: string, configs: Record<string, string>): Promise<void>;
}

export async function javaShareClient(bedClasspath: string): Promise<JavaShareClient> {
  const run = await programRunner(bedClasspath, SHARE_DRIVER);
  return {
    async consume(target, o) {
      const timeoutMs = o.timeoutMs ?? 60_000;
      const args = ['consume', '--topic', o.topic, '--group', o.group];
      args.push('--consumers', String(o.consumers ?? 1), '--ack', o.ack ?? 'implicit');
      if (o.expectDeliveries !== undefined) args.push('--expect-deliveries', String(o.expectDeliveries));
      if (o.expectDistinct !== undefined) args.push('--expect-distinct', String(o.expectDistinct));
      args.push('--quiet-ms', String(o.quietMs ?? 0));
      args.push('--timeout-ms', String(timeoutMs));
      if (o.sigkillWhenAcquired) args.push('--sigkill-when-acquired');
      // Room to start the JVM, join the group and commit the last acknowledgements.
      const { lines, result } = await run(target, args, timeoutMs + 45_000);
      const killed = o.sigkillWhenAcquired === true && result.signal === 'SIGKILL';
      if (!killed) assertSucceeded(`ShareDriver consume ${o.group}`, result);
      const deliveries = lines
        .filter((l) => l['type'] === 'record')
        .map(({ type: _t, ...d }) => d as unknown as ShareDelivery);
      const done = killed ? { timedOut: false } : single(lines, 'done', 'share consume');
      return { deliveries, timedOut: done['timedOut'] === true, killed };
    },

    async configureGroup(target, group, configs) {
      const pairs = Object.entries(configs).map(([k, v]) => `${k}=${v}`);
      const { lines, result } = await run(target, [
        'group-config',
        '--group',
        group,
        '--configs',
        pairs.join(','),
      ]);
      assertSucceeded(`ShareDriver group-config ${group}`, result);
      single(lines, 'configured', 'group-config');
    },
  };
}
