/**
 * Reusable robustness check for any list of frames (encoded samples today, golden frames recorded
 * from real brokers later): every truncated prefix must throw ProtocolError, and every random byte
 * mutation must either decode or throw ProtocolError. Nothing else may escape, and a successful
 * decode may not hold more array elements than the frame has bytes (a hostile count must never make
 * the decoder allocate beyond the frame; strings and bytes are bounded by the Reader's length checks).
 */
import { ProtocolError } from '../errors.js';
import { decodeRequestFrame, decodeResponseFrame } from '../frames.js';

export type RobustnessFrame =
  | { name: string; kind: 'request'; frame: Buffer }
  | { name: string; kind: 'response'; apiKey: number; apiVersion: number; frame: Buffer };

export interface RobustnessOptions {
  /** Random mutations per frame (each flips 1-4 bytes). */
  mutations?: number;
  /** Seed for the mutation PRNG, so failures reproduce. */
  seed?: number;
  /** Check every truncated prefix (default true). */
  prefixes?: boolean;
}

export interface RobustnessFailure {
  name: string;
  what: string;
  error: unknown;
}

function decoderFor(f: RobustnessFrame): (b: Buffer) => unknown {
  if (f.kind === 'request') return (b) => decodeRequestFrame(b).body;
  return (b) => decodeResponseFrame(b, f.apiKey, f.apiVersion).body;
}

/** Counts the array elements reachable from a decoded value (Buffers are views: free). */
export function decodedWeight(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  if (Buffer.isBuffer(v)) return 0;
  if (Array.isArray(v)) {
    let n = v.length;
    for (const e of v) n += decodedWeight(e);
    return n;
  }
  let n = 0;
  for (const x of Object.values(v as Record<string, unknown>)) n += decodedWeight(x);
  return n;
}

/** xorshift32: tiny deterministic PRNG. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

/** Runs the checks; returns the failures (empty means robust). */
export function checkRobustness(
  frames: readonly RobustnessFrame[],
  opts: RobustnessOptions = {},
): RobustnessFailure[] {
  const failures: RobustnessFailure[] = [];
  const rand = prng(opts.seed ?? 0x5eed);
  const mutations = opts.mutations ?? 200;
  for (const f of frames) {
    const decode = decoderFor(f);
    const attempt = (bytes: Buffer, what: string, mustFail: boolean): void => {
      try {
        const body = decode(bytes);
        if (mustFail) failures.push({ name: f.name, what: `${what} decoded without error`, error: null });
        const weight = decodedWeight(body);
        if (weight > bytes.length) {
          failures.push({
            name: f.name,
            what: `${what} decoded to ${weight} elements from ${bytes.length} bytes`,
            error: null,
          });
        }
      } catch (e) {
        if (!(e instanceof ProtocolError)) failures.push({ name: f.name, what, error: e });
      }
    };
    try {
      decode(f.frame);
    } catch (e) {
      failures.push({ name: f.name, what: 'the intact frame does not decode', error: e });
      continue;
    }
    if (opts.prefixes ?? true) {
      for (let len = 0; len < f.frame.length; len++)
        attempt(f.frame.subarray(0, len), `prefix of ${len} bytes`, true);
    }
    for (let i = 0; i < mutations && f.frame.length > 0; i++) {
      const copy = Buffer.from(f.frame);
      const flips = 1 + (rand() % 4);
      const where: string[] = [];
      for (let k = 0; k < flips; k++) {
        const at = rand() % copy.length;
        // Mostly random bytes, sometimes the values that make lengths extreme.
        const special = [0x00, 0xff, 0x7f, 0x80];
        copy[at] = rand() % 3 === 0 ? special[rand() % special.length]! : rand() & 0xff;
        where.push(`${at}=${copy[at]}`);
      }
      attempt(copy, `mutation ${where.join(',')}`, false);
    }
  }
  return failures;
}
