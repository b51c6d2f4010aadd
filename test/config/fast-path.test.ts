// The fast_path key (docs/operations.md "fast_path"): on unless the file says off.
import test from 'ava';
import { parseConfig } from '../../config/loader.js';

test('fast_path is on by default, and on or off as written', (t) => {
  t.true(parseConfig('volumes: []\n', 'rblkd.yaml', { stateDir: '/x' }).fastPath);
  t.true(parseConfig('volumes: []\nfast_path: on\n', 'rblkd.yaml', { stateDir: '/x' }).fastPath);
  t.false(parseConfig('volumes: []\nfast_path: off\n', 'rblkd.yaml', { stateDir: '/x' }).fastPath);
  t.false(parseConfig('volumes: []\nfast_path: false\n', 'rblkd.yaml', { stateDir: '/x' }).fastPath);
});

test('fast_path refuses anything but on and off', (t) => {
  const e = t.throws(() => parseConfig('volumes: []\nfast_path: sometimes\n', 'rblkd.yaml', { stateDir: '/x' }));
  t.regex(e?.message ?? '', /fast_path/);
});
