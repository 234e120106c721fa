/**
 * Where option values come from, in precedence order: flags, then KOP_* environment variables,
 * then the YAML file named by --config. Names are checked here (an unknown flag, variable or key
 * is refused with the nearest known name); values are checked by config.ts.
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import type { parse as ParseYaml } from 'yaml';
import { ConfigError } from './config-error.js';
import { environmentProblem } from './env-strict.js';
import { nearestName } from './nearest-name.js';
import { allowedForm, envName, holdsSecret, OPTION_BY_NAME, OPTIONS } from './options.js';

/** " (did you mean --http-token?)"-style hint for a misspelt option name, or ''. */
function didYouMean(given: string, prefix = ''): string {
  const guess = nearestName(
    given,
    OPTIONS.filter((o) => o.name !== 'config' || prefix === '--').map((o) => o.name),
  );
  return guess === undefined ? '' : `; did you mean ${prefix}${guess}?`;
}

/** Reads flags (argv without the command), the environment and the YAML file into raw strings. */
export function collectRaw(argv: readonly string[], env: NodeJS.ProcessEnv): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--'))
      throw new ConfigError('argument', arg, 'unexpected argument (options start with --; see --help)');
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const spec = OPTION_BY_NAME.get(name);
    // Only the flag is shown: the value of a misspelt --http-tokn=... may be a secret.
    if (!spec)
      throw new ConfigError(
        name,
        arg.slice(0, eq < 0 ? undefined : eq),
        `unknown option (see --help)${didYouMean(name, '--')}`,
      );
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else if (spec.kind === 'bool' && (argv[i + 1] === undefined || argv[i + 1]!.startsWith('--')))
      value = 'true';
    else value = argv[++i];
    if (value === undefined)
      throw new ConfigError(name, null, `missing value: expected ${allowedForm(spec)}`);
    flags.set(name, value);
  }

  const envProblem = environmentProblem(
    env,
    new Set(OPTIONS.map((o) => envName(o.name))),
    new Set(OPTIONS.filter(holdsSecret).map((o) => envName(o.name))),
    (variable) =>
      nearestName(
        variable,
        OPTIONS.map((o) => envName(o.name)),
      ),
  );
  if (envProblem !== undefined) throw new ConfigError(envProblem.variable, envProblem.shown, envProblem.why);

  const merged = new Map<string, string>();
  const file = flags.get('config') ?? env[envName('config')];
  if (file !== undefined) {
    for (const [k, v] of readYaml(file)) merged.set(k, v);
  }
  for (const spec of OPTIONS) {
    const v = env[envName(spec.name)];
    if (v !== undefined && v !== '') merged.set(spec.name, v);
  }
  for (const [k, v] of flags) merged.set(k, v);
  if (file !== undefined) merged.set('config', file);
  return merged;
}

const requireCjs = createRequire(import.meta.url);

/** yaml is loaded when a config file is read: a proxy configured by its flags does not hold it. */
function parseYaml(text: string): unknown {
  return (requireCjs('yaml') as { parse: typeof ParseYaml }).parse(text);
}

function readYaml(file: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError('config', file, `cannot read: ${fileProblem(err)}; expected a readable file`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError('config', file, `not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const out = new Map<string, string>();
  if (doc === null || doc === undefined) return out;
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new ConfigError('config', file, 'expected a mapping of option names to values');
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    if (!OPTION_BY_NAME.has(k) || k === 'config')
      throw new ConfigError(
        k,
        '(not shown)',
        `unknown key in ${file} (the keys are the option names of --help)${didYouMean(k)}`,
      );
    // `http-token:` with nothing after it is YAML's null: an empty value, which each option's
    // check refuses, not the text "null" (that would have been a token).
    if (v === null) out.set(k, '');
    else if (Array.isArray(v)) out.set(k, v.map(String).join(','));
    else if (v !== null && typeof v === 'object') {
      out.set(
        k,
        Object.entries(v as Record<string, unknown>)
          .map(([a, b]) => `${a}=${String(b)}`)
          .join(','),
      );
    } else out.set(k, String(v));
  }
  return out;
}

/** A file system error as a short reason (the code and what it means), not Node's full message. */
export function fileProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  const reasons: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    EISDIR: 'is a directory',
    ENOTDIR: 'a part of the path is not a directory',
    EROFS: 'read-only file system',
    ENOSPC: 'no space left on the device',
    ELOOP: 'too many symbolic links',
    ENAMETOOLONG: 'name too long',
  };
  if (code !== undefined && reasons[code] !== undefined) return `${reasons[code]} (${code})`;
  return code ?? (err instanceof Error ? err.message : String(err));
}
