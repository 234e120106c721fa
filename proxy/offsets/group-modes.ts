/**
 * Per-group choices given as `group-or-pattern=mode,...` (`*` wildcards, first match wins), with a
 * default for every other group: --commit-guard-group and --unknown-topics-group.
 */
import { globToRegExp } from '../common/glob.js';

export interface GroupModeOverride<M extends string> {
  /** A group name, or a pattern with `*` wildcards. */
  pattern: string;
  mode: M;
}

/** Parses `group-or-pattern=mode,...`; the mode is what follows the last `=` of each part. */
export function parseGroupModes<M extends string>(text: string, modes: readonly M[]): GroupModeOverride<M>[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((part) => {
      const eq = part.lastIndexOf('=');
      const mode = part.slice(eq + 1) as M;
      if (eq <= 0 || !modes.includes(mode))
        throw new Error(`expected group=${modes.join('|')}, got "${part}"`);
      return { pattern: part.slice(0, eq), mode };
    });
}

export class GroupModes<M extends string> {
  private readonly overrides: { re: RegExp; mode: M }[];

  constructor(
    private readonly defaultMode: M,
    overrides: readonly GroupModeOverride<M>[] = [],
  ) {
    this.overrides = overrides.map((o) => ({ re: globToRegExp(o.pattern), mode: o.mode }));
  }

  modeFor(group: string): M {
    for (const o of this.overrides) if (o.re.test(group)) return o.mode;
    return this.defaultMode;
  }
}
