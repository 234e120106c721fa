#!/usr/bin/env bash
# The long fuzz run of issue #7: a million fuzz connections (or $1) through a live proxy, with the
# same checks as the short run in `npm test` (test/integration/reliability-fuzz.test.ts). Builds
# nothing; starts the test bed (Kafka, Redis, ZooKeeper) through vitest's global setup.
#
#   test/reliability/fuzz-long.sh [frames] [seed]
#
# About 3.6 ms per connection on a 2-core machine: a million takes roughly an hour. The RSS limit
# stays at 96 MB of growth from the first round's peak to the peak of the later half.
set -euo pipefail
cd "$(dirname "$0")/../.."
export KOP_FUZZ_FRAMES="${1:-1000000}"
if [[ -n "${2:-}" ]]; then export KOP_FUZZ_SEED="$2"; fi
exec npx vitest run --project integration test/integration/reliability-fuzz.test.ts \
  --testTimeout=$((KOP_FUZZ_FRAMES / 50 * 1000 + 120000))
