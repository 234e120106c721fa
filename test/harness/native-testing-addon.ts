// The test build of the native relay addon (scripts/build-native.mjs --testing): the production
// addon plus the entry points only the tests use, which `npm run build` leaves out. It is built
// here when missing or older than its sources, so a test always runs the source it sits beside.
// KOP_RELAY_ADDON names another build to load instead (the sanitizer build, scripts/native-asan.mjs).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RelayBinding } from '../../proxy/core/native-relay.js';

/** The addon with its test-only functions: the Produce walks of native/frames.h. */
export interface RelayTestingBinding extends RelayBinding {
  produceAnswerUnchanged(payload: Buffer, apiVersion: number): boolean;
  produceAcks(payload: Buffer, apiVersion: number, flexible: boolean): number;
  /** The context's next handback fails as a Node-API call would (it ends the pair instead). */
  failNextHandback(context: object): void;
  /**
   * Where a Fetch v16-18 answer's (`payload`, after its size prefix) top-level tagged fields
   * start, walked in two pieces cut at `cut`: -1 malformed, -2 it ends before them.
   */
  fetchWalk(payload: Buffer, cut: number): number;
  /** Whether a Fetch answer's top-level tagged fields may go as written (no NodeEndpoints). */
  fetchTailUnchanged(section: Buffer): boolean;
}

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The file of the test build loadTestingRelay loads (for a worker thread to load it too). */
export function testingRelayFile(): string {
  return process.env['KOP_RELAY_ADDON'] ?? path.join(repo, 'build/native/testing/kop-relay.node');
}

export function loadTestingRelay(): RelayTestingBinding {
  const chosen = process.env['KOP_RELAY_ADDON'];
  const file = testingRelayFile();
  if (chosen === undefined) {
    const dir = path.join(repo, 'proxy/core/native');
    const sources = readdirSync(dir)
      .filter((f) => /\.[ch]$/.test(f) && f !== 'fuzz.c')
      .map((f) => path.join(dir, f));
    const newest = Math.max(...sources.map((f) => statSync(f).mtimeMs));
    if (!existsSync(file) || statSync(file).mtimeMs < newest) {
      execFileSync(
        process.execPath,
        [path.join(repo, 'scripts/build-native.mjs'), '--testing', '--require'],
        {
          stdio: 'inherit',
        },
      );
    }
  }
  const binding = createRequire(import.meta.url)(file) as RelayTestingBinding;
  if (typeof binding.produceAcks !== 'function') throw new Error(`${file} is not a test build of the addon`);
  return binding;
}
