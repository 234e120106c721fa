import { describe, expect, test } from 'vitest';
import { closeLogLevel } from './close-reason.js';
import type { CloseReason } from './close-reason.js';

describe('closeLogLevel', () => {
  test('the ordinary ends of a connection are debug, faults are warn', () => {
    const debug: CloseReason[] = [
      'client closed',
      'client ended',
      'broker closed',
      'broker ended',
      'no broker connection',
      'idle',
      'proxy shutting down',
    ];
    const warn: CloseReason[] = [
      'client error',
      'broker error',
      'bad request framing',
      'malformed request',
      'request handling failed',
      'bad response from broker',
      'response handling failed',
      'extension failed',
      'native relay failed',
    ];
    for (const reason of debug) expect(closeLogLevel(reason), reason).toBe('debug');
    for (const reason of warn) expect(closeLogLevel(reason), reason).toBe('warn');
  });
});
