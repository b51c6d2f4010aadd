// `rblk` and `rblkd ctl` load only what the verb needs (docs/performance.md
// "Command start-up"): asserted on what is loaded, never on time. A preload
// records every module: ESM through a module.register() load hook, CommonJS
// through Module._load, and the shared objects mapped at exit
// (/proc/self/maps), which is where the native addon would show.
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, tempDir } from './helpers/cli.js';

const HOOKS = `
import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  appendFileSync(process.env.RBLK_TEST_LOADED, url + '\\n');
  return next(url, context);
}
`;

const PRELOAD = (hooks: string): string => `
const Module = require('node:module');
const { appendFileSync, readFileSync } = require('node:fs');
const { pathToFileURL } = require('node:url');
const out = process.env.RBLK_TEST_LOADED;
Module.register(pathToFileURL(${JSON.stringify(hooks)}).href);
const load = Module._load;
Module._load = function (request, parent, isMain) {
  const r = load.apply(this, arguments);
  try { appendFileSync(out, 'cjs:' + Module._resolveFilename(request, parent, isMain) + '\\n'); } catch {}
  return r;
};
process.on('exit', () => {
  for (const l of readFileSync('/proc/self/maps', 'utf8').split('\\n')) if (l.endsWith('.node')) appendFileSync(out, 'mapped:' + l.split(' ').pop() + '\\n');
});
`;

interface Loaded {
  code: number | null;
  /** Every module and mapped object, paths relative to the checkout. */
  modules: string[];
}

async function loadedBy(t: ExecutionContext, entry: string, args: string[]): Promise<Loaded> {
  const dir = await tempDir(t, 'lazy');
  const hooks = join(dir, 'hooks.mjs');
  const preload = join(dir, 'preload.cjs');
  const out = join(dir, 'loaded.txt');
  writeFileSync(hooks, HOOKS);
  writeFileSync(preload, PRELOAD(hooks));
  writeFileSync(out, '');
  const child = spawn(process.execPath, ['--require', preload, '--import=tsx', join(ROOT, 'bin-src', entry), ...args], {
    cwd: ROOT,
    env: { ...process.env, RBLK_TEST_LOADED: out },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  const modules = readFileSync(out, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.replace(/^(cjs:|mapped:)?(file:\/\/)?/, '').replace(ROOT, ''));
  return { code, modules };
}

/** What no verb's --help, and no `rblkd ctl` verb, needs. */
const HEAVY = [/^node_modules\/ajv\//, /^node_modules\/winston\//, /^node_modules\/prom-client\//, /\.node$/, /^native\//, /^initiator\/nbd\//, /^target\/backend\//];

function heavy(modules: string[]): string[] {
  return [...new Set(modules.filter((m) => HEAVY.some((h) => h.test(m))))];
}

test('rblk --help loads no command module, no NBD server, no addon', async (t) => {
  const r = await loadedBy(t, 'rblk.ts', ['--help']);
  t.is(r.code, 0);
  t.true(r.modules.some((m) => m.startsWith('initiator/cli/main.ts')), 'the preload saw the CLI load');
  t.deepEqual(r.modules.filter((m) => m.startsWith('initiator/cli/commands/')), []);
  t.deepEqual(heavy(r.modules), []);
});

test('rblk read --help loads read and no other verb', async (t) => {
  const r = await loadedBy(t, 'rblk.ts', ['read', '--help']);
  t.is(r.code, 0);
  t.deepEqual([...new Set(r.modules.filter((m) => m.startsWith('initiator/cli/commands/')))], ['initiator/cli/commands/read.ts']);
  t.deepEqual(heavy(r.modules), []);
});

for (const args of [['ctl', '--help'], ['ctl', 'status', '--socket', '/nonexistent/rblkd.ctl'], ['--help']]) {
  test(`rblkd ${args.join(' ')} loads neither ajv, winston, the backends nor the addon`, async (t) => {
    const r = await loadedBy(t, 'rblkd.ts', args);
    t.true(r.modules.some((m) => m.startsWith('bin-src/rblkd.ts')), 'the preload saw rblkd load');
    t.deepEqual(heavy(r.modules), []);
    // The configuration's schema, loader and check (which bring the backend registry and ajv) are the daemon's.
    t.deepEqual([...new Set(r.modules.filter((m) => /^config\/(schema|loader|check|resolve)\.ts$/.test(m)))], []);
  });
}
