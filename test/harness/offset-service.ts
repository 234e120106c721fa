/**
 * The options of an OffsetService with nothing around it (no broker, no authorizer, unknown topics
 * allowed, no fallback or mirroring), for unit tests that put one in front of a MemoryStore.
 */
import type { OffsetStore } from '../../backends/store.js';
import { silentLogger } from '../../proxy/common/log.js';
import { GuardPolicy } from '../../proxy/offsets/guard-policy.js';
import type { OffsetServiceOptions } from '../../proxy/offsets/service.js';

export function standaloneServiceOptions(
  store: OffsetStore,
  guard: 'fence' | 'cas' | 'off',
): OffsetServiceOptions {
  return {
    store,
    guards: new GuardPolicy(guard),
    unknownTopics: 'allow',
    fallbackUpstream: false,
    mirrorCommits: false,
    lookups: null,
    log: silentLogger,
    authorizer: null,
  };
}
