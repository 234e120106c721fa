/**
 * Options that have no effect without another one. Given alone they would be ignored without a
 * word (`--http-token` without `--http` protects nothing, lag options without `--http` compute
 * nothing), so the start is refused naming both. The pairs config.ts checks itself (a TLS
 * certificate without its key, broker TLS files without --broker-tls, SASL credentials without a
 * mechanism, a client CA without a client certificate) are not repeated here.
 */
import type { ProxyConfig } from './proxy-config.js';

export interface NeedsProblem {
  option: string;
  why: string;
}

interface Need {
  /** Options that are ignored unless `met`. */
  options: readonly string[];
  met: (config: ProxyConfig) => boolean;
  why: string;
}

const WITHOUT_HTTP = 'has no effect without http';

const NEEDS: readonly Need[] = [
  {
    options: ['http-token'],
    met: (c) => c.http !== undefined,
    why: `${WITHOUT_HTTP} (there is no HTTP endpoint for the token to protect); give http too, or remove http-token`,
  },
  {
    options: ['admin-http'],
    met: (c) => c.http !== undefined,
    why: `${WITHOUT_HTTP} (the admin API is served only with the HTTP endpoint); give http too, or remove admin-http`,
  },
  {
    // lag-interval-ms 0 (lag off) says what is true without --http too.
    options: ['lag-interval-ms'],
    met: (c) => c.http !== undefined || c.lag.intervalMs === 0,
    why: `${WITHOUT_HTTP} (without it consumer lag is not computed); give http too, or remove it`,
  },
  {
    options: ['lag-groups-include', 'lag-groups-exclude', 'lag-max-groups', 'metrics-api-versions'],
    met: (c) => c.http !== undefined,
    why: `${WITHOUT_HTTP} (without it no metrics are collected and consumer lag is not computed); give http too, or remove it`,
  },
  {
    options: ['lag-groups-include', 'lag-groups-exclude', 'lag-max-groups'],
    met: (c) => c.lag.intervalMs > 0,
    why: 'has no effect with lag-interval-ms 0 (consumer lag is not computed)',
  },
  {
    options: ['client-tls-handshake-timeout-ms'],
    met: (c) => c.clientTls !== undefined,
    why: 'has no effect without client-tls-cert (the listeners serve plaintext)',
  },
  {
    options: ['native-relay-after'],
    met: (c) => c.nativeRelay !== 'off',
    why: 'has no effect with native-relay off',
  },
];

/** The first option given whose prerequisite is missing. */
export function unmetNeed(config: ProxyConfig): NeedsProblem | undefined {
  for (const need of NEEDS) {
    if (need.met(config)) continue;
    const option = need.options.find((o) => config.given.has(o));
    if (option !== undefined) return { option, why: need.why };
  }
  return undefined;
}
