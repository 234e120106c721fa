// The folders are the layers (scripts/layers.js): every import of every product file is read and
// checked against them, so a forbidden import fails the tests as well as the lint.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { LAYERS, layerOf, layerViolation, resolveImport } from '../../scripts/layers.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Every specifier of a static import or export, a dynamic import(), or a type import('…'). */
function specifiers(text: string): string[] {
  const found: string[] = [];
  const patterns = [
    /^\s*(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/gm,
    /^\s*import\s*['"]([^'"]+)['"]/gm,
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const pattern of patterns) for (const m of text.matchAll(pattern)) found.push(m[1]!);
  return found;
}

/** `from: why` for each import of these files (repository-relative) that crosses a layer wrongly. */
function violations(files: readonly string[], read: (file: string) => string): string[] {
  const out: string[] = [];
  for (const from of files) {
    for (const spec of specifiers(read(from))) {
      const to = resolveImport(from, spec);
      const why = to === null ? null : layerViolation(from, to);
      if (why !== null) out.push(`${from}: ${why}`);
    }
  }
  return out;
}

const productFiles = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
  cwd: REPO,
  encoding: 'utf8',
})
  .split('\n')
  .filter((f) => /\.ts$/.test(f) && layerOf(f) !== null && fs.existsSync(path.join(REPO, f)));

describe('layers', () => {
  test('every layer folder exists and holds product code', () => {
    for (const layer of LAYERS) {
      expect(
        productFiles.some((f) => layerOf(f) === layer),
        layer.dir,
      ).toBe(true);
    }
  });

  test('no product file imports across the layers the wrong way', () => {
    expect(violations(productFiles, (f) => fs.readFileSync(path.join(REPO, f), 'utf8'))).toEqual([]);
  });

  test('a forbidden import is found, static, re-exported or dynamic', () => {
    const sources: Record<string, string> = {
      'proxy/core/x.ts': "import type { OffsetStore } from '../../backends/store.js';\n",
      'proxy/client/x.ts': "export { KafkaProxy } from '../offsets/service.js';\n",
      'proxy/offsets/x.ts': "const c = await import('../config.js');\n",
      'proxy/ops/lag/x.ts': "import { main } from '../../cli.js';\n",
      'backends/x.ts': "import { Reader } from '../protocol/reader.js';\n",
      'protocol/x.ts': "import '../proxy/core/server.js';\n",
      'proxy/core/y.ts': "import { connectionBed } from '../../test/harness/connection-bed.js';\n",
      // Allowed: a layer below, the same layer, a package, and any import of a test.
      'proxy/ops/http/ok.ts':
        "import { a } from '../../offsets/service.js';\nimport { b } from '../lag/x.js';\nimport c from 'ioredis';\n",
      'proxy/core/ok.test.ts': "import { s } from '../offsets/service.js';\n",
    };
    const found = violations(Object.keys(sources), (f) => sources[f]!);
    expect(found.map((line) => line.split(':')[0])).toEqual([
      'proxy/core/x.ts',
      'proxy/client/x.ts',
      'proxy/offsets/x.ts',
      'proxy/ops/lag/x.ts',
      'backends/x.ts',
      'protocol/x.ts',
      'proxy/core/y.ts',
    ]);
  });
});
