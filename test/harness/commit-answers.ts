// What each group's members were told about their plain commits, read from RequestTaps' decoded
// OffsetCommit answers: per group, the commits answered with each error code (the first among the
// answer's partitions; 0: all accepted), counted per commit as commit-tally.ts counts them. The
// same count on the direct route (a tap in front of the broker) and through the proxy (a tap in
// front of it) says whether the proxy refused more than the broker did. Any group, any protocol:
// unlike commit-tally.ts it judges nothing, it only counts.
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import type { RequestTap } from './request-tap.js';

/** Commits answered, by error code (0: accepted). */
export type CodeCounts = Record<number, number>;

export class CommitAnswers {
  private readonly byGroup = new Map<string, Map<number, number>>();

  /** Counts the OffsetCommit answers passing each of `taps` (every connection, whatever its label). */
  constructor(taps: RequestTap[]) {
    for (const tap of taps) {
      tap.decodeAnswers = new Set([...tap.decodeAnswers, ApiKey.OffsetCommit]);
      const onAnswer = tap.onAnswer;
      tap.onAnswer = (a) => {
        onAnswer(a);
        if (a.apiKey !== ApiKey.OffsetCommit) return;
        const group = (a.request as OffsetCommitRequest).groupId;
        const code =
          (a.body as OffsetCommitResponse).topics
            .flatMap((t) => t.partitions.map((p) => p.errorCode))
            .find((c) => c !== ErrorCode.NONE) ?? ErrorCode.NONE;
        const counts = this.byGroup.get(group) ?? new Map<number, number>();
        this.byGroup.set(group, counts);
        counts.set(code, (counts.get(code) ?? 0) + 1);
      };
    }
  }

  /** The group's commits by answer code. */
  codes(group: string): CodeCounts {
    return Object.fromEntries(this.byGroup.get(group) ?? []);
  }

  /** The group's commits answered with an error (any code but NONE). */
  refused(group: string): number {
    let n = 0;
    for (const [code, count] of this.byGroup.get(group) ?? []) if (code !== ErrorCode.NONE) n += count;
    return n;
  }
}
