// The package as a user gets it (docs/operations.md "Installing from npm"):
// `npm pack`, then `npm install <tarball>` into a fresh project, then the
// installed copy used from ESM, CommonJS, TypeScript and its two command
// lines, against an rblkd started from the installed package too. Nothing of
// the checkout is on the consumer's module path; the npm cache supplies the
// dependencies (--prefer-offline).
// Alone, run it as `npx ava --timeout=5m test/package/pack-install.test.ts`:
// ava's configured 60 s is the time since the last test finished, which the
// other suites keep resetting in `npm test`, and t.timeout below does not
// lift it (measured: alone with the default, ava gives up at 60 s).
import test from 'ava';
import { execFile, spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, closeSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { dump } from 'js-yaml';
import { ROOT } from '../daemon/helpers/daemon-process.js';
import { CONSUMER, NO_AMBIENT_TYPES } from './helpers/consumer.js';

/** A bound with some room: the package is about 660 files (dist JS and .d.ts, native sources, docs, prebuilds; 658 measured with the NVMe/TCP front end in). It catches a stray directory, not growth. */
const MAX_FILES = 800;
/** Packages a consumer installs with rblk: 119 with the build tools as dependencies; without them, see the log. */
const MAX_PACKAGES = 90;
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const PACK_NQN = 'nqn.2026-12.io.rblk:pack-install';

interface PackResult {
  filename: string;
  entryCount: number;
  files: { path: string }[];
}

function run(cmd: string, args: string[], cwd: string, input?: string): SpawnSyncReturns<string> {
  const env = { ...process.env };
  // The consumer must find rblk's addon on its own, not through the checkout's override.
  delete env.RBLK_NATIVE;
  return spawnSync(cmd, args, { cwd, env, encoding: 'utf8', input, maxBuffer: 64 << 20 });
}

function ok(r: SpawnSyncReturns<string>, what: string): string {
  if (r.error !== undefined) throw new Error(`${what}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${what} exited ${String(r.status ?? r.signal)}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/**
 * run(), without blocking the event loop: for the commands that talk to the daemon this test
 * started, whose stderr it reads meanwhile (a full pipe would stall the daemon's writes).
 */
function runAsync(cmd: string, args: string[], cwd: string): Promise<string> {
  const env = { ...process.env };
  delete env.RBLK_NATIVE;
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** The TypeScript sources compiled into the package's dist/ (package.json `files`). */
const PACKED_SOURCES = ['native', 'protocol', 'target', 'initiator', 'config', 'bin-src'];

function sourcesUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `${dir}/${f}`);
}

/** The newest symbol version of `prefix` (GLIBC, GLIBCXX) that a shared object needs, from objdump -T. */
function newestVersion(file: string, prefix: string): string {
  const out = ok(spawnSync('objdump', ['-T', file], { encoding: 'utf8', maxBuffer: 16 << 20 }), `objdump -T ${file}`);
  const versions = [...out.matchAll(new RegExp(`\\(${prefix}_([\\d.]+)\\)`, 'g'))].map((m) => m[1]!.split('.').map(Number));
  versions.sort((a, b) => {
    for (let i = 0; i < Math.max(a.length, b.length); i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
    return 0;
  });
  return versions.at(-1)?.join('.') ?? 'none';
}

test('the packed tarball installs into a fresh project and works from ESM, CommonJS, TypeScript and its bins', async (t) => {
  t.timeout(300_000, 'npm pack builds, npm install unpacks ~90 packages, and the no-prebuilt case compiles');
  const dir = mkdtempSync(join(tmpdir(), 'rblk-pack-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  // --- the tarball: what it holds and what it leaves out
  const packed = JSON.parse(ok(run('npm', ['pack', '--json', '--pack-destination', dir], ROOT), 'npm pack')) as PackResult[];
  const pack = packed[0];
  const paths = pack.files.map((f) => f.path);
  t.true(pack.entryCount < MAX_FILES, `${pack.entryCount} files in the tarball`);
  t.deepEqual(
    paths.filter((p) => /^(test|bench|\.ci|scratch|build|examples)\//.test(p) || p.endsWith('.map') || p === 'scripts/setup.sh' || /^dist\/(test|bench)\//.test(p)),
    [],
  );
  // What docs/operations.md "Installing from npm" and "From source" tell a user to install from the package, too.
  for (const want of [
    'LICENSE',
    'README.md',
    'CMakeLists.txt',
    'bin/rblk.js',
    'bin/rblkd.js',
    'prebuilds/linux-x64/rblk_native.node',
    'native/src/core/addon.cc',
    'systemd/rblkd.service',
    'systemd/rblk.sysusers.conf',
    'config/rblkd.example.yaml',
    'config/rblkd.default.yaml',
    'docs/operations.md',
    'dist/initiator/index.d.ts',
    'scripts/install-native.js',
  ])
    t.true(paths.includes(want), `${want} in the tarball`);
  // dist/ is the compile of the sources as they are: no .js of a deleted source, none missing (scripts/prebuild.sh).
  t.deepEqual(
    paths.filter((p) => /^dist\/.*\.js$/.test(p) && !existsSync(join(ROOT, p.slice('dist/'.length).replace(/\.js$/, '.ts')))),
    [],
    'every packed .js has its source',
  );
  t.deepEqual(
    PACKED_SOURCES.flatMap(sourcesUnder).filter((f) => !paths.includes(`dist/${f.replace(/\.ts$/, '.js')}`) || !paths.includes(`dist/${f.replace(/\.ts$/, '.d.ts')}`)),
    [],
    'every source is packed compiled, with its declarations',
  );
  // The prebuilt needs what docs/operations.md says it needs, and no newer glibc or libstdc++.
  const claim = /it needs glibc (\d+\.\d+), the libstdc\+\+ of GCC \d+\s+\(GLIBCXX_([\d.]+)\)/.exec(readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8'));
  t.truthy(claim, 'docs/operations.md states the glibc and libstdc++ the prebuilt needs');
  const prebuilt = paths.filter((p) => /^prebuilds\/linux-x64\/.*\.node$/.test(p));
  t.deepEqual(
    {
      glibc: prebuilt.map((p) => newestVersion(join(ROOT, p), 'GLIBC')).sort((a, b) => a.localeCompare(b, 'en', { numeric: true })).at(-1),
      glibcxx: prebuilt.map((p) => newestVersion(join(ROOT, p), 'GLIBCXX')).sort((a, b) => a.localeCompare(b, 'en', { numeric: true })).at(-1),
    },
    { glibc: claim?.[1], glibcxx: claim?.[2] },
    'the newest GLIBC_ and GLIBCXX_ symbol versions of the prebuilt are the ones docs/operations.md names',
  );
  t.regex(readFileSync(join(ROOT, 'LICENSE'), 'utf8'), /Apache License\s+Version 2\.0/);

  // --- a fresh project that installs it
  const app = join(dir, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'rblk-consumer', version: '1.0.0', private: true }));
  ok(run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', join(dir, pack.filename)], app), 'npm install');
  const installed = join(app, 'node_modules', 'rblk');
  // The build tools come only when install-native.js must compile (test/package/install-deps.test.ts):
  // a consumer whose prebuilt fits downloads neither, nor their ~45 dependencies.
  t.deepEqual(
    ['cmake-js', 'node-addon-api'].filter((n) => existsSync(join(app, 'node_modules', n))),
    [],
    'build tools installed for the consumer',
  );
  const tree = ok(run('npm', ['ls', '--all', '--parseable'], app), 'npm ls').split('\n').filter((l) => l.includes('node_modules'));
  t.log(`${tree.length} packages installed with rblk`);
  t.true(tree.length < MAX_PACKAGES, `${tree.length} packages installed with rblk`);
  // The prebuilt fits this machine, so nothing was compiled, and running the install step again compiles nothing.
  t.false(existsSync(join(installed, 'build')), 'no local build in the installed package');
  ok(run(process.execPath, [join(installed, 'scripts', 'install-native.js')], installed), 'install-native.js');
  t.false(existsSync(join(installed, 'build')), 'install-native.js built nothing');
  t.true(existsSync(join(installed, 'dist', 'initiator', 'index.js')), 'dist/ is intact');
  // Every relative import of the installed JavaScript and declarations lands on a file of the
  // package: one into an unpacked folder (bench/, test/) would fail only on its code path.
  const unresolved: string[] = [];
  let imports = 0;
  for (const f of readdirSync(join(installed, 'dist'), { recursive: true, encoding: 'utf8' }).filter((n) => /\.(js|d\.ts)$/.test(n))) {
    const file = join(installed, 'dist', f);
    for (const m of readFileSync(file, 'utf8').matchAll(/(?:from\s+|import\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g)) {
      imports++;
      const target = join(dirname(file), f.endsWith('.d.ts') ? m[1]!.replace(/\.js$/, '.d.ts') : m[1]!);
      if (!existsSync(target)) unresolved.push(`dist/${f}: ${m[1]!}`);
    }
  }
  t.true(imports > 500, `only ${imports} relative imports found: is the pattern still right?`);
  t.deepEqual(unresolved, [], 'relative imports that miss in the installed package');

  // --- ESM: importing loads no native code (binding.ts loads on first use)
  const esm = ok(
    run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "import { connect } from 'rblk'; import { readFileSync } from 'node:fs';" +
          "console.log(typeof connect, readFileSync('/proc/self/maps', 'utf8').includes('rblk_native.node'));",
      ],
      app,
    ),
    'ESM import',
  );
  t.is(esm.trim(), 'function false');

  // --- CommonJS: require(esm)
  const cjs = ok(
    run(process.execPath, ['-e', "const r = require('rblk'); console.log(typeof r.connect, JSON.stringify(r.nativeFeatures()));"], app),
    'require',
  );
  // Every optional part of the prebuilt loads here.
  t.is(cjs.trim(), 'function {"io_uring":true,"fuse":true,"sd_notify":true,"rbd":true}');

  // --- TypeScript: the installed .d.ts files, checked without skipLibCheck
  writeFileSync(
    join(app, 'consumer.ts'),
    [
      "import { AbortError, connect, parseRblkUrl, RblkError, type Session, type Volume } from 'rblk';",
      'export async function roundTrip(url: string, data: Buffer): Promise<boolean> {',
      '  const session: Session = await connect(url);',
      "  const vol: Volume = await session.open(parseRblkUrl(url).volume ?? 'a');",
      '  await vol.write(0, data, { fua: true });',
      '  const back: Buffer = await vol.read(0, data.length);',
      '  await session.close();',
      '  return back.equals(data);',
      '}',
      // Uint8Array, AbortSignal and `await using` type-check for a consumer on ES2022 with @types/node.
      'export async function scoped(url: string, data: Uint8Array, signal: AbortSignal): Promise<Buffer> {',
      '  await using session = await connect(url);',
      '  await using vol = await session.open();',
      '  await vol.write(0, data, { signal });',
      '  return vol.read(0, new Uint8Array(data.length), { signal });',
      '}',
      'export const isRblkError = (e: unknown): boolean => e instanceof RblkError;',
      "export const isAbort = (e: unknown): boolean => e instanceof AbortError && e.code === 'ABORT_ERR';",
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        target: 'ES2022',
        strict: true,
        noEmit: true,
        // The consumer brings its own @types/node; this one borrows the checkout's.
        types: ['node'],
        typeRoots: [join(ROOT, 'node_modules', '@types')],
      },
      files: ['consumer.ts'],
    }),
  );
  ok(run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], app), 'tsc --noEmit');
  // A consumer with no ambient types ("types": [], TypeScript 6's default) and no @types/node of its
  // own: the declarations bring Node's types themselves (the @types/node dependency of the package).
  const bare = join(app, 'bare');
  mkdirSync(bare);
  writeFileSync(join(bare, 'consumer.ts'), CONSUMER);
  writeFileSync(join(bare, 'tsconfig.json'), JSON.stringify(NO_AMBIENT_TYPES));
  ok(run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], bare), 'tsc --noEmit with "types": []');

  // --- the CLI through npx
  t.is(ok(run('npx', ['--no-install', 'rblk', '--version'], app), 'npx rblk --version').trim(), VERSION);
  // The default config the docs install as /etc/rblk/rblkd.yaml passes the installed rblkd's check.
  t.is(ok(run('npx', ['--no-install', 'rblkd', '--check-config', join(installed, 'config', 'rblkd.default.yaml')], app), 'rblkd --check-config').trim(), 'OK');

  // --- rblkd from the installed package, on a free port, with one file-backed volume
  const image = join(dir, 'a.img');
  const configPath = join(dir, 'rblkd.yaml');
  writeFileSync(
    configPath,
    dump({
      nqn: PACK_NQN,
      listeners: [
        { provider: 'tcp', address: '127.0.0.1', port: 0 },
        { protocol: 'nvme-tcp', address: '127.0.0.1', port: 0 },
      ],
      volumes: [{ name: 'a', path: image, size: '4MiB', lun: 0 }],
      limits: { max_io: '128KiB', queue_depth: 16, drain_timeout_ms: 5000 },
      state_dir: join(dir, 'state'),
      control: { socket: join(dir, 'rblkd.ctl') },
    }),
  );
  const env = { ...process.env };
  for (const k of ['RBLK_NATIVE', 'NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'JOURNAL_STREAM']) delete env[k];
  const daemon = spawn(process.execPath, [join(app, 'node_modules', '.bin', 'rblkd'), '--config', configPath], { cwd: app, env, stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = once(daemon, 'exit');
  t.teardown(async () => {
    if (daemon.exitCode === null && daemon.signalCode === null) {
      daemon.kill('SIGKILL');
      await exited;
    }
  });
  let log = '';
  const [port, nvmePort] = await new Promise<[number, number]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`rblkd did not listen in 20 s:\n${log}`)), 20_000);
    daemon.stderr.setEncoding('utf8').on('data', (s: string) => {
      log += s;
      const m = /listening tcp 127\.0\.0\.1:(\d+)/.exec(log);
      const n = /listening nvme-tcp 127\.0\.0\.1:(\d+)/.exec(log);
      if (m && n) {
        clearTimeout(timer);
        resolve([Number(m[1]), Number(n[1])]);
      }
    });
    daemon.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`rblkd exited (${String(code)}) before listening:\n${log}`));
    });
  });

  // --- a write and a read through the installed library, in the consumer's own process
  const offset = 512 * 1024;
  const length = 64 * 1024;
  const script = join(app, 'round-trip.mjs');
  writeFileSync(
    script,
    [
      "import { connect } from 'rblk';",
      "import { createHash, randomBytes } from 'node:crypto';",
      "import { readFileSync } from 'node:fs';",
      `const session = await connect('rblk://127.0.0.1:${port}/a?provider=tcp');`,
      "const vol = await session.open('a');",
      `const data = randomBytes(${length});`,
      `await vol.write(${offset}, data, { fua: true });`,
      `const back = await vol.read(${offset}, ${length});`,
      'await session.close();',
      // The same volume as namespace 1 of the installed rblkd's NVMe/TCP listener, through the installed host.
      `const nvme = await connect('nvme+tcp://127.0.0.1:${nvmePort}/${PACK_NQN}');`,
      'const ns = await nvme.open(1);',
      `const viaNvme = await ns.read(${offset}, ${length});`,
      'const other = randomBytes(4096);',
      'await ns.write(0, other, { fua: true });',
      'const otherBack = await ns.read(0, 4096);',
      'await nvme.close();',
      "const addon = readFileSync('/proc/self/maps', 'utf8').split('\\n').find((l) => l.endsWith('rblk_native.node'))?.split(' ').pop();",
      "console.log(JSON.stringify({ equal: Buffer.compare(back, data) === 0, nvmeEqual: viaNvme.equals(data), nvmeWrite: otherBack.equals(other), sha: createHash('sha256').update(data).digest('hex'), addon }));",
      '',
    ].join('\n'),
  );
  const result = JSON.parse(ok(run(process.execPath, [script], app), 'round trip')) as { equal: boolean; nvmeEqual: boolean; nvmeWrite: boolean; sha: string; addon?: string };
  t.true(result.equal, 'the bytes read back are the bytes written');
  t.true(result.nvmeEqual, 'the installed NVMe/TCP host reads the same bytes from the installed listener');
  t.true(result.nvmeWrite, 'and reads back its own FUA write');
  t.is(result.addon, join(installed, 'prebuilds', 'linux-x64', 'rblk_native.node'), 'the addon came from the shipped prebuilt');

  // The daemon's backing file holds them too: the write reached the disk, not only a cache.
  const fd = openSync(image, 'r');
  const onDisk = Buffer.alloc(length);
  try {
    readSync(fd, onDisk, 0, length, offset);
  } finally {
    closeSync(fd);
  }
  t.is(createHash('sha256').update(onDisk).digest('hex'), result.sha);

  // --- the installed CLIs against it, as README "Using it" shows them
  const npx = (...args: string[]): Promise<unknown> => runAsync('npx', ['--no-install', ...args, '--json'], app).then((o) => JSON.parse(o) as unknown);
  const url = `rblk://127.0.0.1:${port}/a?provider=tcp`;
  const [discovered, info, bench, status] = (await Promise.all([
    npx('rblk', 'discover', `127.0.0.1:${port}`, '--provider', 'tcp'),
    npx('rblk', 'info', url),
    npx('rblk', 'bench', url, '--rw', 'read', '--size', '256KiB'),
    npx('rblkd', 'ctl', 'status', '--socket', join(dir, 'rblkd.ctl')),
  ])) as [{ volumes: { name: string; size: number; url: string }[] }, { name: string; size: number }, { ops: number; bytes: number }, { volumes: number; version: string }];
  t.deepEqual(
    discovered.volumes.map((v) => [v.name, v.size, v.url]),
    [['a', 4 << 20, url]],
  );
  t.like(info, { name: 'a', size: 4 << 20 });
  t.like(bench, { ops: 64, bytes: 256 << 10 });
  t.like(status, { volumes: 1, version: VERSION });

  daemon.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  t.is(code, 0, `rblkd drained and exited 0; it logged:\n${log}`);

  // --- a platform without a prebuilt: the install step compiles, and the local build is used
  rmSync(join(installed, 'prebuilds'), { recursive: true });
  ok(run(process.execPath, [join(installed, 'scripts', 'install-native.js')], installed), 'install-native.js without a prebuilt');
  t.true(existsSync(join(installed, 'build', 'Release', 'rblk_native.node')), 'cmake-js built the addon in the package');
  t.true(existsSync(join(installed, 'dist', 'initiator', 'index.js')), 'dist/ is intact after the build');
  const rebuilt = ok(
    run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "import { nativeFeatures } from 'rblk'; import { readFileSync } from 'node:fs';" +
          'const f = nativeFeatures();' +
          "const addon = readFileSync('/proc/self/maps', 'utf8').split('\\n').find((l) => l.endsWith('rblk_uring.node'))?.split(' ').pop();" +
          'console.log(JSON.stringify({ f, addon }));',
      ],
      app,
    ),
    'import after the build',
  );
  t.deepEqual(JSON.parse(rebuilt), {
    f: { io_uring: true, fuse: true, sd_notify: true, rbd: true },
    addon: join(installed, 'build', 'Release', 'rblk_uring.node'),
  });
});
