/**
 * Who may call which route of the operations endpoint. Safe by default: a route that changes
 * something (any method but GET/HEAD) is refused outright while no token is configured, so an
 * endpoint bound to a reachable address never lets an anonymous caller move offsets. With a token,
 * every route but the probes needs it. Read routes without a token stay open: they show what
 * /metrics shows anyway (groups, committed offsets, lag), and the probes must stay open for
 * orchestrators, which send no credentials.
 */
import { timingSafeEqual } from 'node:crypto';
import type { HttpMethod, HttpResponse } from './http-messages.js';

/** public: the probes; read: GET routes; write: every route that changes something. */
export type RouteAccess = 'public' | 'read' | 'write';

/** The name the configured token is known by in audit lines (the option it comes from). */
export const TOKEN_NAME = 'http-token';

export function routeAccess(method: HttpMethod, isPublic: boolean): RouteAccess {
  if (isPublic) return 'public';
  return method === 'GET' ? 'read' : 'write';
}

export type GuardDecision =
  /** `credential`: the name of the token the caller presented, null when none was needed. */
  { allowed: true; credential: string | null } | { allowed: false; response: HttpResponse };

/** The answer to a write while no token is configured. */
export const WRITES_DISABLED =
  'admin writes are disabled: this proxy has no --http-token (KOP_HTTP_TOKEN); set one to change offsets over HTTP';

/**
 * Decides whether a request for a route of `access` may be served, given the configured token
 * (undefined: none) and the request's Authorization header. The token is compared in constant time.
 */
export function guardRoute(
  access: RouteAccess,
  token: Buffer | undefined,
  authorization: string | undefined,
): GuardDecision {
  if (access === 'public') return { allowed: true, credential: null };
  if (token === undefined) {
    if (access === 'read') return { allowed: true, credential: null };
    return { allowed: false, response: { status: 403, json: { error: WRITES_DISABLED } } };
  }
  if (bearerMatches(token, authorization ?? '')) return { allowed: true, credential: TOKEN_NAME };
  return {
    allowed: false,
    response: {
      status: 401,
      json: { error: 'missing or wrong bearer token' },
      headers: { 'WWW-Authenticate': 'Bearer realm="kafka-offset-proxy"' },
    },
  };
}

function bearerMatches(token: Buffer, header: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header);
  if (!m) return false;
  const given = Buffer.from(m[1]!.trim(), 'utf8');
  return given.length === token.length && timingSafeEqual(given, token);
}
