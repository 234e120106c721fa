/**
 * What the chaos run's /readyz polls of a proxy say, kept apart by what they measure:
 * - unready: the proxy answered 503 (it says it cannot serve: the store, the broker), or nothing
 *   listens on its port (the process is down: connection refused or reset). The verdict "never
 *   unready longer than the fault" is about these.
 * - unanswered: the probe got no answer within its timeout. At load average 32-50 that happened
 *   from the first seconds of a run, before any fault: the proxy's HTTP answer waited for a core,
 *   as everything did. It says nothing about readiness, so it is reported (a hung proxy shows in
 *   the load's failed requests and the consumers' missing records), never counted as unready.
 */

/**
 * An interval on the run's clock (s), with the reasons seen in it in order, each once (a 503 that
 * starts with one failure can go on for another: the first alone hid why a proxy stayed unready).
 */
export interface UnreadyInterval {
  fromS: number;
  toS: number;
  reason: string;
}

/** At most this much text of reasons per interval. */
const REASONS_LIMIT = 2000;

export type ProbeOutcome =
  | { state: 'ready' }
  /** A 503 (its body) or a refused/reset connection ("not listening: ECONNREFUSED"). */
  | { state: 'unready'; reason: string }
  /** No answer within the probe's timeout. */
  | { state: 'unanswered' };

/**
 * Probes in the order they were sent, each with when it was sent and when it ended, folded into
 * intervals. An interval ends where the last probe that saw it ended; an unanswered probe ends an
 * unready interval (what the proxy said while it was not answering is unknown).
 */
export class ReadinessTrack {
  readonly unready: UnreadyInterval[] = [];
  readonly unanswered: UnreadyInterval[] = [];
  /** When a probe first came back 200 (the warm-up's "ready once"), null: not yet. */
  firstReadyS: number | null = null;
  private openUnready: UnreadyInterval | null = null;
  private openUnanswered: UnreadyInterval | null = null;

  record(sentS: number, endedS: number, outcome: ProbeOutcome): void {
    if (outcome.state === 'unanswered') {
      this.openUnready = null;
      this.openUnanswered = extend(this.unanswered, this.openUnanswered, sentS, endedS, 'no answer in time');
      return;
    }
    // An answer: a stretch without answers ends where this probe was sent.
    if (this.openUnanswered !== null) this.openUnanswered.toS = sentS;
    this.openUnanswered = null;
    if (outcome.state === 'unready') {
      this.openUnready = extend(this.unready, this.openUnready, sentS, endedS, outcome.reason);
    } else {
      this.firstReadyS ??= endedS;
      if (this.openUnready !== null) this.openUnready.toS = sentS;
      this.openUnready = null;
    }
  }
}

function extend(
  list: UnreadyInterval[],
  open: UnreadyInterval | null,
  sentS: number,
  endedS: number,
  reason: string,
): UnreadyInterval {
  if (open !== null) {
    open.toS = endedS;
    const seen = open.reason.split(' | then: ');
    if (!seen.includes(reason) && open.reason.length < REASONS_LIMIT) open.reason += ` | then: ${reason}`;
    return open;
  }
  const fresh = { fromS: sentS, toS: endedS, reason };
  list.push(fresh);
  return fresh;
}

/** What a /readyz fetch came to: its answer, or why there was none. */
export async function probeReadyz(url: string, timeoutMs: number): Promise<ProbeOutcome> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (res.status === 200) {
      await res.body?.cancel();
      return { state: 'ready' };
    }
    return {
      state: 'unready',
      // Timings left out, so one failure going on reads as one reason.
      reason: `${res.status} ${(await res.text())
        .replace(/"ms":\d+,?/g, '')
        .replace(/failed \d+ ms ago/g, 'failed lately')
        .slice(0, 400)
        .replace(/\s+/g, ' ')}`,
    };
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') return { state: 'unanswered' };
    const cause = (err as { cause?: { code?: string } }).cause;
    return { state: 'unready', reason: `not listening: ${cause?.code ?? (err as Error).message}` };
  }
}
