/**
 * The operations HTTP endpoint (`--http host:port`, separate from the Kafka listener):
 * /healthz, /readyz, /metrics, and routes other modules register (offsets admin).
 *
 * Who may call what is route-guard.ts's decision: the probes are public; writes need the bearer
 * token (`--http-token`) and are refused while none is configured; reads need it when one is set.
 * The token is compared in constant time and never logged.
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../common/log.js';
import { silentLogger } from '../../common/log.js';
import type { HttpMethod, HttpRequest, HttpResponse, RouteHandler } from './http-messages.js';
import { guardRoute, routeAccess } from './route-guard.js';

export type { HttpMethod, HttpRequest, HttpResponse, RouteHandler } from './http-messages.js';

/** Where the endpoint listens (a port of 0: any free port). */
export interface ListenAddress {
  host: string;
  port: number;
}

export interface RouteOptions {
  /** Served without the bearer token (health probes only). Default false. */
  public?: boolean;
  /** A name for the route, passed to `onDenied` (e.g. the admin audit's route name). */
  name?: string;
}

/** A request the route guard refused (401 or 403), for the audit trail. */
export interface DeniedRequest {
  /** The route's `name` option. */
  route: string;
  method: HttpMethod;
  params: Record<string, string>;
  remote: string;
  status: number;
}

/** Throw from a handler to answer with this status and `{ error: message }`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export interface OpsHttpServerOptions {
  /** Bearer token for non-public routes; undefined: reads are open and writes refused (route-guard.ts). */
  token?: string | undefined;
  log?: Logger;
  /** Largest request body json() accepts. Default 1 MiB. */
  maxBodyBytes?: number;
  /** Called for each refused request of a route registered with a `name`. */
  onDenied?: (denied: DeniedRequest) => void;
}

interface Route {
  method: HttpMethod;
  segments: string[];
  handler: RouteHandler;
  public: boolean;
  name: string | undefined;
}

export class OpsHttpServer {
  private readonly routes: Route[] = [];
  private readonly server: http.Server;
  private readonly log: Logger;
  private token: Buffer | undefined;

  constructor(private readonly opts: OpsHttpServerOptions = {}) {
    this.log = opts.log ?? silentLogger;
    this.token = opts.token === undefined ? undefined : Buffer.from(opts.token, 'utf8');
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        this.log.error('http handler failed', { path: pathOf(req), error: err });
        if (!res.headersSent) send(res, { status: 500, json: { error: 'internal error' } });
        else res.destroy();
      });
    });
    // Slow or idle clients must not hold sockets forever.
    this.server.requestTimeout = 30_000;
    this.server.headersTimeout = 10_000;
    this.server.keepAliveTimeout = 5_000;
  }

  /**
   * Registers `handler` for `method` and `path`. Path segments starting with `:` are parameters
   * (`/admin/groups/:group/offsets`). Routes are matched in registration order; registering the
   * same method and path twice throws.
   */
  addRoute(method: HttpMethod, path: string, handler: RouteHandler, options: RouteOptions = {}): void {
    if (!path.startsWith('/')) throw new Error(`route path must start with /: ${path}`);
    const segments = splitPath(path);
    const clash = this.routes.find((r) => r.method === method && r.segments.join('/') === segments.join('/'));
    if (clash) throw new Error(`route already registered: ${method} ${path}`);
    this.routes.push({ method, segments, handler, public: options.public ?? false, name: options.name });
  }

  async listen(address: ListenAddress): Promise<ListenAddress> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(address.port, address.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const bound = this.server.address() as AddressInfo;
    return { host: address.host, port: bound.port };
  }

  async close(): Promise<void> {
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const segments = splitPath(url.pathname);
    let pathMatched = false;
    for (const route of this.routes) {
      const params = matchSegments(route.segments, segments);
      if (!params) continue;
      pathMatched = true;
      if (route.method !== req.method && !(route.method === 'GET' && req.method === 'HEAD')) continue;
      const decision = guardRoute(
        routeAccess(route.method, route.public),
        this.token,
        req.headers.authorization,
      );
      if (!decision.allowed) {
        if (route.name !== undefined) {
          this.opts.onDenied?.({
            route: route.name,
            method: route.method,
            params,
            remote: remoteOf(req),
            status: decision.response.status,
          });
        }
        send(res, decision.response, req.method === 'HEAD');
        return;
      }
      const request: HttpRequest = {
        method: route.method,
        path: url.pathname,
        params,
        query: url.searchParams,
        headers: req.headers,
        json: () => readJson(req, this.opts.maxBodyBytes ?? 1024 * 1024),
        raw: req,
        remote: remoteOf(req),
        credential: decision.credential,
      };
      let response: HttpResponse;
      try {
        response = await route.handler(request);
      } catch (err) {
        if (!(err instanceof HttpError)) throw err;
        response = { status: err.status, json: { error: err.message } };
      }
      send(res, response, req.method === 'HEAD');
      return;
    }
    send(
      res,
      pathMatched
        ? { status: 405, json: { error: 'method not allowed' } }
        : { status: 404, json: { error: 'not found' } },
    );
  }

  /** Replaces the bearer token (SIGHUP reload); requests from now on are checked against it. */
  setToken(token: string | undefined): void {
    this.token = token === undefined ? undefined : Buffer.from(token, 'utf8');
  }
}

function remoteOf(req: IncomingMessage): string {
  const { remoteAddress, remotePort } = req.socket;
  if (remoteAddress === undefined) return 'unknown';
  return remoteAddress.includes(':') ? `[${remoteAddress}]:${remotePort}` : `${remoteAddress}:${remotePort}`;
}

function splitPath(path: string): string[] {
  return path.split('/').filter((s) => s !== '');
}

function matchSegments(pattern: readonly string[], actual: readonly string[]): Record<string, string> | null {
  if (pattern.length !== actual.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    const a = actual[i]!;
    if (p.startsWith(':')) {
      try {
        params[p.slice(1)] = decodeURIComponent(a);
      } catch {
        return null;
      }
    } else if (p !== a) return null;
  }
  return params;
}

function pathOf(req: IncomingMessage): string {
  return (req.url ?? '/').split('?')[0]!;
}

async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new HttpError(413, `request body larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new HttpError(400, 'request body is not valid JSON');
  }
}

function send(res: ServerResponse, r: HttpResponse, headOnly = false): void {
  const body = r.text !== undefined ? r.text : JSON.stringify(r.json ?? null, bigintReplacer);
  const contentType =
    r.text !== undefined ? (r.contentType ?? 'text/plain; charset=utf-8') : 'application/json; charset=utf-8';
  res.writeHead(r.status, {
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    ...r.headers,
  });
  res.end(headOnly ? undefined : body);
}

/** Offsets are bigints in the store; JSON carries them as strings only if they exceed 2^53. */
function bigintReplacer(_key: string, value: unknown): unknown {
  if (typeof value !== 'bigint') return value;
  return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)
    ? Number(value)
    : value.toString();
}
