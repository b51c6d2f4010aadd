// The published declarations stand alone (issue 28 §4): a TypeScript project
// with no ambient types ("types": [], the default from TypeScript 6 on) that
// imports 'rblk' type-checks with no error, without skipLibCheck. The package
// is the checkout's, found as node_modules/rblk (a symlink); the packed
// tarball gets the same check in test/package/pack-install.test.ts.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../cli/helpers/cli.js';
import { CONSUMER, NO_AMBIENT_TYPES } from './helpers/consumer.js';

test('a project with "types": [] that imports rblk type-checks with no error', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-types-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'rblk'));
  writeFileSync(join(dir, 'consumer.ts'), CONSUMER);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(NO_AMBIENT_TYPES));
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: dir, encoding: 'utf8' });
  const errors = r.stdout.split('\n').filter((l) => /error TS\d+/.test(l));
  t.deepEqual(errors.slice(0, 5), [], `${errors.length} errors`);
  t.is(r.status, 0, r.stdout + r.stderr);
});
