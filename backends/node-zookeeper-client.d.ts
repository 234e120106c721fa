// Types for the parts of node-zookeeper-client 1.1 the ZooKeeper store uses (the package ships none).
declare module 'node-zookeeper-client' {
  import type { EventEmitter } from 'node:events';

  export interface Stat {
    version: number;
    ctime: Buffer;
    mtime: Buffer;
    numChildren: number;
  }

  export class Exception extends Error {
    static readonly OK: 0;
    static readonly CONNECTION_LOSS: -4;
    static readonly NO_NODE: -101;
    static readonly BAD_VERSION: -103;
    static readonly NODE_EXISTS: -110;
    static readonly NOT_EMPTY: -111;
    static readonly SESSION_EXPIRED: -112;
    getCode(): number;
    getName(): string;
  }

  export class State {
    static readonly DISCONNECTED: State;
    static readonly SYNC_CONNECTED: State;
    static readonly EXPIRED: State;
    static readonly AUTH_FAILED: State;
    getName(): string;
    getCode(): number;
  }

  type Cb<T = void> = (error: Exception | Error | null, result: T) => void;

  export interface Transaction {
    create(path: string, data?: Buffer): Transaction;
    setData(path: string, data: Buffer | null, version?: number): Transaction;
    check(path: string, version?: number): Transaction;
    remove(path: string, version?: number): Transaction;
    commit(
      callback: (error: Exception | Error | null, results: { type: number; err?: number }[]) => void,
    ): void;
  }

  export interface Client extends EventEmitter {
    connect(): void;
    close(): void;
    addAuthInfo(scheme: string, auth: Buffer): void;
    getState(): State;
    getSessionId(): Buffer;
    getSessionPassword(): Buffer;
    create(path: string, data: Buffer | null, callback: Cb<string>): void;
    remove(path: string, version: number, callback: Cb): void;
    setData(path: string, data: Buffer | null, version: number, callback: Cb<Stat>): void;
    getData(
      path: string,
      callback: (error: Exception | Error | null, data: Buffer | undefined, stat: Stat) => void,
    ): void;
    exists(path: string, callback: Cb<Stat | null>): void;
    getChildren(path: string, callback: Cb<string[]>): void;
    getChildren(path: string, watcher: (event: unknown) => void, callback: Cb<string[]>): void;
    mkdirp(path: string, callback: Cb<string>): void;
    transaction(): Transaction;
  }

  export function createClient(
    connectionString: string,
    options?: {
      sessionTimeout?: number;
      spinDelay?: number;
      retries?: number;
      /** Join an existing session (tests use it to end another client's session). */
      sessionId?: Buffer;
      sessionPassword?: Buffer;
    },
  ): Client;
}
