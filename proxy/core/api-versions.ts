/**
 * What the proxy advertises in ApiVersions. For an API the proxy must decode (to rewrite broker
 * addresses, or because an extension reads or answers it) the range is cut to what the codec
 * knows, so a newer broker never makes the proxy face a version it cannot read; an API an
 * extension serves itself gets the extension's range; every other API, unknown keys included,
 * passes through as the broker says.
 */
import type { ApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import { decodedApis } from './api-plan.js';
import type { ProxyExtension, VersionRange } from './extension.js';

export function codecRange(apiKey: number): VersionRange | undefined {
  return getApiCodec(apiKey)?.validVersions;
}

export class ApiVersionsPolicy {
  /** `decoded`: the APIs the proxy decodes (api-plan.ts), whose ranges are cut to the codec's. */
  constructor(
    private readonly extension: ProxyExtension | null,
    private readonly decoded: ReadonlySet<number> = decodedApis(extension),
  ) {}

  /** The highest version of `apiKey` the proxy can decode, when it must decode that API. */
  decodableMax(apiKey: number): number | undefined {
    return this.decoded.has(apiKey) ? codecRange(apiKey)?.max : undefined;
  }

  /** Rewrites the broker's ApiVersions response in place. */
  apply(body: ApiVersionsResponse): void {
    if (body.errorCode !== 0) return;
    const out: ApiVersionsResponse['apiKeys'] = [];
    for (const entry of body.apiKeys) {
      const broker = { min: entry.minVersion, max: entry.maxVersion };
      const served = this.extension?.advertisedVersions?.(entry.apiKey, broker);
      let range: VersionRange | undefined = broker;
      if (served) range = served;
      else if (this.decoded.has(entry.apiKey)) range = intersect(broker, codecRange(entry.apiKey));
      if (!range) continue; // nothing in common: hide the API rather than face an unreadable version
      out.push({ ...entry, minVersion: range.min, maxVersion: range.max });
    }
    body.apiKeys = out;
    const produce = out.find((e) => e.apiKey === ApiKey.Produce);
    if (produce && produce.maxVersion < FIRST_PRODUCE_OF_TRANSACTIONS_V2) capTransactionVersion(body, 1);
  }
}

/**
 * Produce v12 is what transactions v2 (KIP-890) need: with the `transaction.version` feature at 2 a
 * client stops sending AddPartitionsToTxn and lets Produce v12 add partitions implicitly. When the
 * proxy caps Produce below 12, a client that still saw transaction.version 2 would send v11 without
 * adding the partitions and its transaction fails (TransactionAbortableException). Lowering the
 * feature makes the client use the v1 protocol, which works with any Produce version.
 */
const FIRST_PRODUCE_OF_TRANSACTIONS_V2 = 12;

function capTransactionVersion(body: ApiVersionsResponse, level: number): void {
  for (const f of body.finalizedFeatures ?? []) {
    if (f.name === 'transaction.version' && f.maxVersionLevel > level) {
      f.maxVersionLevel = level;
      f.minVersionLevel = Math.min(f.minVersionLevel, level);
    }
  }
  for (const f of body.supportedFeatures ?? []) {
    if (f.name === 'transaction.version' && f.maxVersion > level) {
      f.maxVersion = level;
      f.minVersion = Math.min(f.minVersion, level);
    }
  }
}

function intersect(a: VersionRange, b: VersionRange | undefined): VersionRange | undefined {
  if (!b) return undefined;
  const min = Math.max(a.min, b.min);
  const max = Math.min(a.max, b.max);
  return min <= max ? { min, max } : undefined;
}
