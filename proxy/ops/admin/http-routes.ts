/**
 * The admin HTTP API for offsets, on the `--http` port behind the bearer token, with the same
 * semantics as the `offsets` CLI (shared code in offsets-admin.ts):
 *
 *   GET    /admin/groups                                   {"groups": [...]}
 *   GET    /admin/groups/:group/offsets[?topic=T]          {"offsets": [OffsetLine...]}
 *   PUT    /admin/groups/:group/offsets/:topic/:partition  {"offset": "42", "expected"?: "41" | "-1", "metadata"?: "...", "force"?: true}
 *   DELETE /admin/groups/:group/offsets/:topic/:partition[?force=true]
 *   DELETE /admin/groups/:group[?force=true]               every offset and the membership record
 *
 * Offsets travel as decimal strings (64-bit). A write to a group with live members (checked with
 * the broker before refusing) and a compare-and-set mismatch answer 409 and change nothing;
 * `force` writes without the live-member check. Bad input 400; a store that is down 503.
 *
 * The writes need the bearer token (route-guard.ts: 403 while none is configured, 401 without it);
 * every write that reaches the store, and every refused one, is audited (audit.ts).
 */
import { StoreCorruptError, StoreUnavailableError } from '../../../backends/errors.js';
import type { OffsetStore } from '../../../backends/store.js';
import { silentLogger } from '../../common/log.js';
import { HttpError } from '../http/http-server.js';
import type { DeniedRequest, HttpRequest, HttpResponse, OpsHttpServer } from '../http/http-server.js';
import { AdminAudit } from './audit.js';
import type { AdminActor, AdminRoute } from './audit.js';
import type { AdminGuard } from './offsets-admin.js';
import { AdminError, deleteOffsets, getOffsets, GroupNotEmptyError, setOffset } from './offsets-admin.js';

export interface AdminRoutesOptions {
  /** The proxy's own broker lookup (BrokerLookups.groupIsEmpty), asked before a live-member refusal. */
  groupIsEmptyAtBroker?: (group: string) => Promise<boolean>;
  /** Where changes are audited; default: nowhere (tests). */
  audit?: AdminAudit;
}

/** The audit's name of each write route, given to OpsHttpServer so refusals are audited too. */
const ROUTE_NAMES = {
  set: 'set',
  delete: 'delete',
  deleteGroup: 'delete_group',
} as const satisfies Record<string, AdminRoute>;

/** Who sent the request, for the audit: its address, and the token it presented. */
function actorOf(req: HttpRequest): AdminActor {
  return { remote: req.remote, who: req.credential ?? 'anonymous' };
}

/** OpsHttpServerOptions.onDenied for these routes: refused writes go to the audit. */
export function auditDenied(audit: AdminAudit): (denied: DeniedRequest) => void {
  return (d) => {
    const route = Object.values(ROUTE_NAMES).find((r) => r === d.route);
    if (route !== undefined) audit.denied(route, { remote: d.remote, who: 'anonymous' }, d.status, d.params);
  };
}

function decimal(name: string, value: unknown, min: bigint): bigint {
  if (typeof value !== 'string' && typeof value !== 'number')
    throw new HttpError(400, `${name} must be a decimal string`);
  const text = String(value);
  if (!/^-?\d+$/.test(text) || BigInt(text) < min || BigInt(text) > 9223372036854775807n) {
    throw new HttpError(400, `${name}=${JSON.stringify(text)}: expected a whole number >= ${min}`);
  }
  return BigInt(text);
}

function partitionOf(req: HttpRequest): number {
  return Number(decimal('partition', req.params['partition'], 0n));
}

/** `?force=true` of a DELETE. */
function forceQuery(req: HttpRequest): boolean {
  const force = req.query.get('force');
  if (force !== null && force !== 'true' && force !== 'false')
    throw new HttpError(400, `force=${JSON.stringify(force)}: expected true or false`);
  return force === 'true';
}

/** Store and admin failures as HTTP answers. */
async function answer(op: () => Promise<HttpResponse>): Promise<HttpResponse> {
  try {
    return await op();
  } catch (err) {
    if (err instanceof GroupNotEmptyError)
      throw new HttpError(409, `${err.message}: stop the consumers first, or send "force": true`);
    if (err instanceof AdminError) {
      throw new HttpError(err.kind === 'conflict' ? 409 : err.kind === 'bad-input' ? 400 : 503, err.message);
    }
    if (err instanceof StoreUnavailableError) throw new HttpError(503, err.message);
    if (err instanceof StoreCorruptError) throw new HttpError(500, err.message);
    throw err;
  }
}

export function registerOffsetsAdminRoutes(
  http: OpsHttpServer,
  store: OffsetStore,
  options: AdminRoutesOptions = {},
): void {
  const audit = options.audit ?? new AdminAudit(silentLogger);
  const guard = (force: boolean): AdminGuard =>
    force
      ? { force }
      : options.groupIsEmptyAtBroker
        ? { groupIsEmptyAtBroker: options.groupIsEmptyAtBroker }
        : {};

  http.addRoute('GET', '/admin/groups', () =>
    answer(async () => ({ status: 200, json: { groups: (await store.listGroups()).sort() } })),
  );

  http.addRoute('GET', '/admin/groups/:group/offsets', (req) =>
    answer(async () => {
      const topic = req.query.get('topic') ?? undefined;
      return { status: 200, json: { offsets: await getOffsets(store, req.params['group']!, topic) } };
    }),
  );

  http.addRoute(
    'PUT',
    '/admin/groups/:group/offsets/:topic/:partition',
    (req) =>
      answer(async () => {
        const body = (await req.json()) as Record<string, unknown> | undefined;
        if (body === undefined || body === null || typeof body !== 'object')
          throw new HttpError(400, 'expected a JSON object with "offset"');
        const metadata = body['metadata'];
        if (metadata !== undefined && typeof metadata !== 'string')
          throw new HttpError(400, 'metadata must be a string');
        const force = body['force'] ?? false;
        if (typeof force !== 'boolean') throw new HttpError(400, 'force must be true or false');
        const request = {
          group: req.params['group']!,
          topic: req.params['topic']!,
          partition: partitionOf(req),
          offset: decimal('offset', body['offset'], 0n),
          ...(body['expected'] !== undefined ? { expected: decimal('expected', body['expected'], -1n) } : {}),
          ...(metadata !== undefined ? { metadata } : {}),
        };
        const change = {
          route: ROUTE_NAMES.set,
          actor: actorOf(req),
          group: request.group,
          targets: [{ topic: request.topic, partition: request.partition, to: request.offset }],
          force,
          dryRun: false,
        };
        await audit.audited(store, [change], () => setOffset(store, request, guard(force)));
        return {
          status: 200,
          json: { offsets: await getOffsets(store, request.group, request.topic) },
        };
      }),
    { name: ROUTE_NAMES.set },
  );

  http.addRoute(
    'DELETE',
    '/admin/groups/:group/offsets/:topic/:partition',
    (req) =>
      answer(async () => {
        const group = req.params['group']!;
        const partitions = [{ topic: req.params['topic']!, partition: partitionOf(req) }];
        const force = forceQuery(req);
        const change = {
          route: ROUTE_NAMES.delete,
          actor: actorOf(req),
          group,
          targets: partitions.map((p) => ({ ...p, to: null })),
          force,
          dryRun: false,
        };
        await audit.audited(store, [change], () => deleteOffsets(store, group, partitions, guard(force)));
        return { status: 204 };
      }),
    { name: ROUTE_NAMES.delete },
  );

  http.addRoute(
    'DELETE',
    '/admin/groups/:group',
    (req) =>
      answer(async () => {
        const group = req.params['group']!;
        const force = forceQuery(req);
        const change = { route: ROUTE_NAMES.deleteGroup, actor: actorOf(req), group, force, dryRun: false };
        await audit.audited(store, [change], () => deleteOffsets(store, group, undefined, guard(force)));
        return { status: 204 };
      }),
    { name: ROUTE_NAMES.deleteGroup },
  );
}
