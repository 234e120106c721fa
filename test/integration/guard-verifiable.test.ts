// Issue #18's setting, bounded: Kafka's own VerifiableConsumers in a classic group with static
// membership, through the CLI proxy (embedded store), one SIGKILLed every 4 s and replaced at once
// with the same group.instance.id. No consumer may die, nothing may be lost, and no record may be
// processed twice beyond what the killed consumers had consumed past the group's committed offsets.
//
// This is the whole path with a real client, not the wire-level case: with the guard's
// fix undone (takeovers not recorded, the broker not asked) this test still passed (9 kills, no
// death), so the Java client's replacement did not commit in the generation it took over there.
// That case is pinned by guard-differential.test.ts, which fails without the fix. The full run of
// every protocol, membership and commit mode, against the broker too: `npm run verifiable-run`
// (docs/reliability.md).
import { describe, expect, inject, test } from 'vitest';
import { KAFKA_VERSION } from '../bed/kafka.js';
import { formatRow, HEADER, proxyFailures, verifiableRun } from '../reliability/verifiable-run.js';

describe('verifiable consumers killed and replaced through the proxy', () => {
  test(
    'classic static members with manual commits: every replacement commits, nothing duplicated beyond the uncommitted window',
    { timeout: 8 * 60_000 },
    async () => {
      const lines: string[] = [];
      const [r] = await verifiableRun(
        {
          records: 30_000,
          rate: 2000,
          killEverySeconds: 4,
          consumers: 3,
          protocols: ['classic'],
          membership: ['static'],
          commit: ['manual'],
          targets: ['proxy'],
          kafkaVersion: inject('kafkaVersion') || KAFKA_VERSION,
          bootstrap: inject('kafkaBootstrap'),
        },
        (l) => lines.push(l),
      );
      console.log(`[verifiable]\n${HEADER}\n${lines.join('\n')}`);
      expect(r!.kills, formatRow(r!)).toBeGreaterThan(0);
      expect(r!.deaths, formatRow(r!)).toEqual([]);
      expect(r!.missing, formatRow(r!)).toBe(0);
      expect(r!.duplicates, formatRow(r!)).toBeLessThanOrEqual(r!.uncommittedWindow);
      expect(proxyFailures([r!])).toEqual([]);
    },
  );
});
