// Runs the native relay's tests (proxy/core/native-relay*.test.ts) against the addon built with
// AddressSanitizer and UndefinedBehaviorSanitizer (build/native/asan/, see build-native.mjs
// --sanitize): any out-of-bounds access, use after free or undefined behaviour in the addon aborts
// the run. `npm run test:native-asan`.
//
// Node is not built with ASan, so the runtime is preloaded (it must come before any other
// library), and leak detection is off: Node leaves allocations to the exit on purpose.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
execFileSync(process.execPath, [path.join(repo, 'scripts/build-native.mjs'), '--sanitize', '--require'], {
  stdio: 'inherit',
});
const cc = process.env.CC || 'gcc';
const libasan = execFileSync(cc, ['-print-file-name=libasan.so'], { encoding: 'utf8' }).trim();
if (!path.isAbsolute(libasan) || !existsSync(libasan)) {
  console.error(`native-asan: ${cc} knows no libasan.so (got "${libasan}"); install libasan (gcc's)`);
  process.exit(1);
}
const run = spawnSync(
  process.execPath,
  [
    path.join(repo, 'node_modules/vitest/vitest.mjs'),
    'run',
    '--project',
    'unit',
    'proxy/core/native-relay.test.ts',
    'proxy/core/native-relay-boundary.test.ts',
    'proxy/core/native-relay-fetch.test.ts',
  ],
  {
    cwd: repo,
    stdio: 'inherit',
    env: {
      ...process.env,
      KOP_RELAY_ADDON: path.join(repo, 'build/native/asan/kop-relay.node'),
      LD_PRELOAD: libasan,
      ASAN_OPTIONS: 'detect_leaks=0:abort_on_error=1',
      UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
    },
  },
);
process.exit(run.status ?? 1);
