/**
 * Which commit guard applies to a group, and the compare-and-set form of committed metadata.
 *
 * `fence` (default): commits are checked against the generations, members and epochs the proxy
 * recorded from the broker's group responses. `cas`: a client opts in per partition by sending
 * metadata `cas:<expected>` or `cas:<expected>;<metadata>`; the offset is written only if the
 * stored offset equals <expected> (-1 = no committed offset). `off`: last write wins.
 */
export type CommitGuardMode = 'fence' | 'cas' | 'off';
export const COMMIT_GUARD_MODES: readonly CommitGuardMode[] = ['fence', 'cas', 'off'];

export interface GroupOverride {
  /** A group name, or a pattern with `*` wildcards. */
  pattern: string;
  mode: CommitGuardMode;
}

export class GuardPolicy {
  private readonly overrides: { re: RegExp; mode: CommitGuardMode }[];

  constructor(
    private readonly defaultMode: CommitGuardMode,
    overrides: readonly GroupOverride[] = [],
  ) {
    this.overrides = overrides.map((o) => ({ re: globToRegExp(o.pattern), mode: o.mode }));
  }

  modeFor(group: string): CommitGuardMode {
    for (const o of this.overrides) if (o.re.test(group)) return o.mode;
    return this.defaultMode;
  }
}

export function globToRegExp(pattern: string): RegExp {
  const escaped = pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*');
  return new RegExp(`^${escaped}$`);
}

const CAS_FORM = /^cas:(-1|\d{1,19})(?:;([\s\S]*))?$/;

/** Splits `cas:<expected>[;<metadata>]`; undefined when the metadata is not of that form. */
export function parseCasMetadata(
  metadata: string | null,
): { expected: bigint; metadata: string } | undefined {
  if (metadata === null || !metadata.startsWith('cas:')) return undefined;
  const m = CAS_FORM.exec(metadata);
  if (!m) return undefined;
  const expected = BigInt(m[1]!);
  if (expected > 9223372036854775807n) return undefined;
  return { expected, metadata: m[2] ?? '' };
}

/** Parses `group-or-pattern=mode,...` (the --commit-guard-group option). */
export function parseGroupOverrides(text: string): GroupOverride[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((part) => {
      const eq = part.lastIndexOf('=');
      const mode = part.slice(eq + 1) as CommitGuardMode;
      if (eq <= 0 || !COMMIT_GUARD_MODES.includes(mode))
        throw new Error(`expected group=fence|cas|off, got "${part}"`);
      return { pattern: part.slice(0, eq), mode };
    });
}
