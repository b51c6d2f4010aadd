// Drop-in volume files (docs/operations.md "Volumes from rblkd ctl"): loadConfig reads every
// *.yaml of volumes_dir (volumes.d beside the file by default) after the file's own volumes, checks
// them as one config, and names the drop-in file and line of each problem.
import test from 'ava';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../config/loader.js';

function dir(t: { teardown(f: () => void): void }): string {
  const d = mkdtempSync(join(tmpdir(), 'rblk-volumes-dir-'));
  t.teardown(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

const main = (extra = ''): string => `state_dir: state\n${extra}volumes:\n  - { name: a, memory: true, size: 1MiB }\n`;

test('volumes.d beside the file adds its volumes after the main ones, in file name order', (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'rblkd.yaml'), main());
  mkdirSync(join(d, 'volumes.d'));
  writeFileSync(join(d, 'volumes.d', '20-c.yaml'), 'volumes:\n  - { name: c, memory: true, size: 1MiB }\n');
  writeFileSync(join(d, 'volumes.d', '10-b.yaml'), 'volumes:\n  - { name: b, memory: true, size: 2MiB }\n');
  writeFileSync(join(d, 'volumes.d', 'notes.txt'), 'not a volume file');
  const c = loadConfig(join(d, 'rblkd.yaml'));
  t.deepEqual(c.volumes.map((v) => [v.name, v.lun]), [['a', 0], ['b', 1], ['c', 2]]);
  t.is(c.volumesDir, join(d, 'volumes.d'));
});

test('volumes_dir moves it; a missing directory adds nothing', (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'rblkd.yaml'), main('volumes_dir: more\n'));
  t.deepEqual(loadConfig(join(d, 'rblkd.yaml')).volumes.map((v) => v.name), ['a']);
  mkdirSync(join(d, 'more'));
  writeFileSync(join(d, 'more', 'x.yaml'), 'volumes:\n  - { name: x, memory: true, size: 1MiB }\n');
  t.deepEqual(loadConfig(join(d, 'rblkd.yaml')).volumes.map((v) => v.name), ['a', 'x']);
});

test('a problem in a drop-in names its file and line; clashes with the main file are found; other keys are refused', (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'rblkd.yaml'), main());
  mkdirSync(join(d, 'volumes.d'));
  const f = join(d, 'volumes.d', 'dup.yaml');
  writeFileSync(f, 'volumes:\n  - { name: ok, memory: true, size: 1MiB }\n  - { name: a, memory: true, size: 1MiB }\n  - { name: bad, memory: true, size: 1MiB, block_size: 1000 }\n');
  const e = t.throws(() => loadConfig(join(d, 'rblkd.yaml')));
  t.regex(e.message, new RegExp(`${f.replace(/[.]/g, '\\.')}:3: volumes\\[1\\]\\.name: `));
  t.regex(e.message, new RegExp(`${f.replace(/[.]/g, '\\.')}:4: volumes\\[2\\]\\.block_size: `));
  writeFileSync(f, 'listeners: []\n');
  t.regex(t.throws(() => loadConfig(join(d, 'rblkd.yaml'))).message, /dup\.yaml:1: a drop-in volume file holds one key, volumes/);
});
