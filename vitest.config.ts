import { defineConfig } from 'vitest/config';

// Two projects: fast unit tests (no external processes), and integration tests that run against the
// real components the test bed starts (Kafka, Redis, ZooKeeper, real clients). Both run in `npm test`.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          // Fails the run when a test leaves a scratch directory behind (test/harness/scratch.ts).
          globalSetup: ['test/bed/scratch-check.ts'],
          // Behaviour, not speed: CPU-bound property tests must pass on a loaded machine as well.
          testTimeout: 60_000,
          include: [
            'protocol/**/*.test.ts',
            'proxy/**/*.test.ts',
            'backends/**/*.test.ts',
            'test/unit/**/*.test.ts',
          ],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/bed/scratch-check.ts', 'test/bed/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 240_000,
          // Brokers are heavy on a 2-core machine: integration files run one at a time, in one forked
          // process (`fileParallelism` is a root-only option and is ignored inside a project).
          pool: 'forks',
          poolOptions: { forks: { singleFork: true } },
        },
      },
    ],
  },
});
