// Runs the proxy exactly as a deployment artefact would start it (the command line and environment
// of a rendered Deployment or of the systemd unit), with only the addresses moved onto the test bed:
// host names become the bed's addresses, listeners bind 127.0.0.1, and the whole port plan is
// shifted by one offset so it lands on free ports (the difference is reported, so tests compare the
// ports the proxy announces with the ones the Service or firewall plan expects).
import path from 'node:path';
import { parseHostPort } from '../../proxy/core/broker-map.js';
import { freePort } from '../bed/ports.js';
import { makeRunDir, spawnManaged, tailFile, waitUntil } from '../bed/process.js';
import type { ExitStatus, ManagedProcess } from '../bed/process.js';
import { freePortRange } from './proxy.js';

export interface BedMapping {
  /** Exact "host:port" (or "host") strings of the artefact -> what stands in for them on the bed. */
  addresses: Record<string, string>;
  /** Path prefixes of the target machine -> directories of this one (data dir, install root). */
  paths: Record<string, string>;
  /** Broker node ids the port plan must cover (the shifted range must be free for all of them). */
  nodeIds: number[];
}

export interface MappedLaunch {
  command: string[];
  env: Record<string, string>;
  /** Added to every Kafka port of the artefact (bootstrap and broker ports). */
  portShift: number;
  bootstrap: string;
  httpBase: string;
  /** The admin API's own endpoint, when the artefact sets KOP_ADMIN_HTTP. */
  adminBase: string | undefined;
}

const replaceAll = (text: string, table: Record<string, string>): string =>
  Object.entries(table).reduce((t, [from, to]) => t.split(from).join(to), text);

/** The artefact's command and environment, moved onto the bed. */
export async function mapToBed(
  command: string[],
  env: Record<string, string>,
  mapping: BedMapping,
): Promise<MappedLaunch> {
  const mapPath = (p: string): string => {
    for (const [from, to] of Object.entries(mapping.paths)) {
      if (p === from || p.startsWith(`${from}/`)) return path.join(to, path.relative(from, p));
    }
    return p;
  };
  const listen = parseHostPort(env['KOP_LISTEN'] ?? '127.0.0.1:19092');
  const base = await freePortRange(2 + Math.max(0, ...mapping.nodeIds));
  const portShift = base - listen.port;
  const httpPort = await freePort();
  const adminPort = env['KOP_ADMIN_HTTP'] === undefined ? undefined : await freePort();
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    let v = replaceAll(value, mapping.addresses);
    if (name === 'KOP_LISTEN') v = `127.0.0.1:${base}`;
    else if (name === 'KOP_HTTP') v = `127.0.0.1:${httpPort}`;
    else if (name === 'KOP_ADMIN_HTTP') v = `127.0.0.1:${adminPort}`;
    else if (name === 'KOP_ADVERTISED_HOST') v = '127.0.0.1';
    else if (name === 'KOP_BROKER_PORT') {
      v = v.replace(/(\d+)=(\d+)/g, (_m, id: string, port: string) => `${id}=${Number(port) + portShift}`);
    } else if (v.startsWith('/')) v = mapPath(v);
    out[name] = v;
  }
  if (out['KOP_HTTP'] === undefined) throw new Error('the artefact has no KOP_HTTP: nothing could probe it');
  return {
    command: command.map((word) => (word.startsWith('/') ? mapPath(word) : word)),
    env: out,
    portShift,
    bootstrap: `127.0.0.1:${base}`,
    httpBase: `http://127.0.0.1:${httpPort}`,
    adminBase: adminPort === undefined ? undefined : `http://127.0.0.1:${adminPort}`,
  };
}

export interface CallOptions {
  token?: string | undefined;
  body?: unknown;
  at?: 'http' | 'admin';
}

export interface DeployedProxy {
  proc: ManagedProcess;
  launch: MappedLaunch;
  /** GET on the HTTP endpoint, with the bearer token when given. */
  get(urlPath: string, token?: string): Promise<{ status: number; body: string }>;
  /**
   * Any method on the HTTP endpoint (or, with `at: 'admin'`, on the admin endpoint), with a JSON
   * body and the bearer token when given.
   */
  call(method: string, urlPath: string, opts?: CallOptions): Promise<{ status: number; body: string }>;
  /** SIGTERM, and the exit status. */
  stop(): Promise<ExitStatus>;
  log(): string;
}

/** Starts the mapped command with exactly the mapped environment (plus PATH), and waits for /readyz. */
export async function startDeployed(
  name: string,
  launch: MappedLaunch,
  opts: { cwd: string; readinessPath: string },
): Promise<DeployedProxy> {
  const dir = makeRunDir(`deploy-${name}`);
  const logFile = path.join(dir, 'proxy.log');
  const [command, ...args] = launch.command;
  const proc = spawnManaged({
    name: `proxy (${name})`,
    command: command!,
    args,
    logFile,
    cwd: opts.cwd,
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...launch.env },
  });
  const call = async (method: string, urlPath: string, opts: CallOptions = {}) => {
    const base = opts.at === 'admin' ? launch.adminBase : launch.httpBase;
    if (base === undefined) throw new Error(`${name} has no admin endpoint (KOP_ADMIN_HTTP)`);
    const res = await fetch(`${base}${urlPath}`, {
      method,
      headers: {
        ...(opts.token === undefined ? {} : { authorization: `Bearer ${opts.token}` }),
        ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, body: await res.text() };
  };
  const get = (urlPath: string, token?: string) => call('GET', urlPath, { token });
  await waitUntil(
    `${name} to answer ${opts.readinessPath} with 200`,
    async () => (await get(opts.readinessPath)).status === 200,
    {
      timeoutMs: 90_000,
      intervalMs: 250,
      proc,
    },
  );
  return {
    proc,
    launch,
    get,
    call,
    stop: async () => {
      await proc.stop({ timeoutMs: 20_000 });
      return proc.exitStatus!;
    },
    log: () => tailFile(logFile, 60),
  };
}
