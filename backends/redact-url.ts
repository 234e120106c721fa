/**
 * Store URLs carry credentials in every form the stores accept: `user:password@` (or a bare
 * `password@`) before each host of a list (Redis Cluster, Sentinel), and query parameters such as
 * `?password=` or `?sentinelPassword=`. Whatever is shown to an operator (logs, metrics, error
 * messages, readiness answers) goes through `redactUrl` first. It works on the text, not on a
 * parsed URL, so that a URL too broken to parse is still redacted: a password may itself contain
 * `@`, `,`, `/` or `?`.
 */

/** Query parameters whose value is a secret. */
const SECRET_PARAM = /pass|secret|token|auth|cred|key/i;

export const REDACTED = '***';

/** The URL with every password replaced by ***. */
export function redactUrl(url: string): string {
  const start = url.indexOf('//');
  if (start < 0) {
    // Not scheme://...: keep only what precedes the last '@', masked.
    const at = url.lastIndexOf('@');
    return at < 0 ? redactQuery(url) : `${REDACTED}@${redactQuery(url.slice(at + 1))}`;
  }
  const head = url.slice(0, start + 2);
  const rest = url.slice(start + 2);
  const lastAt = rest.lastIndexOf('@');
  if (lastAt < 0) return head + redactQuery(rest);
  // The part up to the last '@' holds "userinfo@host,...,userinfo": a segment after an '@'
  // without a ',' cannot start a new host, so its '@' belongs to the password before it.
  const parts = rest.slice(0, lastAt).split('@');
  let out = '';
  let userinfo = parts[0]!;
  for (const part of parts.slice(1)) {
    const comma = part.lastIndexOf(',');
    if (comma < 0) {
      userinfo += '@' + part;
      continue;
    }
    out += maskUserinfo(userinfo) + '@' + part.slice(0, comma + 1);
    userinfo = part.slice(comma + 1);
  }
  out += maskUserinfo(userinfo) + '@';
  return head + out + redactQuery(rest.slice(lastAt + 1));
}

/** `user:password` → `user:***`; a bare `password` (Redis's form) → `***`. */
function maskUserinfo(userinfo: string): string {
  const colon = userinfo.indexOf(':');
  return colon < 0 ? REDACTED : `${userinfo.slice(0, colon)}:${REDACTED}`;
}

function redactQuery(text: string): string {
  const q = text.indexOf('?');
  if (q < 0) return text;
  const params = text
    .slice(q + 1)
    .split('&')
    .map((p) => {
      const eq = p.indexOf('=');
      return eq >= 0 && SECRET_PARAM.test(p.slice(0, eq)) ? `${p.slice(0, eq)}=${REDACTED}` : p;
    });
  return `${text.slice(0, q + 1)}${params.join('&')}`;
}
