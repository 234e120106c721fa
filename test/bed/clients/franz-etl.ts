// franz-go (github.com/twmb/franz-go, pinned in test/bed/go/franzetl/go.mod) running its own KIP-848
// group ETL test pattern: test/bed/go/franzetl, a chain of KIP-848 groups with members joining and
// leaving, each level consuming one topic, producing to the next and committing.
//
// The program is built with `go build` from the Go module proxy (GOFLAGS=-mod=readonly: go.sum
// decides every module's bytes) into the bed's cache directory, keyed by a hash of its go.mod,
// go.sum and sources, so later runs do not call Go. `npm run bed:prefetch` builds it before the
// tests (CI runs that); a test that finds no binary builds it.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bedCacheDir } from '../kafka.js';
import { assertSucceeded, jsonLines, runProgram } from './run.js';
import type { ClientTarget, CommittedAtEnds } from './types.js';

const SOURCE_DIR = fileURLToPath(new URL('../go/franzetl/', import.meta.url));

export interface FranzEtlOptions {
  /** The chain's topics are `<prefix>-0` (written by the producer) to `<prefix>-<levels>`. */
  topicPrefix: string;
  records: number;
  partitions?: number;
  /** Groups in the chain (franz-go's test: 3). */
  levels?: number;
  /** Time between the two waves of members (franz-go's test: 5 s). */
  waveMs?: number;
  /** Autocommit interval (franz-go's default: 5 s). */
  autoCommitMs?: number;
  /** Spread producing over this long, so that the groups work through both waves. */
  produceOverMs?: number;
  /** The server-side assignor franz-go asks for: range or sticky (uniform); default sticky. */
  balancer?: 'range' | 'sticky';
  /** Static members, as franz-go's sticky/848/static case. */
  static?: boolean;
  timeoutMs?: number;
}

/** `committed` and `ends`: of every partition of the level's input topic. */
export interface FranzEtlLevel extends CommittedAtEnds {
  group: string;
  members: number;
  /** Distinct records of the input topic consumed, and records consumed again. */
  consumed: number;
  duplicates: number;
  /** Records in the output topic, distinct keys among them, keys 0..records-1 missing. */
  output: number;
  outputKeys: number;
  missingKeys: number;
  produceErrors: number;
  pollErrors: string[];
  checkError?: string;
}

export interface FranzEtlResult {
  produced: number;
  produceErrors: number;
  levels: FranzEtlLevel[];
  members: number;
  timedOut: boolean;
  /** Commits as the members saw them, by "how:outcome" (how: auto, round, revoke; outcome: ok or the error). */
  commits: Record<string, number>;
  elapsedMs: number;
}

function sourceHash(): string {
  const hash = createHash('sha256');
  for (const name of fs.readdirSync(SOURCE_DIR).sort())
    if (name === 'go.mod' || name === 'go.sum' || name.endsWith('.go'))
      hash
        .update(name)
        .update('\0')
        .update(fs.readFileSync(path.join(SOURCE_DIR, name)));
  return hash.digest('hex').slice(0, 12);
}

let built: Promise<string> | undefined;

/** The path of the built program, building it first where the cache does not have it. */
export function franzEtlBinary(): Promise<string> {
  built ??= buildFranzEtl();
  built.catch(() => (built = undefined));
  return built;
}

async function buildFranzEtl(): Promise<string> {
  const dir = path.join(bedCacheDir(), `franzetl-${sourceHash()}`);
  const binary = path.join(dir, 'franzetl');
  if (fs.existsSync(binary)) return binary;
  fs.mkdirSync(dir, { recursive: true });
  // Built beside and renamed: a build that stops half way leaves nothing that counts as built.
  const tmp = `${binary}.${process.pid}.tmp`;
  const result = await runProgram('go', ['build', '-o', tmp, '.'], {
    cwd: SOURCE_DIR,
    env: { ...process.env, GOFLAGS: '-mod=readonly -buildvcs=false' },
    timeoutMs: 600_000,
  }).catch((err: Error) => {
    throw new Error(`${err.message} (franz-go's ETL program is built with Go 1.26 or newer)`);
  });
  assertSucceeded('go build (test/bed/go/franzetl)', result);
  fs.renameSync(tmp, binary);
  return binary;
}

export async function franzEtl(target: ClientTarget, o: FranzEtlOptions): Promise<FranzEtlResult> {
  const binary = await franzEtlBinary();
  const timeoutMs = o.timeoutMs ?? 150_000;
  const args = ['--brokers', target.bootstrap, '--topic-prefix', o.topicPrefix];
  args.push('--records', String(o.records), '--partitions', String(o.partitions ?? 11));
  args.push('--levels', String(o.levels ?? 3), '--wave-delay', `${o.waveMs ?? 5000}ms`);
  args.push('--autocommit', `${o.autoCommitMs ?? 5000}ms`, '--produce-over', `${o.produceOverMs ?? 0}ms`);
  args.push('--timeout', `${timeoutMs}ms`);
  args.push('--balancer', o.balancer ?? 'sticky');
  if (o.static) args.push('--static');
  // Room to close every member and read back every topic and group after a timeout.
  const result = await runProgram(binary, args, { timeoutMs: timeoutMs + 90_000 });
  assertSucceeded(`franzetl ${o.topicPrefix}`, result);
  const done = jsonLines(result.stdout).find((l) => l['type'] === 'done');
  if (!done) throw new Error(`franzetl ${o.topicPrefix} printed no result:\n${result.stdout}`);
  return done as unknown as FranzEtlResult;
}
