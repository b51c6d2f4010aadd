// Type-aware lint over every TypeScript file tsconfig.test.json compiles
// (production code, tests, bench, bin-src, examples). The rules are chosen,
// not a preset: each one guards a promise that nobody handles, which in
// rblkd is an unhandled rejection, and the daemon exits on those
// (docs/operations.md). `npm test` runs it before ava.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'build/**', 'node_modules/**', 'bin/**', 'bench/out/**', 'scratch/**'] },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        // One program for the whole tree: quicker than a service per file.
        project: './tsconfig.test.json',
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A promise must be awaited, returned, or given a rejection handler.
      // `void p` also passes this rule (ignoreVoid): it is kept for promises
      // written never to reject, never to silence one (README "Development").
      '@typescript-eslint/no-floating-promises': ['error', { ignoreVoid: true, ignoreIIFE: false }],
      // A promise where a plain value or a void callback is expected (an
      // `if (p)`, an async function handed to an event emitter) is one nobody
      // awaits either.
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  {
    // Intervals and deadlines in the shipped code are measured on the monotonic
    // clock: Date.now() jumps with NTP steps and `date -s`, which would end live
    // sessions at once or leave dead ones for the size of the step.
    files: ['target/**/*.ts', 'initiator/**/*.ts', 'protocol/**/*.ts', 'native/**/*.ts', 'bin-src/**/*.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'Use performance.now() for intervals and deadlines; Date.now() only for a wall-clock time (with a comment saying so).' },
      ],
    },
  },
);
