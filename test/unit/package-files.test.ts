// What `npm pack` puts in the package: the compiled product code, the launcher, the protocol specs
// and NOTICE, and no test, test suite or test-only dependency. The file list is npm's own
// (`npm pack --dry-run`), run on a copy of the package whose dist/ holds exactly what
// tsconfig.build.json compiles, so a stale dist/ in a checkout neither hides nor fakes a finding.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The repository's sources tsconfig.build.json compiles (declaration files emit nothing). */
function compiledSources(): string[] {
  const tsc = path.join(REPO, 'node_modules/typescript/bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--listFilesOnly'], {
    cwd: REPO,
    encoding: 'utf8',
  });
  expect(run.status, run.stderr + run.stdout).toBe(0);
  return run.stdout
    .split('\n')
    .map((line) => line.trim())
    .filter(
      (file) => file.startsWith(REPO + path.sep) && !file.includes(`${path.sep}node_modules${path.sep}`),
    )
    .map((file) => path.relative(REPO, file))
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'));
}

/** npm's list of the files a package made of `sources` (compiled) would hold. */
function packedFiles(sources: readonly string[], dir: string): string[] {
  fs.copyFileSync(path.join(REPO, 'package.json'), path.join(dir, 'package.json'));
  fs.copyFileSync(path.join(REPO, 'NOTICE'), path.join(dir, 'NOTICE'));
  fs.cpSync(path.join(REPO, 'bin'), path.join(dir, 'bin'), { recursive: true });
  fs.cpSync(path.join(REPO, 'protocol/spec'), path.join(dir, 'protocol/spec'), { recursive: true });
  for (const source of sources) {
    const out = path.join(dir, 'dist', source.replace(/\.ts$/, '.js'));
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, '');
    fs.writeFileSync(`${out}.map`, '');
  }
  const run = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: dir,
    encoding: 'utf8',
  });
  expect(run.status, run.stderr).toBe(0);
  const [report] = JSON.parse(run.stdout) as { files: { path: string }[] }[];
  return report!.files.map((f) => f.path);
}

/** A file of a test or of a suite only tests use. */
const TEST_FILE = [
  /\.test\.(js|ts)(\.map)?$/,
  /(^|\/)(test|tests|testing|__tests__)\//,
  /^dist\/backends\/contract[^/]*$/,
  /^dist\/protocol\/generator\//,
];

/** The packages a source imports (bare specifiers, by package name). */
function importedPackages(source: string): string[] {
  const text = fs.readFileSync(path.join(REPO, source), 'utf8');
  const names = new Set<string>();
  for (const m of text.matchAll(
    /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+'([^'.][^']*)'|import\(\s*'([^'.][^']*)'\s*\)/g,
  )) {
    const spec = m[1] ?? m[2]!;
    if (spec.startsWith('node:')) continue;
    const parts = spec.split('/');
    names.add(spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!);
  }
  return [...names];
}

describe('the npm package', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-pack-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const sources = compiledSources();
  const files = packedFiles(sources, dir);

  test('holds the launcher, the compiled CLI and the protocol specs', () => {
    expect(files).toContain('bin/kafka-offset-proxy.js');
    expect(files).toContain('dist/proxy/cli.js');
    expect(files).toContain('dist/protocol/index.js');
    expect(files).toContain('NOTICE');
    expect(files.some((f) => f.startsWith('protocol/spec/') && f.endsWith('.json'))).toBe(true);
  });

  test('holds no test and no test suite', () => {
    expect(files.filter((f) => TEST_FILE.some((pattern) => pattern.test(f)))).toEqual([]);
  });

  test('ships no code that imports a development dependency', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    const devOnly = new Set(Object.keys(pkg.devDependencies));
    const declared = new Set(Object.keys(pkg.dependencies));
    const found: string[] = [];
    for (const source of sources) {
      for (const name of importedPackages(source)) {
        if (devOnly.has(name) || !declared.has(name)) found.push(`${source} imports ${name}`);
      }
    }
    expect(found).toEqual([]);
  });
});
