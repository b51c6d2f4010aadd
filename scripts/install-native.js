#!/usr/bin/env node
// npm's `install` step for the rblk package (docs/operations.md "Installing
// from npm"). It compiles the native addons with cmake-js only when nothing
// loadable is there already: a local build (build/Release) or the prebuilt
// binary shipped for this platform (prebuilds/<platform>-<arch>). It never
// touches dist/ and never runs tsc: the package ships compiled JavaScript.
// In a checkout it does nothing, because scripts/setup.sh is the build there.
// cmake-js and node-addon-api are not dependencies of the package, so a
// consumer whose prebuilt loads never downloads them: when it must compile,
// this installs them (the versions in package.json's devDependencies) into a
// temporary directory, compiles, and removes it (docs/operations.md "Install").
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const log = (msg) => process.stderr.write(`rblk: ${msg}\n`);

if (existsSync(join(root, 'tsconfig.json'))) process.exit(0);

// The same places native/binding.ts looks, in the same order.
const dirs = [join(root, 'build', 'Release'), join(root, 'prebuilds', `${process.platform}-${process.arch}`)];
process.env.IPATH_NO_BACKTRACE ??= '1';
const reasons = [];
for (const dir of dirs) {
  const file = join(dir, 'rblk_native.node');
  if (!existsSync(file)) continue;
  try {
    require(file);
    process.exit(0);
  } catch (e) {
    reasons.push(`${file}: ${e.message.split('\n')[0]}`);
  }
}

log(reasons.length === 0
  ? `no prebuilt binary for ${process.platform}-${process.arch}: building the native addon with cmake-js`
  : `the prebuilt binary does not load here (${reasons.join('; ')}): building the native addon with cmake-js`);
// The build tools, at the versions the checkout builds with.
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const tools = ['cmake-js', 'node-addon-api'].map((name) => `${name}@${pkg.devDependencies?.[name] ?? 'latest'}`);
const toolDir = mkdtempSync(join(tmpdir(), 'rblk-build-tools-'));
let status = 1;
try {
  // The npm running the install step (npm_execpath, when it is npm's own CLI and not npx's), else the npm on PATH.
  const npm = process.env.npm_execpath !== undefined && /(^|[\\/])npm-cli\.js$/.test(process.env.npm_execpath)
    ? [process.execPath, process.env.npm_execpath]
    : ['npm'];
  log(`installing the build tools (${tools.join(', ')}) into ${toolDir}`);
  const fetched = spawnSync(npm[0], [...npm.slice(1), 'install', '--prefix', toolDir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline', '--loglevel=error', ...tools], {
    cwd: toolDir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (fetched.status !== 0) throw new Error(`installing ${tools.join(' and ')} failed: the compile needs them (and npm's registry, or its cache)`);
  const modules = join(toolDir, 'node_modules');
  const cmakeJs = createRequire(join(modules, 'x.js')).resolve('cmake-js/bin/cmake-js');
  // NODE_PATH: CMakeLists.txt asks `node -p "require('node-addon-api').include_dir"` from the package's folder.
  const env = { ...process.env, NODE_PATH: [modules, process.env.NODE_PATH].filter((p) => p).join(delimiter) };
  const r = spawnSync(process.execPath, [cmakeJs, 'compile', '--out', 'build', '--log-level', 'error'], { cwd: root, stdio: 'inherit', env });
  status = r.status ?? 1;
} catch (e) {
  log(e.message);
} finally {
  rmSync(toolDir, { recursive: true, force: true });
}
if (status !== 0) {
  log('building the native addon failed. It needs cmake, g++, pkg-config and libfabric-dev (Debian);');
  log('liburing-dev, libfuse3-dev and libsystemd-dev are optional and add io_uring, FUSE and sd_notify.');
  process.exit(status);
}
