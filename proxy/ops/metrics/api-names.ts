/** Kafka API names by key, for metric labels ("Produce", "OffsetCommit", ...). */
import { ApiKey } from '../../../protocol/messages/api-info.js';

const names = new Map<number, string>(Object.entries(ApiKey).map(([name, key]) => [key, name]));

/** The API's name, or "unknown_<key>" for a key this build does not know (still a bounded set). */
export function apiName(apiKey: number): string {
  return names.get(apiKey) ?? `unknown_${apiKey}`;
}
