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
 */
import { StoreCorruptError, StoreUnavailableError } from '../../../backends/errors.js';
import type { OffsetStore } from '../../../backends/store.js';
import { HttpError } from '../http/http-server.js';
import type { HttpRequest, HttpResponse, OpsHttpServer } from '../http/http-server.js';
import type { AdminGuard } from './offsets-admin.js';
import { AdminError, deleteOffsets, getOffsets, GroupNotEmptyError, setOffset } from './offsets-admin.js';

export interface AdminRoutesOptions {
  /** The proxy's own broker lookup (BrokerLookups.groupIsEmpty), asked before a live-member refusal. */
  groupIsEmptyAtBroker?: (group: string) => Promise<boolean>;
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

  http.addRoute('PUT', '/admin/groups/:group/offsets/:topic/:partition', (req) =>
    answer(async () => {
      const body = (await req.json()) as Record<string, unknown> | undefined;
      if (body === undefined || body === null || typeof body !== 'object')
        throw new HttpError(400, 'expected a JSON object with "offset"');
      const metadata = body['metadata'];
      if (metadata !== undefined && typeof metadata !== 'string')
        throw new HttpError(400, 'metadata must be a string');
      const force = body['force'] ?? false;
      if (typeof force !== 'boolean') throw new HttpError(400, 'force must be true or false');
      await setOffset(
        store,
        {
          group: req.params['group']!,
          topic: req.params['topic']!,
          partition: partitionOf(req),
          offset: decimal('offset', body['offset'], 0n),
          ...(body['expected'] !== undefined ? { expected: decimal('expected', body['expected'], -1n) } : {}),
          ...(metadata !== undefined ? { metadata } : {}),
        },
        guard(force),
      );
      return {
        status: 200,
        json: { offsets: await getOffsets(store, req.params['group']!, req.params['topic']) },
      };
    }),
  );

  http.addRoute('DELETE', '/admin/groups/:group/offsets/:topic/:partition', (req) =>
    answer(async () => {
      await deleteOffsets(
        store,
        req.params['group']!,
        [{ topic: req.params['topic']!, partition: partitionOf(req) }],
        guard(forceQuery(req)),
      );
      return { status: 204 };
    }),
  );

  http.addRoute('DELETE', '/admin/groups/:group', (req) =>
    answer(async () => {
      await deleteOffsets(store, req.params['group']!, undefined, guard(forceQuery(req)));
      return { status: 204 };
    }),
  );
}
