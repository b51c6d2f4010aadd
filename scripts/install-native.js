#!/usr/bin/env node
// npm's `install` step for the rblk package (docs/operations.md "Installing
// from npm"). It compiles the native addons with cmake-js only when nothing
// loadable is there already: a local build (build/Release) or the prebuilt
// binary shipped for this platform (prebuilds/<platform>-<arch>). It never
// touches dist/ and never runs tsc: the package ships compiled JavaScript.
// In a checkout it does nothing, because scripts/setup.sh is the build there.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
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
const cmakeJs = require.resolve('cmake-js/bin/cmake-js');
const r = spawnSync(process.execPath, [cmakeJs, 'compile', '--out', 'build', '--log-level', 'error'], { cwd: root, stdio: 'inherit' });
if (r.status !== 0) {
  log('building the native addon failed. It needs cmake, g++, pkg-config and libfabric-dev (Debian);');
  log('liburing-dev, libfuse3-dev and libsystemd-dev are optional and add io_uring, FUSE and sd_notify.');
  process.exit(r.status ?? 1);
}
