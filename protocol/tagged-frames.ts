/**
 * Frames decoded into bodies tagged with their API key (`AnyRequest`, `AnyResponse`, and a request
 * with its answer as one `AnyExchange`), so that a reader narrows a body by `switch (x.apiKey)`
 * instead of casting it. The registry decodes each API key's frames with that key's codec; the
 * casts below state that guarantee, once, here, so no reader of a decoded body needs one.
 */
import { decodeRequestFrame, decodeResponseFrame } from './frames.js';
import type {
  AnyRequest,
  AnyResponse,
  KnownApiKey,
  RequestBodyByApiKey,
  ResponseBodyByApiKey,
} from './messages/api-info.js';

/** A request and its broker's response, tagged with their API key: `switch (e.apiKey)` narrows both. */
export type AnyExchange = {
  [K in KnownApiKey]: {
    readonly apiKey: K;
    readonly request: RequestBodyByApiKey[K];
    readonly response: ResponseBodyByApiKey[K];
  };
}[KnownApiKey];

/** Decodes a request frame (as decodeRequestFrame) into its body tagged with its API key. */
export function decodeTaggedRequest(frame: Buffer): AnyRequest {
  const { apiKey, body } = decodeRequestFrame(frame);
  return { apiKey, body } as AnyRequest;
}

/** Decodes a response frame (as decodeResponseFrame) into its body tagged with its API key. */
export function decodeTaggedResponse(
  frame: Buffer,
  apiKey: number,
  apiVersion: number,
): { response: AnyResponse; bodyVersion: number } {
  const { body, bodyVersion } = decodeResponseFrame(frame, apiKey, apiVersion);
  return { response: { apiKey, body } as AnyResponse, bodyVersion };
}

/** A request and the response that answers it, as one exchange; throws when their API keys differ. */
export function exchangeOf(request: AnyRequest, response: AnyResponse): AnyExchange {
  if (request.apiKey !== response.apiKey) {
    throw new Error(`api ${response.apiKey} answer paired with an api ${request.apiKey} request`);
  }
  return { apiKey: request.apiKey, request: request.body, response: response.body } as AnyExchange;
}
