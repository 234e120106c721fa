// @ts-check
import path from 'node:path';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { layerViolation, resolveImport } from './scripts/layers.js';

/**
 * layers/imports: an import that crosses the layers of scripts/layers.js the wrong way is an
 * error naming both layers (the folder is the layer: see docs/design.md).
 * @type {import('eslint').Rule.RuleModule}
 */
const layerImports = {
  meta: {
    type: 'problem',
    schema: [],
    docs: { description: 'imports follow the layers of scripts/layers.js' },
  },
  create(context) {
    const from = path
      .relative(import.meta.dirname, context.filename)
      .split(path.sep)
      .join('/');
    /** @param {import('estree').Node | null | undefined} source */
    const check = (source) => {
      if (source?.type !== 'Literal' || typeof source.value !== 'string') return;
      const to = resolveImport(from, source.value);
      const why = to === null ? null : layerViolation(from, to);
      if (why !== null) context.report({ node: source, message: why });
    };
    return {
      ImportDeclaration: (node) => check(node.source),
      ExportNamedDeclaration: (node) => check(node.source),
      ExportAllDeclaration: (node) => check(node.source),
      ImportExpression: (node) => check(node.source),
    };
  },
};

/** Every one of the 183 codec modules at once: 10 MB of RSS for a process that reads a few dozen APIs. */
const ALL_CODECS = {
  group: ['**/messages/index.js'],
  message:
    'imports every codec: take names, versions and types from protocol/messages/api-info.js; a codec loads through protocol/codec-registry.ts',
};

/** The Redis client, 12 MB of RSS, for a proxy on another store too. */
const IOREDIS = {
  name: 'ioredis',
  allowTypeImports: true,
  message: 'only the Redis store (backends/redis-*.ts, loaded with it) loads the Redis client',
};

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'coverage/', 'protocol/spec/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Type-aware: the rules below need the type checker (tsconfig.json, which covers every file).
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      // A promise nobody awaits loses its rejection (an unhandled rejection ends the process):
      // fire-and-forget is written `void p` with the rejection handled inside or by a .catch.
      '@typescript-eslint/no-floating-promises': 'error',
      // An async function where a callback's result is ignored (an event listener, a forEach)
      // drops its rejection the same way.
      '@typescript-eslint/no-misused-promises': 'error',
      // A switch over a union handles every member, so a new member is a compile-time question.
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true, requireDefaultForNonUnion: false },
      ],
    },
  },
  {
    plugins: { layers: { rules: { imports: layerImports } } },
    rules: { 'layers/imports': 'error' },
  },
  // What the proxy loads at start is what it holds at rest (docs/benchmarks.md, memory at rest).
  {
    files: ['proxy/**/*.ts', 'backends/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: [ALL_CODECS], paths: [IOREDIS] }],
    },
  },
  {
    files: ['backends/redis-*.ts'],
    // connection-problem.ts reads reply codes for every store.
    ignores: ['**/*.test.ts', 'backends/redis-reply.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [ALL_CODECS] }] },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
      },
    },
  },
);
