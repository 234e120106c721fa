import { describe, expect, it } from 'vitest';
import { apiCodecsLoaded, loadApiCodecs, loadedApiCodec } from './codec-registry.js';
import { decodeRequestFrame, encodeRequestFrame } from './frames.js';
import { ApiKey } from './messages/api-info.js';

// This file imports no codec module: vitest gives each test file its own module graph, so the
// registry starts empty, as in the proxy before it starts.
describe('codec registry', () => {
  const header = { apiKey: ApiKey.ListGroups, apiVersion: 4, correlationId: 7, clientId: 'c' };

  it('refuses to use a codec nobody loaded, and uses it once loaded', async () => {
    expect(loadedApiCodec(ApiKey.ListGroups)).toBeUndefined();
    expect(apiCodecsLoaded([ApiKey.ListGroups])).toBe(false);
    expect(() => encodeRequestFrame(header, { statesFilter: [], typesFilter: [] })).toThrow(
      'the ListGroups codec is not loaded',
    );
    await loadApiCodecs([ApiKey.ListGroups, ApiKey.ListGroups]);
    expect(apiCodecsLoaded([ApiKey.ListGroups])).toBe(true);
    const frame = encodeRequestFrame(header, { statesFilter: ['Stable'], typesFilter: [] });
    const decoded = decodeRequestFrame(frame.subarray(4));
    expect(decoded.body).toEqual({ statesFilter: ['Stable'], typesFilter: [] });
    // Only what was asked for.
    expect(loadedApiCodec(ApiKey.DescribeGroups)).toBeUndefined();
  });

  it('skips API keys without a codec', async () => {
    await loadApiCodecs([-1, 32767]);
    expect(apiCodecsLoaded([-1, 32767])).toBe(true);
  });

  it('still tells an unknown API key from an unloaded codec', () => {
    expect(() => encodeRequestFrame({ ...header, apiKey: 32767 as number }, {})).toThrow(
      'unknown api key 32767',
    );
  });
});
