// Differential runs of the commit guard: one scripted sequence of group requests, sent by raw
// protocol members to several targets at once (the broker itself, and the proxy on each store),
// each in its own group, in lockstep: every step runs on every target before the next begins. The
// broker's answers to every OffsetCommit and OffsetFetch (and to the group requests, whose
// differences would mean the runs drifted apart) must be the same on every target, and so must the
// committed offsets at the end.
//
// Timing is part of the script. A broker's group timers (session timeouts, the join phase's
// rebalance timeout, the wait for SyncGroup) fire by the clock, so the executor decides everything
// that depends on time once, for all targets: it inserts heartbeat ticks for the live members
// (their sessions never lapse by accident), waits out a crashed member's session as one step, and
// settles the group (a full rebalance of the live members) before a pending timer could fire
// between two steps. The state a step meets is then the same on every target.
//
// The script language and its generators are in guard-scripts.ts, one target's run in
// guard-target-run.ts; this module runs a script on every target and compares the answers.
import { describe } from './guard-scripts.js';
import type { AnyStep, Env, Protocol, Script, Step, Target, Trace } from './guard-scripts.js';
import { Run, sleep } from './guard-target-run.js';

// The script language, for the callers of runScript and expectSameAnswers.
export { DEFAULT_TIMING, scriptArb } from './guard-scripts.js';
export type { As, Env, Parts, Protocol, Script, Step, Target } from './guard-scripts.js';

/**
 * Steps after which a broker timer is pending that a later step must not meet firing: a join
 * phase or a wait for SyncGroup (classic, the rebalance timeout), a static member that left or was
 * replaced without leaving (KIP-848, the session timeout).
 */
const UNSETTLING: Record<Protocol, ReadonlySet<Step['op']>> = {
  classic: new Set(['leave', 'removeInstance', 'restart', 'joinOnly']),
  consumer: new Set(['leave', 'restart']),
};

export interface RunResult {
  /** Per target: the answers, one line per traced step, the last the committed offsets. */
  traces: Map<string, Trace>;
  /** Per target: the broker's view of the group after each traced step. */
  states: Map<string, string[]>;
}

/** Runs the script on every target in lockstep. */
export async function runScript(
  targets: Target[],
  script: Script,
  env: Env,
  label: string,
): Promise<RunResult> {
  const prefix = `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const runs = targets.map((t) => new Run(t, `${prefix}-${t.name}`, script, env, prefix));
  const t = env.timing;
  const classic = script.protocol === 'classic';
  const tickEvery = classic ? t.sessionMs / 5 : Math.min(t.heartbeatIntervalMs, t.sessionMs / 5);
  /**
   * One step on every target. A classic target done before the others keeps its live members'
   * sessions up meanwhile (a heartbeat changes nothing else); a KIP-848 one does not, since a
   * heartbeat may move a member's epoch: its session timeout is long against any step.
   */
  const all = async (step: AnyStep, record = true): Promise<void> => {
    const steps = runs.map((r) => r.step(step, record));
    const done = Promise.all(steps).then(() => true);
    await Promise.all(
      steps.map(async (own, i) => {
        await own;
        while (classic && !(await Promise.race([done, sleep(tickEvery).then(() => false)])))
          await runs[i]!.keepAlive();
      }),
    );
  };
  // How long a pending timer is certain not to fire (it fires a rebalance or session timeout later).
  const settleWithin = (classic ? t.rebalanceMs : t.sessionMs) * 0.5;
  /** Lets the broker's timers run out, the live members heartbeating (and rejoining) meanwhile. */
  const waitOut = async () => {
    const until = Date.now() + t.sessionMs + t.rebalanceMs + 500;
    while (Date.now() < until) {
      await sleep(tickEvery);
      await all({ op: 'watch' }, false);
    }
    await all({ op: 'settle' });
  };
  try {
    await Promise.all(runs.map((r) => r.open()));
    // Everyone in the group first.
    if (classic) await all({ op: 'rebalance' });
    else for (let i = 0; i < 2; i++) await all({ op: 'tick' });
    let lastTick = Date.now();
    let unsettledSince: number | null = null;
    for (const step of script.steps) {
      if (unsettledSince !== null && Date.now() - unsettledSince > settleWithin) {
        if (classic) await all({ op: 'settle' });
        else await waitOut();
        unsettledSince = null;
        lastTick = Date.now();
      }
      if (Date.now() - lastTick >= tickEvery) {
        await all({ op: 'tick' });
        lastTick = Date.now();
      }
      await all(step);
      if (step.op === 'crash') {
        await waitOut();
        lastTick = Date.now();
        unsettledSince = null;
      } else if (step.op === 'rebalance') {
        unsettledSince = null;
      } else if (UNSETTLING[script.protocol].has(step.op) && unsettledSince === null) {
        unsettledSince = Date.now();
      }
    }
    const traces = new Map<string, Trace>();
    for (const r of runs) traces.set(r.target.name, [...r.trace, `committed → ${await r.committed()}`]);
    return { traces, states: new Map(runs.map((r) => [r.target.name, r.states])) };
  } finally {
    for (const r of runs) r.close();
  }
}

export interface Comparison {
  /**
   * same: every target answered as the broker. differ: a target answered otherwise while the
   * broker's own view of every group had been the same so far: the guard decided differently.
   * drift: the groups themselves went apart first (a timer fired between two steps on one target
   * only: the machine was too slow for the script's timing), so the run proves nothing.
   */
  verdict: 'same' | 'differ' | 'drift';
  report: string;
}

export function compareRuns(script: Script, result: RunResult): Comparison {
  const entries = [...result.traces.entries()];
  const [refName, ref] = entries[0]!;
  const refStates = result.states.get(refName)!;
  let verdict: Comparison['verdict'] = 'same';
  const notes: string[] = [];
  for (const [name, trace] of entries.slice(1)) {
    const states = result.states.get(name)!;
    const n = Math.max(ref.length, trace.length);
    for (let i = 0; i < n; i++) {
      const driftedAt = states.slice(0, i + 1).findIndex((st, j) => st !== refStates[j]);
      if (ref[i] === trace[i] && driftedAt < 0) continue;
      if (driftedAt >= 0) {
        notes.push(
          `${name} drifted at line ${driftedAt + 1}: broker says ${states[driftedAt]} there, ${refStates[driftedAt]} for ${refName}`,
        );
        if (verdict === 'same') verdict = 'drift';
      } else {
        notes.push(`${name} differs at line ${i + 1}:\n  ${refName}: ${ref[i]}\n  ${name}: ${trace[i]}`);
        verdict = 'differ';
      }
      break;
    }
  }
  const report = [
    `script (${script.protocol}, static: [${script.statics.join(',')}]):`,
    ...script.steps.map((st) => `  ${describe(st)}`),
    ...notes,
    ...entries.flatMap(([name, trace]) => [
      `${name}:`,
      ...trace.map(
        (l, i) => `  ${l}${result.states.get(name)?.[i] ? `   [${result.states.get(name)![i]}]` : ''}`,
      ),
    ]),
  ].join('\n');
  return { verdict, report };
}

/**
 * Runs the script until it is conclusive (a drifted run is run again, at most `attempts` times)
 * and throws with the report when a target answered otherwise than the broker.
 */
export async function expectSameAnswers(
  targets: Target[],
  script: Script,
  env: Env,
  label: string,
  attempts = 3,
): Promise<void> {
  let last: Comparison | null = null;
  for (let i = 0; i < attempts; i++) {
    last = compareRuns(script, await runScript(targets, script, env, label));
    if (last.verdict === 'same') return;
    if (last.verdict === 'differ')
      throw new Error(`the proxy answered otherwise than the broker\n${last.report}`);
  }
  throw new Error(`the groups drifted apart on every attempt (timing): inconclusive\n${last?.report ?? ''}`);
}
