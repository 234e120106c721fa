/**
 * What the proxy advertises in ApiVersions. For an API the proxy must decode (to rewrite broker
 * addresses, or because an extension reads or answers it) the range is cut to what the codec
 * knows, so a newer broker never makes the proxy face a version it cannot read; an API an
 * extension serves itself gets the extension's range; every other API, unknown keys included,
 * passes through as the broker says.
 */
import type { ApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import { getApiInfo } from '../../protocol/messages/api-info.js';
import { decodedApis } from './api-plan.js';
import type { ProxyExtension, VersionRange } from './extension.js';

export function codecRange(apiKey: number): VersionRange | undefined {
  return getApiInfo(apiKey)?.validVersions;
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
  }
}

function intersect(a: VersionRange, b: VersionRange | undefined): VersionRange | undefined {
  if (!b) return undefined;
  const min = Math.max(a.min, b.min);
  const max = Math.min(a.max, b.max);
  return min <= max ? { min, max } : undefined;
}
