// The built CLI refuses each invalid configuration with one line naming the key and exit code 2,
// whether the bad value comes from a flag, the environment or the YAML file.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, test } from 'vitest';
import { ensureBuilt } from '../harness/proxy.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const bin = path.join(repo, 'bin/kafka-offset-proxy.js');

function run(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): { code: number | null; stdout: string; stderr: string } {
  // A clean environment: KOP_* variables of the developer's shell must not leak in.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KOP_')));
  const r = spawnSync(process.execPath, [bin, ...args], {
    env: { ...base, ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('invalid configuration', () => {
  let dir: string;
  beforeAll(async () => {
    await ensureBuilt();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-config-'));
    return () => fs.rmSync(dir, { recursive: true, force: true });
  });

  const yaml = (name: string, text: string): string => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, text);
    return file;
  };

  const cases: { name: string; args: () => string[]; env?: NodeJS.ProcessEnv; key: string }[] = [
    {
      name: 'unknown flag',
      args: () => ['--bootstrap-server', 'k:9092', '--lag-intervall-ms', '5'],
      key: 'lag-intervall-ms',
    },
    {
      name: 'bad port',
      args: () => ['--bootstrap-server', 'k:9092', '--http', '127.0.0.1:70000'],
      key: 'http',
    },
    {
      name: 'bad enum',
      args: () => ['--bootstrap-server', 'k:9092', '--commit-guard', 'maybe'],
      key: 'commit-guard',
    },
    {
      name: 'bad number',
      args: () => ['--bootstrap-server', 'k:9092', '--lag-max-groups', '0'],
      key: 'lag-max-groups',
    },
    {
      name: 'bad boolean in the environment',
      args: () => ['--bootstrap-server', 'k:9092'],
      env: { KOP_MIRROR_COMMITS: 'perhaps' },
      key: 'mirror-commits',
    },
    {
      name: 'bad YAML key',
      args: () => ['--config', yaml('bad-key.yaml', 'bootstrap-server: k:9092\nhttp-tokn: x\n')],
      key: 'http-tokn',
    },
    {
      name: 'bad YAML value',
      args: () => ['--config', yaml('bad-value.yaml', 'bootstrap-server: k:9092\nlog-level: loud\n')],
      key: 'log-level',
    },
    {
      name: 'YAML that is not YAML',
      args: () => ['--config', yaml('broken.yaml', 'bootstrap-server: [k:9092\n')],
      key: 'config',
    },
    { name: 'missing bootstrap', args: () => ['--http', '127.0.0.1:9464'], key: 'bootstrap-server' },
    { name: 'empty token', args: () => ['--bootstrap-server', 'k:9092', '--http-token='], key: 'http-token' },
  ];

  test.each(cases)('$name: one line naming $key, exit 2', ({ args, env, key }) => {
    const r = run(args(), env);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^kafka-offset-proxy: invalid configuration: ${key}=`));
  });

  test('--help lists every option and exits 0', () => {
    const r = run(['--help']);
    expect(r.code).toBe(0);
    for (const name of [
      'bootstrap-server',
      'http',
      'http-token',
      'lag-interval-ms',
      'lag-groups-include',
      'lag-groups-exclude',
      'lag-max-groups',
      'metrics-api-versions',
      'mirror-commits',
    ]) {
      expect(r.stdout).toContain(`--${name} `);
    }
  });
});
