/**
 * The admin HTTP API for offsets, on the `--http` port behind the bearer token, with the same
 * semantics as the `offsets` CLI (shared code in offsets-admin.ts):
 *
 *   GET    /admin/groups                                   {"groups": [...]}
 *   GET    /admin/groups/:group/offsets[?topic=T]          {"offsets": [OffsetLine...]}
 *   PUT    /admin/groups/:group/offsets/:topic/:partition  {"offset": "42", "expected"?: "41" | "-1", "metadata"?: "..."}
 *   DELETE /admin/groups/:group/offsets/:topic/:partition
 *   DELETE /admin/groups/:group                            every offset and the membership record
 *
 * Offsets travel as decimal strings (64-bit). A compare-and-set mismatch answers 409 and changes
 * nothing; bad input 400; a store that is down 503.
 */
import { StoreCorruptError, StoreUnavailableError } from '../../backends/errors.js';
import type { OffsetStore } from '../../backends/store.js';
import { HttpError } from '../http/http-server.js';
import type { HttpRequest, HttpResponse, OpsHttpServer } from '../http/http-server.js';
import { AdminError, deleteOffsets, getOffsets, setOffset } from './offsets-admin.js';

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

/** Store and admin failures as HTTP answers. */
async function answer(op: () => Promise<HttpResponse>): Promise<HttpResponse> {
  try {
    return await op();
  } catch (err) {
    if (err instanceof AdminError) {
      throw new HttpError(err.kind === 'conflict' ? 409 : err.kind === 'bad-input' ? 400 : 503, err.message);
    }
    if (err instanceof StoreUnavailableError) throw new HttpError(503, err.message);
    if (err instanceof StoreCorruptError) throw new HttpError(500, err.message);
    throw err;
  }
}

export function registerOffsetsAdminRoutes(http: OpsHttpServer, store: OffsetStore): void {
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
      await setOffset(store, {
        group: req.params['group']!,
        topic: req.params['topic']!,
        partition: partitionOf(req),
        offset: decimal('offset', body['offset'], 0n),
        ...(body['expected'] !== undefined ? { expected: decimal('expected', body['expected'], -1n) } : {}),
        ...(metadata !== undefined ? { metadata } : {}),
      });
      return {
        status: 200,
        json: { offsets: await getOffsets(store, req.params['group']!, req.params['topic']) },
      };
    }),
  );

  http.addRoute('DELETE', '/admin/groups/:group/offsets/:topic/:partition', (req) =>
    answer(async () => {
      await deleteOffsets(store, req.params['group']!, [
        { topic: req.params['topic']!, partition: partitionOf(req) },
      ]);
      return { status: 204 };
    }),
  );

  http.addRoute('DELETE', '/admin/groups/:group', (req) =>
    answer(async () => {
      await deleteOffsets(store, req.params['group']!);
      return { status: 204 };
    }),
  );
}
