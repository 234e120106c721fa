/** Group-name patterns as the options take them (--commit-guard-group, --lag-groups): `*` matches anything. */
export function globToRegExp(pattern: string): RegExp {
  const escaped = pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*');
  // `s`: a group id may contain line breaks, and `*` matches them too.
  return new RegExp(`^${escaped}$`, 's');
}
