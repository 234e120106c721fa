/**
 * What loadConfig (config.ts) makes of the command line, the environment and the YAML file: one
 * validated value per option, defaults applied.
 */
import type { StoreTarget } from '../../backends/open-store.js';
import type { HostPort } from '../core/broker-map.js';
import type { LogFormat, LogLevel } from '../logger.js';
import type { SaslCredentials } from '../client/sasl-client.js';
import type { CommitGuardMode, GroupOverride } from '../offsets/guard-policy.js';
import type { GroupModeOverride } from '../offsets/group-modes.js';

export type UnknownTopics = 'reject' | 'allow';

export interface ProxyConfig {
  bootstrapServers: HostPort[];
  listen: HostPort;
  advertisedHost: string | undefined;
  brokerPorts: Map<number, number>;
  bindFailure: 'exit' | 'unready';
  store: string | undefined;
  /** What --store names, parsed (the embedded store's directory resolved with --data-dir). */
  storeTarget: StoreTarget;
  dataDir: string;
  http: HostPort | undefined;
  /** --admin-http: the admin routes listen here instead of on `http`. */
  adminHttp: HostPort | undefined;
  httpToken: string | undefined;
  lag: { intervalMs: number; include: string[]; exclude: string[]; maxGroups: number };
  metricsApiVersions: boolean;
  maxFrameSize: number;
  maxInFlight: number;
  nativeRelay: 'auto' | 'on' | 'off';
  nativeRelayAfter: number;
  maxConnections: number;
  maxBufferedRequestBytes: number;
  maxBufferedResponseBytes: number;
  idleTimeoutMs: number;
  requestTimeoutMs: number;
  clientTlsHandshakeTimeoutMs: number;
  shutdownTimeoutMs: number;
  clientTls: { cert: string; key: string; ca: string | undefined; requireCert: boolean } | undefined;
  brokerTls:
    | { ca: string | undefined; cert: string | undefined; key: string | undefined; insecure: boolean }
    | undefined;
  logLevel: LogLevel;
  /** undefined: text on a terminal, JSON otherwise (decided where the logger is made). */
  logFormat: LogFormat | undefined;
  storeTimeoutMs: number;
  commitGuard: CommitGuardMode;
  commitGuardGroups: GroupOverride[];
  unknownTopics: UnknownTopics;
  unknownTopicsGroups: GroupModeOverride<UnknownTopics>[];
  fallback: 'none' | 'upstream';
  mirrorCommits: boolean;
  authorize: 'broker' | 'off';
  /** The proxy's own SASL principal for its cluster connections. */
  clusterSasl: SaslCredentials | undefined;
  /** The options given (flags, environment, file) as raw text, secrets included: never log this. */
  given: ReadonlyMap<string, string>;
}
