import test from 'ava';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { VERBS } from '../../bin-src/rblkd-ctl.js';
import { baseConfig, ROOT, runDaemon, spawnDaemon, workdir, type Workdir } from './helpers/daemon-process.js';

const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

test.serial('--check-config FILE prints OK and exits 0 for a valid file', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: '1MiB' }]));
  const r = await runDaemon(t, ['--check-config', w.configPath]);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, 'OK\n');
});

test.serial('--check-config with --config checks that file', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', memory: true, size: '1MiB' }]));
  const r = await runDaemon(t, ['--check-config', '--config', w.configPath]);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, 'OK\n');
});

test.serial('--check-config prints every error with its line and exits 78', async (t) => {
  const w = workdir(t);
  w.writeConfig(`volumes:\n  - name: a\n    memory: true\n    size: 1MiB\n    block_size: 520\nlimits:\n  max_sesions: 3\n`);
  const r = await runDaemon(t, ['--check-config', w.configPath]);
  t.is(r.code, 78);
  t.is(r.stdout, '');
  t.deepEqual(r.stderr.split('\n').filter((l) => l !== ''), [
    `${w.configPath}:5: volumes[0].block_size: must be 512 or 4096, not 520`,
    `${w.configPath}:7: limits.max_sesions: unknown key 'max_sesions' (did you mean 'max_sessions'?)`,
  ]);
});

test.serial('a start with invalid YAML exits 78 and says where', async (t) => {
  const w = workdir(t);
  w.writeConfig('volumes:\n  - name: a\n  bad: [\n');
  const r = await runDaemon(t, ['--config', w.configPath]);
  t.is(r.code, 78);
  t.regex(r.stderr, new RegExp(`^${w.configPath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3:\\d+: YAML syntax error: `, 'm'));
  t.notRegex(r.stderr, /listening/);
});

test.serial('a start with a missing config file exits 78 with one line', async (t) => {
  const w = workdir(t);
  const r = await runDaemon(t, ['--config', join(w.dir, 'absent.yaml')]);
  t.is(r.code, 78);
  t.is(r.stderr.trim(), `${join(w.dir, 'absent.yaml')}: does not exist`);
});

test.serial('--version prints the package version; a bad option is one line and exit 64', async (t) => {
  const v = await runDaemon(t, ['--version']);
  t.is(v.code, 0);
  t.is(v.stdout.trim(), version);
  const bad = await runDaemon(t, ['--bogus']);
  t.is(bad.code, 64);
  t.is(bad.stderr.trim(), 'rblkd: unknown option --bogus (see --help)');
  // A near miss gets the nearest name, as rblk's does (docs/cli.md "Errors say what happened").
  const typo = await runDaemon(t, ['--chek-config']);
  t.is(typo.code, 64);
  t.is(typo.stderr.trim(), 'rblkd: unknown option --chek-config: did you mean --check-config? (see --help)');
  const verb = await runDaemon(t, ['clt', 'status']);
  t.is(verb.code, 64);
  t.is(verb.stderr.trim(), "rblkd: unknown command 'clt': did you mean 'ctl'?; unexpected argument 'status' (see --help)");
  // --help names every verb rblkd ctl takes.
  const help = await runDaemon(t, ['--help']);
  t.is(help.code, 0);
  // yargs wraps the line: read it as one.
  const synopsis = /ctl <([^>]*)>/.exec(help.stdout.replace(/\s+/g, ' '))?.[0] ?? '';
  for (const v of VERBS) t.regex(synopsis, new RegExp(`[<|]${v}[ |>]`), `rblkd --help lacks ctl ${v}`);
});

/** A config whose second listener is on line 6, as written. */
function twoListeners(w: Workdir, second: string): string {
  return [
    `state_dir: ${w.state}`, // 1
    'volumes: [{name: a, memory: true, size: 1MiB}]', // 2
    'listeners:', // 3
    '  - provider: tcp', // 4
    '    address: 127.0.0.1', // 5
    `  - ${second}`, // 6
    '',
  ].join('\n');
}

test.serial('a listener whose port is in use fails the start with exit 1, naming the provider, address, port and config line', async (t) => {
  const w = workdir(t);
  const busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => busy.close(() => r())));
  const port = (busy.address() as AddressInfo).port;
  w.writeConfig(twoListeners(w, `{provider: tcp, address: 127.0.0.1, port: ${port}}`));
  const r = await runDaemon(t, ['--config', w.configPath]);
  t.is(r.code, 1);
  t.true(
    r.stderr.includes(`error: cannot start: cannot listen on tcp 127.0.0.1:${port} (${w.configPath}:6): fi_passive_ep: Address already in use (FI_EADDRINUSE)`),
    r.stderr,
  );
  t.notRegex(r.stderr, /rblkd ready/);
});

test.serial('a metrics port in use fails the start with exit 1, naming the endpoint, its address and the file', async (t) => {
  const w = workdir(t);
  const busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => busy.close(() => r())));
  const port = (busy.address() as AddressInfo).port;
  w.writeConfig(baseConfig(w, [{ name: 'a', memory: true, size: '1MiB' }], { metrics: { address: '127.0.0.1', port } }));
  const r = await runDaemon(t, ['--config', w.configPath]);
  t.is(r.code, 1);
  t.true(r.stderr.includes(`error: cannot start: cannot serve metrics on 127.0.0.1:${port} (${w.configPath}, metrics): the port is in use (EADDRINUSE)`), r.stderr);
  t.notRegex(r.stderr, /rblkd ready/);
});

test.serial('a state_dir that cannot be made is a config error (exit 78), naming it and how to choose another', async (t) => {
  // A regular file where a parent directory should be: mkdir fails with ENOTDIR even for root,
  // as /var/lib/rblk does with EACCES for a user who starts rblkd by hand. The check knows it
  // before anything opens, so the start is refused as --check-config refuses the file.
  const w = workdir(t);
  const blocker = join(w.dir, 'not-a-dir');
  writeFileSync(blocker, '');
  w.writeConfig(baseConfig(w, [{ name: 'a', memory: true, size: '1MiB' }], { state_dir: join(blocker, 'state') }));
  const check = await runDaemon(t, ['--check-config', w.configPath]);
  t.is(check.code, 78);
  const r = await runDaemon(t, ['--config', w.configPath]);
  t.is(r.code, 78);
  for (const text of [check.stderr, r.stderr]) {
    t.true(text.includes(`state_dir: cannot create ${blocker}/state: ${blocker} is not a directory (set state_dir in the file, or run with --state-dir DIR)`), text);
  }
  t.notRegex(r.stderr, /rblkd ready/);
  // --state-dir replaces it, and the same file starts.
  const d = spawnDaemon(t, ['--config', w.configPath, '--state-dir', w.state]);
  await d.port();
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});

test.serial('a listener address that is not this host\'s is a config error on its line, before anything starts', async (t) => {
  const w = workdir(t);
  w.writeConfig(twoListeners(w, '{provider: tcp, address: 192.0.2.1, port: 0}'));
  const check = await runDaemon(t, ['--check-config', w.configPath]);
  t.is(check.code, 78);
  t.regex(check.stderr, new RegExp(`${w.configPath}:6: listeners\\[1\\]\\.address: 192\\.0\\.2\\.1 is not an address of this host`));
  const start = await runDaemon(t, ['--config', w.configPath]);
  t.is(start.code, 78);
  t.regex(start.stderr, /listeners\[1\]\.address: 192\.0\.2\.1 is not an address of this host/);
});

test.serial('an uncaught exception is logged with its stack and exits 70', async (t) => {
  const script = [
    "import { createDaemonLogger } from './target/daemon/logger.ts';",
    "import { installCrashHandlers } from './target/daemon/signals.ts';",
    'installCrashHandlers(createDaemonLogger());',
    "setTimeout(() => { throw new Error('boom from a timer'); }, 0);",
  ].join('\n');
  const child = spawn(process.execPath, ['--import=tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
  t.is(code, 70);
  t.regex(stderr, /error: uncaught exception, exiting: Error: boom from a timer\n\s+at /);
});
