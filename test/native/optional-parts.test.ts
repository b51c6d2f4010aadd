// A build without the optional native parts (docs/architecture.md "Loading
// the addon"): the fabric still works, io_uring falls back to the thread
// pool, and FUSE and sd_notify fail alone, with ERR_RBLK_FEATURE_UNAVAILABLE
// naming the Debian package that brings them back.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = fileURLToPath(new URL('./helpers/optional-parts-main.ts', import.meta.url));

interface Failure {
  name: string;
  code: string;
  errno: number;
  op: string;
  package: string;
  message: string;
}

interface Report {
  io_uring: Failure;
  fuse: Failure;
  sd_notify: Failure;
  rbd: Failure;
  features: Record<string, boolean>;
  providers: string[];
  engine: string | null;
  explicitEngine: Failure;
  mount: Failure;
  notified: boolean;
}

test('without liburing, libfuse3, libsystemd and librbd parts only their features fail, each naming its package', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-core-only-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(join(ROOT, 'build', 'Release', 'rblk_native.node'), join(dir, 'rblk_native.node'));
  const env = { ...process.env, RBLK_NATIVE: dir, NOTIFY_SOCKET: join(dir, 'notify') };
  const r = spawnSync(process.execPath, ['--import=tsx', MAIN], { cwd: ROOT, env, encoding: 'utf8' });
  t.is(r.status, 0, r.stderr);
  const report = JSON.parse(r.stdout) as Report;

  const expect: [keyof Report & ('io_uring' | 'fuse' | 'sd_notify' | 'rbd'), string, string][] = [
    ['io_uring', 'liburing-dev', 'rblk_uring.node'],
    ['fuse', 'libfuse3-dev', 'rblk_fuse.node'],
    ['sd_notify', 'libsystemd-dev', 'rblk_systemd.node'],
    ['rbd', 'librbd-dev', 'rblk_rbd.node'],
  ];
  for (const [feature, pkg, file] of expect) {
    const f = report[feature];
    t.is(f.code, 'ERR_RBLK_FEATURE_UNAVAILABLE', feature);
    t.is(f.package, pkg, feature);
    t.is(f.op, `load ${file}`, feature);
    t.true(f.errno > 0, feature);
    t.true(f.message.includes(`apt-get install ${pkg}`), f.message);
  }
  t.deepEqual(report.features, { io_uring: false, fuse: false, sd_notify: false, rbd: false });

  // The core still loads and finds the software providers.
  t.true(report.providers.includes('tcp'), report.providers.join(','));
  // io_engine auto falls back to the thread pool and keeps the reason; an explicit io_uring is refused.
  t.regex(report.engine ?? '', /liburing-dev/);
  t.is(report.explicitEngine.code, 'EOPNOTSUPP');
  t.regex(report.explicitEngine.message, /liburing-dev/);
  // FUSE refuses to mount, naming the package.
  t.is(report.mount.code, 'ERR_RBLK_FEATURE_UNAVAILABLE');
  t.regex(report.mount.message, /libfuse3-dev/);
  // sd_notify reports nothing sent instead of throwing.
  t.false(report.notified);
});

test('with every part built, every feature loads', (t) => {
  const r = spawnSync(
    process.execPath,
    ['--import=tsx', '--input-type=module', '-e', "import { nativeFeatures } from './native/binding.ts'; console.log(JSON.stringify(nativeFeatures()));"],
    { cwd: ROOT, encoding: 'utf8', env: { ...process.env, RBLK_NATIVE: '' } },
  );
  t.is(r.status, 0, r.stderr);
  t.deepEqual(JSON.parse(r.stdout), { io_uring: true, fuse: true, sd_notify: true, rbd: true });
});

test('with no addon at all (an empty RBLK_NATIVE directory), nativeFeatures() reports every part missing instead of throwing', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-no-addon-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const r = spawnSync(
    process.execPath,
    ['--import=tsx', '--input-type=module', '-e', "import { nativeFeatures } from './native/binding.ts'; console.log(JSON.stringify(nativeFeatures()));"],
    { cwd: ROOT, encoding: 'utf8', env: { ...process.env, RBLK_NATIVE: dir } },
  );
  t.is(r.status, 0, r.stderr);
  t.deepEqual(JSON.parse(r.stdout), { io_uring: false, fuse: false, sd_notify: false, rbd: false });
});

test('a part whose shared library is missing at run time fails alone and names the library package', (t) => {
  // A stand-in rblk_fuse.node that needs a library which is then removed:
  // dlopen fails the way it does on a host without libfuse3-3.
  const dir = mkdtempSync(join(tmpdir(), 'rblk-missing-lib-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cc = (args: string[]): void => {
    const r = spawnSync('cc', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`cc ${args.join(' ')}: ${r.stderr}`);
  };
  writeFileSync(join(dir, 'gone.c'), 'int rblk_gone(void) { return 1; }\n');
  writeFileSync(join(dir, 'part.c'), 'int rblk_gone(void);\nint rblk_part(void) { return rblk_gone(); }\n');
  cc(['-shared', '-fPIC', '-o', 'librblkgone.so.1', '-Wl,-soname,librblkgone.so.1', 'gone.c']);
  cc(['-shared', '-fPIC', '-o', 'rblk_fuse.node', 'part.c', `-L${dir}`, '-l:librblkgone.so.1']);
  rmSync(join(dir, 'librblkgone.so.1'));
  copyFileSync(join(ROOT, 'build', 'Release', 'rblk_native.node'), join(dir, 'rblk_native.node'));

  const r = spawnSync(process.execPath, ['--import=tsx', MAIN], { cwd: ROOT, env: { ...process.env, RBLK_NATIVE: dir }, encoding: 'utf8' });
  t.is(r.status, 0, r.stderr);
  const report = JSON.parse(r.stdout) as Report;
  t.is(report.fuse.code, 'ERR_RBLK_FEATURE_UNAVAILABLE');
  t.is(report.fuse.package, 'libfuse3-3');
  t.regex(report.fuse.message, /needs librblkgone\.so\.1; apt-get install libfuse3-3/);
  t.is(report.mount.code, 'ERR_RBLK_FEATURE_UNAVAILABLE');
  t.true(report.providers.includes('tcp'));
});
