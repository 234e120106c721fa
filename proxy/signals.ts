/**
 * What each signal does to the proxy process (docs/deploy.md, "Signals"):
 *
 * - SIGTERM, SIGINT: graceful shutdown (the caller's `stop`). A second one ends the process at
 *   once by the signal itself: process.exit() waits for libuv's thread pool, so a thread stuck in
 *   a DNS lookup or a file system call held a "second signal: exiting now" process alive for
 *   seconds; dying of the signal's default action does not wait for anything.
 * - SIGHUP: reload what can be reloaded without a restart (the caller's `reload`), and log what
 *   was; never ends the process (its default action would, at once and without a word).
 * - SIGUSR1: ignored with a log line. Node.js opens its inspector on SIGUSR1 unless the process
 *   listens for it, and an inspector in the process that holds the store password and the admin
 *   token is a way in for anyone who can signal it (bin/kafka-offset-proxy.js listens from its
 *   first line, before this module is loaded).
 * - SIGUSR2, SIGQUIT: ignored with a log line (their default actions end the process at once);
 *   SIGTERM is the way to stop it.
 */
import type { Logger } from './common/log.js';

export type StopSignal = 'SIGTERM' | 'SIGINT';

export interface SignalActions {
  /** Graceful shutdown; until set (the proxy still starting), a stop signal ends the process at once. */
  stop?: (signal: StopSignal) => void;
  /** Reloads and returns the fields of the one log line that says what was reloaded. */
  reload?: () => Promise<ReloadOutcome>;
}

export interface ReloadOutcome {
  /** info: something was reloaded or nothing changed; warn: refused, or nothing can be reloaded. */
  level: 'info' | 'warn';
  event: string;
  fields: Record<string, unknown>;
  /** Applied once the line is logged (a new log level). */
  after?: (() => void) | undefined;
}

const IGNORED = ['SIGUSR1', 'SIGUSR2', 'SIGQUIT'] as const;

/** Installs the proxy's signal handling; `actions` may be completed later (they are read at each signal). */
export function handleSignals(log: Logger, actions: SignalActions): void {
  let stopping = false;
  const onStop = (signal: StopSignal): void => {
    if (stopping || actions.stop === undefined) {
      log.warn(stopping ? 'second signal: exiting now' : 'signal while starting: exiting now', { signal });
      exitBySignal(signal);
    }
    stopping = true;
    actions.stop!(signal);
  };
  process.on('SIGTERM', () => onStop('SIGTERM'));
  process.on('SIGINT', () => onStop('SIGINT'));

  let reloading: Promise<void> | null = null;
  process.on('SIGHUP', () => {
    if (stopping) {
      log.info('signal ignored: shutting down', { signal: 'SIGHUP' });
      return;
    }
    if (actions.reload === undefined) {
      log.warn('signal ignored: still starting, nothing to reload yet', { signal: 'SIGHUP' });
      return;
    }
    if (reloading !== null) {
      log.info('signal ignored: a reload is running', { signal: 'SIGHUP' });
      return;
    }
    const reload = actions.reload;
    reloading = reload()
      .then(
        (outcome) => {
          log[outcome.level](outcome.event, { signal: 'SIGHUP', ...outcome.fields });
          outcome.after?.();
        },
        (err: unknown) => log.error('reload failed', { signal: 'SIGHUP', error: err }),
      )
      .finally(() => (reloading = null));
  });

  for (const signal of IGNORED) {
    process.on(signal, () =>
      log.warn('signal ignored', {
        signal,
        hint:
          signal === 'SIGUSR1'
            ? 'the Node.js inspector is not opened by a signal'
            : 'SIGTERM stops the proxy, SIGHUP reloads its configuration',
      }),
    );
  }
}

/**
 * process.exit(code), with SIGTERM and SIGINT back at their default actions first: process.exit
 * waits for libuv's thread pool (a DNS lookup or file system call that hangs holds it), and
 * JavaScript no longer runs while it waits, so a signal then must end the process by itself.
 */
export function exitProcess(code: number): never {
  process.removeAllListeners('SIGTERM');
  process.removeAllListeners('SIGINT');
  process.exit(code);
}

/**
 * Ends the process now with the signal's default action (the exit status says it was the
 * signal), without process.exit's wait for the thread pool.
 */
export function exitBySignal(signal: NodeJS.Signals): never {
  process.removeAllListeners(signal);
  process.kill(process.pid, signal);
  // Still here: PID 1 of a container ignores a signal it does not handle, even from itself.
  process.exit(1);
}
