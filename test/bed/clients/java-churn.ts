// A churning KIP-848 consumer group with the official Java client, after franz-go's ETL group
// tests: test/bed/java/ChurnDriver.java, many members (threads of one JVM) joining and leaving in
// waves while records are produced, committing by auto-commit, commitAsync and commitSync at once.

import { assertSucceeded } from './run.js';
import { CHURN_DRIVER, programRunner, single } from './java.js';
import type { ClientTarget, CommittedAtEnds } from './types.js';

export interface ChurnOptions {
  topic: string;
  group: string;
  /** Produced evenly over the waves. */
  records: number;
  /** Member slots (default 8). */
  slots?: number;
  /** Waves of joins and leaves (default 6), each `waveMs` long (default 4000). */
  waves?: number;
  waveMs?: number;
  /** auto.commit.interval.ms (default 100). */
  autoCommitMs?: number;
  timeoutMs?: number;
}

/** `committed` and `ends`: of every partition written. */
export interface ChurnResult extends CommittedAtEnds {
  produced: number;
  /** Distinct records processed (by any member). */
  processed: number;
  /** Members that joined, over all slots and waves. */
  members: number;
  timedOut: boolean;
  /** Commits that failed as the client saw them, by "how:Exception" (how: async, sync, revoke). */
  commitFailures: Record<string, number>;
}

export type JavaChurn = (target: ClientTarget, opts: ChurnOptions) => Promise<ChurnResult>;

export async function javaChurnClient(bedClasspath: string): Promise<JavaChurn> {
  const run = await programRunner(bedClasspath, CHURN_DRIVER);
  return async (target, o) => {
    const timeoutMs = o.timeoutMs ?? 120_000;
    const args = ['churn', '--topic', o.topic, '--group', o.group, '--protocol', 'consumer'];
    args.push('--records', String(o.records), '--slots', String(o.slots ?? 8));
    args.push('--waves', String(o.waves ?? 6), '--wave-ms', String(o.waveMs ?? 4000));
    args.push('--auto-commit-ms', String(o.autoCommitMs ?? 100), '--timeout-ms', String(timeoutMs));
    // Room to start the JVM, close every member and read the committed offsets.
    const { lines, result } = await run(target, args, timeoutMs + 60_000);
    assertSucceeded(`ChurnDriver churn ${o.group}`, result);
    const { type: _t, ...done } = single(lines, 'done', 'churn');
    return done as unknown as ChurnResult;
  };
}
