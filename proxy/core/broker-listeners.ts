/**
 * The proxy's listener per broker: opened on first need (a broker named in an answer, or found at
 * start), once per broker however many answers name it at once; a port that cannot be bound is
 * logged once, reported by readiness (problems()) and tried again every BIND_RETRY_MS until it
 * binds. The bootstrap listener is the server's own (server.ts): it must bind at start or the
 * proxy exits.
 */
import type net from 'node:net';
import type { Logger } from '../common/log.js';
import type { HostPort } from './broker-map.js';

/** How often a broker port that could not be bound is tried again. */
export const BIND_RETRY_MS = 5000;

/** A listener that could not be bound: which port, why, and the option that chose the port. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  constructor(
    /** The option that set the port: `listen` (bootstrap, or listen port + 1 + node id) or `broker-port`. */
    readonly option: 'listen' | 'broker-port',
    readonly address: HostPort,
    /** null: the bootstrap listener. */
    readonly nodeId: number | null,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(
      `${nodeId === null ? 'the bootstrap port' : `broker ${nodeId}'s port`} ${address.host}:${address.port}` +
        `${nodeId !== null && option === 'listen' ? ' (the --listen port + 1 + node id)' : ''} cannot be bound: ${reason}`,
      options,
    );
  }
}

/** Why a listen failed, in words (with the code), not Node's message. */
export function bindProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  const reasons: Record<string, string> = {
    EADDRINUSE: 'address already in use',
    EACCES: 'permission denied (ports below 1024 need privileges)',
    EADDRNOTAVAIL: 'the address is not one of this machine',
    ENOTFOUND: 'the host name is not known',
    EAI_AGAIN: 'the host name could not be resolved',
  };
  if (code !== undefined && reasons[code] !== undefined) return `${reasons[code]} (${code})`;
  return code ?? (err instanceof Error ? err.message : String(err));
}

/** `server` listening on host:port; rejects with the listen error. */
export function listen(server: net.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
}

export interface BrokerListenersDeps {
  /** The host every listener binds. */
  host: string;
  /** The local port of a broker's listener. */
  localPort(nodeId: number): number;
  /** Which option chose that port (for the error's words). */
  option(nodeId: number): 'listen' | 'broker-port';
  /** A new, unbound server for a broker's clients. */
  create(nodeId: number): net.Server;
  /** Told of each listener once it is bound (the server keeps them to close and re-key them). */
  bound(nodeId: number, server: net.Server): void;
  log: Logger;
}

export class BrokerListeners {
  private readonly listening = new Map<number, Promise<void>>();
  /** Brokers whose listener is bound now (exposeBroker's synchronous check). */
  private readonly listeningNow = new Set<number>();
  /** Brokers whose listener could not be bound, with why: retried, and reported by readiness. */
  private readonly unbound = new Map<number, ListenError>();
  private retry: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly deps: BrokerListenersDeps) {}

  /** Whether the broker's listener is bound now. */
  isListening(nodeId: number): boolean {
    return this.listeningNow.has(nodeId);
  }

  /** Listeners that should be open and are not, one line each (empty when all are bound). */
  problems(): string[] {
    return [...this.unbound.values()].map((e) => e.message);
  }

  /** Resolves once the broker's listener is bound; rejects with a ListenError (retried meanwhile). */
  ensure(nodeId: number): Promise<void> {
    let ready = this.listening.get(nodeId);
    if (!ready) {
      const server = this.deps.create(nodeId);
      const port = this.deps.localPort(nodeId);
      const address = { host: this.deps.host, port };
      ready = listen(server, address.host, port).then(
        () => {
          this.deps.bound(nodeId, server);
          this.listeningNow.add(nodeId);
          const retried = this.unbound.delete(nodeId);
          this.deps.log.info('listening', {
            role: 'broker',
            node: nodeId,
            host: address.host,
            port,
            ...(retried ? { retried } : {}),
          });
          if (this.stopped) server.close();
        },
        (err: unknown) => {
          this.listening.delete(nodeId);
          const option = this.deps.option(nodeId);
          const failure = new ListenError(option, address, nodeId, bindProblem(err), { cause: err });
          // Logged once per port, not at every retry.
          if (!this.unbound.has(nodeId))
            this.deps.log.error('cannot listen for broker', {
              node: nodeId,
              port,
              option,
              error: failure.reason,
            });
          this.unbound.set(nodeId, failure);
          this.scheduleRetry();
          throw failure;
        },
      );
      this.listening.set(nodeId, ready);
    }
    return ready;
  }

  /** No more retries; a listener bound from now on is closed at once. */
  stop(): void {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
  }

  private scheduleRetry(): void {
    if (this.retry !== null || this.stopped) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      if (this.stopped) return;
      for (const nodeId of this.unbound.keys()) void this.ensure(nodeId).catch(() => undefined);
    }, BIND_RETRY_MS);
    this.retry.unref();
  }
}
