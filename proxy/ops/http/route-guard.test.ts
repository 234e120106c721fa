// The route guard as a table: every kind of route, with and without a configured token, with no,
// a wrong and the right Authorization header.
import { describe, expect, it } from 'vitest';
import { guardRoute, routeAccess, WRITES_DISABLED } from './route-guard.js';
import type { RouteAccess } from './route-guard.js';

const TOKEN = Buffer.from('guard-test-0f6b2d9e7a41');
const RIGHT = 'Bearer guard-test-0f6b2d9e7a41';

type Header = 'none' | 'wrong' | 'right' | 'lower-case scheme' | 'basic';
const headers: Record<Header, string | undefined> = {
  none: undefined,
  wrong: 'Bearer guard-test-0f6b2d9e7a42',
  right: RIGHT,
  'lower-case scheme': 'bearer guard-test-0f6b2d9e7a41',
  basic: `Basic ${Buffer.from('x:guard-test-0f6b2d9e7a41').toString('base64')}`,
};

describe('routeAccess', () => {
  it('classifies probes as public, GET as read and every other method as write', () => {
    expect(routeAccess('GET', true)).toBe('public');
    expect(routeAccess('GET', false)).toBe('read');
    for (const m of ['PUT', 'POST', 'DELETE', 'PATCH'] as const) expect(routeAccess(m, false)).toBe('write');
  });
});

describe('guardRoute', () => {
  const table: [RouteAccess, 'token' | 'no token', Header, number | 'served'][] = [
    ['public', 'no token', 'none', 'served'],
    ['public', 'token', 'none', 'served'],
    ['public', 'token', 'wrong', 'served'],
    ['read', 'no token', 'none', 'served'],
    ['read', 'token', 'none', 401],
    ['read', 'token', 'wrong', 401],
    ['read', 'token', 'basic', 401],
    ['read', 'token', 'right', 'served'],
    ['write', 'no token', 'none', 403],
    // Without a configured token no header opens writes, whatever it says.
    ['write', 'no token', 'right', 403],
    ['write', 'token', 'none', 401],
    ['write', 'token', 'wrong', 401],
    ['write', 'token', 'basic', 401],
    ['write', 'token', 'right', 'served'],
    ['write', 'token', 'lower-case scheme', 'served'],
  ];
  it.each(table)('%s route, %s, %s header: %s', (access, configured, header, expected) => {
    const d = guardRoute(access, configured === 'token' ? TOKEN : undefined, headers[header]);
    if (expected === 'served') {
      expect(d.allowed).toBe(true);
      if (d.allowed)
        expect(d.credential).toBe(configured === 'token' && access !== 'public' ? 'http-token' : null);
      return;
    }
    expect(d.allowed).toBe(false);
    if (d.allowed) return;
    expect(d.response.status).toBe(expected);
    if (expected === 401) {
      expect(d.response.json).toEqual({ error: 'missing or wrong bearer token' });
      expect(d.response.headers?.['WWW-Authenticate']).toMatch(/^Bearer /);
    } else expect(d.response.json).toEqual({ error: WRITES_DISABLED });
  });

  it('a token of another length is refused, not compared past its end', () => {
    expect(guardRoute('write', TOKEN, `${RIGHT}x`).allowed).toBe(false);
    expect(guardRoute('write', TOKEN, RIGHT.slice(0, -1)).allowed).toBe(false);
  });
});
