// A bounded fuzz run of the native relay's parsers (proxy/core/native/frames.h: the request
// classifier, the Produce acks reader, the Produce answer's NodeEndpoints walk): builds the driver
// proxy/core/native/fuzz.c with AddressSanitizer and UndefinedBehaviorSanitizer into
// build/native/fuzz/ and runs it from a fixed seed for at most the given seconds. `npm run fuzz:native`.
//
//   node scripts/native-fuzz.mjs [seconds (20)] [seed (41)]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const seconds = process.argv[2] ?? '20';
const seed = process.argv[3] ?? '41';
const out = path.join(repo, 'build/native/fuzz/fuzz');
mkdirSync(path.dirname(out), { recursive: true });
execFileSync(
  process.env.CC || 'cc',
  [
    '-O1',
    '-g',
    '-fsanitize=address,undefined',
    '-fno-sanitize-recover=undefined',
    '-fno-omit-frame-pointer',
    '-std=c11',
    '-D_GNU_SOURCE',
    '-Wall',
    '-Wextra',
    '-Werror',
    '-o',
    out,
    path.join(repo, 'proxy/core/native/fuzz.c'),
  ],
  { stdio: 'inherit' },
);
// Bounded by seconds, not by a count: the same seed gives the same inputs, as many as fit.
const run = spawnSync(out, [seed, '1000000000', seconds], {
  stdio: 'inherit',
  env: {
    ...process.env,
    ASAN_OPTIONS: 'abort_on_error=1',
    UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
  },
});
process.exit(run.status ?? 1);
