/**
 * The codecs loaded in this process, by API key. The proxy decodes a few dozen of Kafka's APIs and
 * passes the rest on as bytes, so it loads the codecs it reads when it starts (and a request of its
 * own loads its API's on first use) instead of importing all 183 codec modules, which cost 10 MB of
 * RSS at rest (docs/benchmarks.md). Importing protocol/messages/index.ts registers every codec
 * (tools, tests).
 */
import { codecLoaders } from './messages/api-info.js';
import type { ApiCodec } from './messages/api-info.js';

const loaded = new Map<number, ApiCodec>();

export function registerApiCodecs(codecs: Iterable<ApiCodec>): void {
  for (const codec of codecs) loaded.set(codec.apiKey, codec);
}

/** The codec of `apiKey` if it is loaded. */
export function loadedApiCodec(apiKey: number): ApiCodec | undefined {
  return loaded.get(apiKey);
}

/** Whether every one of `apiKeys` that has a codec has it loaded. */
export function apiCodecsLoaded(apiKeys: Iterable<number>): boolean {
  for (const k of apiKeys) if (!loaded.has(k) && codecLoaders.has(k)) return false;
  return true;
}

/** Loads the codecs of `apiKeys` (API keys without a codec are skipped). */
export async function loadApiCodecs(apiKeys: Iterable<number>): Promise<void> {
  const missing = [...new Set(apiKeys)].filter((k) => !loaded.has(k) && codecLoaders.has(k));
  const codecs = await Promise.all(missing.map((k) => codecLoaders.get(k)!()));
  registerApiCodecs(codecs);
}
