// The fast_path keys (docs/operations.md "fast_path"): on unless the file says false (or off), at the top level and under rbd.
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

test("an rbd volume's fast_path takes the same spelling as the top level's: true, false, on, off", (t) => {
  const rbd = (v: string): boolean => {
    const c = parseConfig(`volumes:\n  - name: a\n    rbd: { pool: p, image: i, fast_path: ${v} }\n`, 'rblkd.yaml', { stateDir: '/x' });
    const b = c.volumes[0].backing as { fastPath?: boolean };
    return b.fastPath === true;
  };
  t.true(rbd('true'));
  t.true(rbd('on'));
  t.false(rbd('false'));
  t.false(rbd('off'));
  t.true(parseConfig('volumes: []\nfast_path: true\n', 'rblkd.yaml', { stateDir: '/x' }).fastPath);
  const e = t.throws(() => parseConfig('volumes:\n  - name: a\n    rbd: { pool: p, image: i, fast_path: sometimes }\n', 'rblkd.yaml', { stateDir: '/x' }));
  t.regex(e?.message ?? '', /fast_path/);
});
