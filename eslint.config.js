// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
