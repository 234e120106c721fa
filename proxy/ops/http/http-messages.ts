/**
 * The operations endpoint's requests and answers as its routes see them: what a handler is given
 * and what it returns (http-server.ts turns them into node:http's), and what the route guard
 * answers a refused caller with.
 */
import type { IncomingMessage } from 'node:http';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';

export interface HttpRequest {
  method: HttpMethod;
  /** The path without the query string, e.g. /admin/groups/my-group. */
  path: string;
  /** Values of the route's `:name` segments, URL-decoded. */
  params: Record<string, string>;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  /** The body parsed as JSON (undefined when empty); a body that is not JSON answers 400. */
  json(): Promise<unknown>;
  raw: IncomingMessage;
  /** The caller's address and port ("10.0.0.7:53122"), for audit lines. */
  remote: string;
  /** The name of the token the caller presented (route-guard.ts), null on routes served without one. */
  credential: string | null;
}

export interface HttpResponse {
  status: number;
  /** Sent as application/json unless `text` is given. */
  json?: unknown;
  /** Sent as-is with `contentType` (default text/plain). */
  text?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

export type RouteHandler = (req: HttpRequest) => Promise<HttpResponse> | HttpResponse;
