import test from 'ava';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../../config/config-error.js';
import { loadConfig, parseConfig } from '../../config/loader.js';
import { DEFAULT_TARGET_NAME } from '../../protocol/wire/constants.js';
import { put, tempDir } from './helpers/tmp.js';

const configDir = fileURLToPath(new URL('../../config/', import.meta.url));

test('target_name defaults to the protocol default name', (t) => {
  const config = parseConfig('volumes: []\n', 'rblkd.yaml', { stateDir: '/nonexistent-state' });
  t.is(config.targetName, DEFAULT_TARGET_NAME);
});

test('target_name is taken as written', (t) => {
  const config = parseConfig('target_name: iqn.2026-11.com.example:store1\n', 'rblkd.yaml', { stateDir: '/x' });
  t.is(config.targetName, 'iqn.2026-11.com.example:store1');
});

test('the example config names the default target', (t) => {
  const dir = tempDir(t);
  put(dir, 'secrets/host-a.key', 'a-long-enough-secret-for-host-a\n', 0o600);
  const config = loadConfig(join(configDir, 'rblkd.example.yaml'), { baseDir: dir, stateDir: join(dir, 'state') });
  t.is(config.targetName, 'iqn.2026-11.io.rblk:target');
});

test('a target_name with a space is refused with its line', (t) => {
  const error = t.throws(() => parseConfig('volumes: []\ntarget_name: "my target"\n', 'rblkd.yaml', { stateDir: '/x' }), {
    instanceOf: ConfigError,
  });
  t.is(error?.message, "rblkd.yaml:2: target_name: must be 1 to 223 characters of letters, digits and . _ : @ -, not 'my target'");
});
