// What every consumer of the package downloads (issue 28 §4): cmake-js and
// node-addon-api serve only the fallback compile on a platform without a
// prebuilt, so they are not dependencies (they were 47 of the 119 packages a
// consumer pulled). scripts/install-native.js installs them, at the versions
// of devDependencies, only when it must compile (docs/operations.md
// "Install"); test/package/pack-install.test.ts installs the tarball, finds
// neither, and compiles without a prebuilt.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../cli/helpers/cli.js';

const BUILD_TOOLS = ['cmake-js', 'node-addon-api'];
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  optionalDependencies?: Record<string, string>;
};

test('the build tools are not installed with the package', (t) => {
  t.deepEqual(
    BUILD_TOOLS.filter((n) => n in pkg.dependencies || n in (pkg.optionalDependencies ?? {})),
    [],
    'build tools among dependencies or optionalDependencies',
  );
});

test('devDependencies name their versions, for the checkout and the fallback compile', (t) => {
  t.deepEqual(
    BUILD_TOOLS.filter((n) => !(n in pkg.devDependencies)),
    [],
  );
  // install-native.js takes the versions from there.
  t.regex(readFileSync(join(ROOT, 'scripts', 'install-native.js'), 'utf8'), /pkg\.devDependencies\?\.\[name\]/);
});
