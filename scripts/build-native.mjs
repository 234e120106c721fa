// Compiles the relay's native path (proxy/core/native/relay-*.c) into dist/native/kop-relay.node, a
// Node-API addon, with the machine's C compiler and the headers of the Node that runs this script
// (its own node_api.h and uv.h: the addon uses Node's libuv, so they must be this Node's).
// `npm run build` runs it after tsc. Without a compiler or the headers it prints why and exits 0:
// the proxy then relays in JavaScript alone (--native-relay auto), unless --require is given
// (CI), which makes it exit 1.
//
//   node scripts/build-native.mjs [--require] [--testing] [--sanitize]
//
// --testing builds the test build instead, build/native/testing/kop-relay.node: the same addon with
// the entry points only the tests use (-DRELAY_TESTING_BUILD), which the production build leaves out.
// --sanitize (with --testing) builds it with AddressSanitizer and UndefinedBehaviorSanitizer into
// build/native/asan/kop-relay.node (scripts/native-asan.mjs runs the tests against it).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The addon's sources (relay.h lists what each does); fuzz.c is the parsers' fuzz driver. */
const NATIVE_SOURCES = ['relay-loop.c', 'relay-report.c', 'relay-napi.c', 'c-stderr.c'].map((f) =>
  path.join(repo, 'proxy/core/native', f),
);
const required = process.argv.includes('--require');
const testing = process.argv.includes('--testing') || process.argv.includes('--sanitize');
const sanitize = process.argv.includes('--sanitize');
const out = sanitize
  ? path.join(repo, 'build/native/asan/kop-relay.node')
  : testing
    ? path.join(repo, 'build/native/testing/kop-relay.node')
    : path.join(repo, 'dist/native/kop-relay.node');

/** AddressSanitizer and UndefinedBehaviorSanitizer, any undefined behaviour fatal. */
const SANITIZE_FLAGS = [
  '-fsanitize=address,undefined',
  '-fno-sanitize-recover=undefined',
  '-fno-omit-frame-pointer',
  '-g',
];

/** Where this Node's headers are: beside its binary (official builds, Debian's and NodeSource's packages). */
function nodeIncludeDir() {
  const candidates = [
    path.resolve(path.dirname(process.execPath), '../include/node'),
    '/usr/include/node',
    '/usr/local/include/node',
  ];
  return candidates.find(
    (dir) => existsSync(path.join(dir, 'node_api.h')) && existsSync(path.join(dir, 'uv.h')),
  );
}

/** @param {string} why @returns {never} */
function fail(why) {
  console.error(`build-native: the native relay is not built: ${why}; the proxy relays in JavaScript alone`);
  process.exit(required ? 1 : 0);
}

const include = nodeIncludeDir();
if (include === undefined) fail(`no Node headers (node_api.h, uv.h) beside ${process.execPath}`);
const cc = process.env.CC || 'cc';
mkdirSync(path.dirname(out), { recursive: true });
// Written beside and renamed: test files that build it at once each see a whole file.
const partial = `${out}.${process.pid}.tmp`;
try {
  execFileSync(
    cc,
    [
      sanitize ? '-O1' : '-O2',
      ...(sanitize ? SANITIZE_FLAGS : []),
      ...(testing ? ['-DRELAY_TESTING_BUILD'] : []),
      '-std=c11',
      '-D_GNU_SOURCE',
      '-Wall',
      '-Wextra',
      '-Werror',
      '-fPIC',
      '-shared',
      '-fvisibility=hidden',
      `-I${include}`,
      '-o',
      partial,
      ...NATIVE_SOURCES,
    ],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  renameSync(partial, out);
} catch (err) {
  const { code, status } = /** @type {{ code?: string, status?: number }} */ (err);
  fail(`${cc} failed (${code ?? `exit code ${status}`})`);
}
