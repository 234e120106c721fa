/**
 * Which commit guard applies to a group, and the compare-and-set form of committed metadata.
 *
 * `fence` (default): commits are checked against the generations, members and epochs the proxy
 * recorded from the broker's group responses. `cas`: a client opts in per partition by sending
 * metadata `cas:<expected>` or `cas:<expected>;<metadata>`; the offset is written only if the
 * stored offset equals <expected> (-1 = no committed offset). `off`: last write wins.
 */
import { GroupModes, parseGroupModes } from './group-modes.js';
import type { GroupModeOverride } from './group-modes.js';

export type CommitGuardMode = 'fence' | 'cas' | 'off';
export const COMMIT_GUARD_MODES: readonly CommitGuardMode[] = ['fence', 'cas', 'off'];

export type GroupOverride = GroupModeOverride<CommitGuardMode>;

/** The commit guard of each group: --commit-guard, with the --commit-guard-group overrides. */
export class GuardPolicy extends GroupModes<CommitGuardMode> {}

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
  return parseGroupModes(text, COMMIT_GUARD_MODES);
}
