// KOP_* variables: the names the repository itself uses are all known (options, or the listed
// non-option variables of the tests and benchmarks), so the proxy's refusal of unknown ones never
// trips over the project's own files; misspelt names get the nearest valid one as a hint.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { envName, OPTIONS } from '../../proxy/config.js';
import { environmentProblem, KNOWN_NON_OPTION_VARIABLES } from '../../proxy/config/env-strict.js';
import { editDistance, nearestName } from '../../proxy/config/nearest-name.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const optionVariables = new Set(OPTIONS.map((o) => envName(o.name)));

/** Files that name KOP_ variables on purpose without setting them: misspellings under test, placeholders. */
const EXEMPT_FILES = new Set([
  'test/unit/env-strict.test.ts',
  'test/integration/ops-config-strict.test.ts',
  'proxy/config/env-strict.ts',
]);
/** Not variables: KOP_NAME is deploy/helm's placeholder for "KOP_ + an option name". */
const PLACEHOLDERS = new Set(['KOP_NAME']);

describe('KOP_ variables of the repository', () => {
  test('every KOP_ variable the code, tests, scripts and deploy files use is an option or a known non-option variable', () => {
    const files = execFileSync('git', ['ls-files'], { cwd: repo, encoding: 'utf8' })
      .split('\n')
      .filter((f) =>
        /^(proxy|backends|bin|test|bench|scripts|deploy)\/|^(Dockerfile|docker-compose\.yml|package\.json)$/.test(
          f,
        ),
      )
      .filter((f) => !EXEMPT_FILES.has(f));
    const unknown = new Map<string, string>();
    for (const file of files) {
      let text: string;
      try {
        text = readFileSync(path.join(repo, file), 'utf8');
      } catch {
        continue; // deleted in the work tree
      }
      // Whole names only: KOP_BROKER_TLS_* in prose ends in '_'.
      for (const [name] of text.matchAll(/\bKOP_[A-Z0-9_]*[A-Z0-9]\b(?!_)/g)) {
        if (optionVariables.has(name) || KNOWN_NON_OPTION_VARIABLES.has(name) || PLACEHOLDERS.has(name))
          continue;
        unknown.set(name, file);
      }
    }
    expect(
      Object.fromEntries(unknown),
      'make it an option, list it in proxy/config/env-strict.ts, or rename it',
    ).toEqual({});
  });

  test('no known non-option variable is an option, and none is one typo away from an option', () => {
    for (const name of KNOWN_NON_OPTION_VARIABLES.keys()) {
      expect(optionVariables.has(name), name).toBe(false);
      // A test variable next to an option's name would swallow an operator's typo of that option.
      const closest = Math.min(...[...optionVariables].map((o) => editDistance(name, o)));
      expect(closest, `${name} is too close to an option's variable`).toBeGreaterThan(2);
    }
  });
});

describe('nearest name', () => {
  test.each([
    ['KOP_HTTP_TOKN', 'KOP_HTTP_TOKEN'],
    ['KOP_HTTP_TOEKN', 'KOP_HTTP_TOKEN'],
    ['KOP_LOGLEVEL', 'KOP_LOG_LEVEL'],
    ['KOP_STORE_URL', 'KOP_STORE'],
    ['KOP_BOOTSTRAP_SERVERS', 'KOP_BOOTSTRAP_SERVER'],
  ])('%s: %s', (given, expected) => {
    expect(nearestName(given, optionVariables)).toBe(expected);
  });

  test('no hint when nothing is close', () => {
    expect(nearestName('KOP_SOMETHING_ELSE_ENTIRELY', optionVariables)).toBeUndefined();
  });
});

describe('environmentProblem', () => {
  const secrets = new Set(['KOP_HTTP_TOKEN']);
  const check = (env: NodeJS.ProcessEnv) =>
    environmentProblem(env, optionVariables, secrets, (v) => nearestName(v, optionVariables));

  test('options, known non-option variables and other prefixes pass; an empty ordinary option is unset', () => {
    expect(
      check({ KOP_HTTP: 'a:1', KOP_BOOTSTRAP: 'b:2', KOP_LOG_LEVEL: '', KOPF: 'x', PATH: '/bin' }),
    ).toBeUndefined();
  });

  test('an unknown variable is named with the nearest option, its value not shown', () => {
    expect(check({ KOP_HTTP_TOKN: 's3cret' })).toEqual({
      variable: 'KOP_HTTP_TOKN',
      shown: '(not shown)',
      why: expect.stringMatching(/unknown environment variable.*did you mean KOP_HTTP_TOKEN\?$/),
    });
  });

  test('a Kubernetes service link gets the hint to turn them off', () => {
    expect(check({ KOP_PROXY_SERVICE_HOST: '10.0.0.1' })?.why).toMatch(/enableServiceLinks: false/);
    expect(check({ KOP_PROXY_PORT_9464_TCP_ADDR: '10.0.0.1' })?.why).toMatch(/enableServiceLinks: false/);
  });

  test('an empty secret is refused', () => {
    expect(check({ KOP_HTTP_TOKEN: '' })).toMatchObject({
      variable: 'KOP_HTTP_TOKEN',
      why: expect.stringMatching(/^empty/),
    });
  });
});
