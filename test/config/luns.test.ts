// LUN assignment against state_dir/luns.json (config/lun-record.ts; docs/operations.md "Stable
// LUNs"): remembered LUNs win over file order, an explicit lun wins over memory, a new volume
// skips a removed volume's LUN, and a record that cannot be used is reported, not ignored.
import test from 'ava';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { runCheckConfig } from '../../config/check.js';
import { ConfigError } from '../../config/config-error.js';
import { formatLunRecord, readLunRecord, writeLunRecord, type LunEntry } from '../../config/lun-record.js';
import { parseConfig } from '../../config/loader.js';
import type { Config } from '../../config/schema.js';
import { put, tempDir } from './helpers/tmp.js';

function load(state: string, names: Array<string | { name: string; lun: number }>): Config {
  const volumes = names.map((n) => (typeof n === 'string' ? { name: n, memory: true, size: '1MiB' } : { ...n, memory: true, size: '1MiB' }));
  return parseConfig(dump({ volumes }), 'rblkd.yaml', { stateDir: state });
}

const lunsOf = (c: Config): Record<string, number> => Object.fromEntries(c.volumes.map((v) => [v.name, v.lun]));

async function save(c: Config): Promise<void> {
  await writeLunRecord(c.luns.file, c.luns.entries);
}

test('without a record LUNs follow file order; once recorded, removing or reordering volumes moves none', async (t) => {
  const state = tempDir(t);
  const first = load(state, ['a', 'b', 'c']);
  t.deepEqual(lunsOf(first), { a: 0, b: 1, c: 2 });
  t.true(first.luns.changed);
  t.false(existsSync(first.luns.file), 'loading never writes');
  await save(first);
  t.deepEqual(JSON.parse(readFileSync(join(state, 'luns.json'), 'utf8')), { format: 1, volumes: { a: { lun: 0 }, b: { lun: 1 }, c: { lun: 2 } } });
  t.deepEqual(readdirSync(state), ['luns.json'], 'no temporary file is left');

  const same = load(state, ['a', 'b', 'c']);
  t.false(same.luns.changed, 'an unchanged map is not rewritten');

  const removed = load(state, ['a', 'c']);
  t.deepEqual(lunsOf(removed), { a: 0, c: 2 });
  t.false(removed.luns.changed, "b's entry stays: its LUN is remembered");
  t.deepEqual(lunsOf(load(state, ['c', 'a'])), { a: 0, c: 2 }, 'file order no longer matters');

  // A new volume skips b's LUN, even when it comes first in the file; b coming back gets its own.
  const added = load(state, ['d', 'a', 'c']);
  t.deepEqual(lunsOf(added), { d: 3, a: 0, c: 2 });
  await save(added);
  t.deepEqual(lunsOf(load(state, ['a', 'b', 'c', 'd'])), { a: 0, b: 1, c: 2, d: 3 });
});

test('an explicit lun wins; taking back a removed volume\'s LUN warns, taking a configured one\'s is an error', async (t) => {
  const state = tempDir(t);
  await save(load(state, ['a', 'b', 'c']));

  // b is removed; e asks for its LUN: the file says so, the warning says what hosts may see.
  const taken = load(state, ['a', 'c', { name: 'e', lun: 1 }]);
  t.deepEqual(lunsOf(taken), { a: 0, c: 2, e: 1 });
  t.deepEqual(
    taken.warnings.map((w) => w.message),
    ["LUN 1 was volume b's, which is no longer configured; e takes it (hosts that still have b cached at LUN 1 will see other data there)"],
  );
  t.deepEqual([...taken.luns.entries.keys()].sort(), ['a', 'c', 'e'], "b's entry is replaced by e's");

  // An explicit lun of a served volume moves it (a reload refuses that while it is served).
  t.deepEqual(lunsOf(load(state, [{ name: 'a', lun: 7 }, 'b', 'c'])), { a: 7, b: 1, c: 2 });

  // c still relies on its remembered LUN: it would move, so the file is refused.
  const e = t.throws(() => load(state, ['a', 'b', 'c', { name: 'f', lun: 2 }]), { instanceOf: ConfigError });
  t.deepEqual(
    e.errors.map((i) => `${i.path}: ${i.message}`),
    [`volumes[3].lun: LUN 2 is volume c's (${join(state, 'luns.json')}), which has no lun of its own and would move: give f another lun, or give c a lun explicitly`],
  );
});

test('every free LUN remembered for removed volumes: the error names them and the way out', async (t) => {
  const state = tempDir(t);
  const entries = new Map<string, LunEntry>(Array.from({ length: 256 }, (_, i) => [`old${i}`, { lun: i }]));
  await writeLunRecord(join(state, 'luns.json'), entries);
  const e = t.throws(() => load(state, ['new']), { instanceOf: ConfigError });
  t.regex(e.message, /volumes\[0\]: no free LUN: 0 to 255 are all taken or remembered for removed volumes \(old0, old1, .*old255\) in .*luns\.json; give lun explicitly to take one of theirs back/);
  t.deepEqual(lunsOf(load(state, [{ name: 'new', lun: 9 }])), { new: 9 });
});

test('fields a later version records next to the LUN (an NVMe nsid) are kept when the file is rewritten', async (t) => {
  const state = tempDir(t);
  put(state, 'luns.json', JSON.stringify({ format: 1, volumes: { a: { lun: 4, nsid: 12 }, gone: { lun: 0, nsid: 1 } } }));
  const c = load(state, ['a', 'b']);
  t.deepEqual(lunsOf(c), { a: 4, b: 1 });
  await save(c);
  t.deepEqual(JSON.parse(readFileSync(join(state, 'luns.json'), 'utf8')).volumes, { gone: { lun: 0, nsid: 1 }, b: { lun: 1 }, a: { lun: 4, nsid: 12 } });
  t.is(formatLunRecord(c.luns.entries), readFileSync(join(state, 'luns.json'), 'utf8'));
});

test('a record that cannot be used refuses the file (and --check-config) with what to do', (t) => {
  const state = tempDir(t);
  const file = join(state, 'luns.json');
  const cases: Array<[string, RegExp]> = [
    ['{"format":1,', /luns\.json is not JSON \(.*\): fix it, or move it aside to have LUNs assigned afresh in file order/],
    ['[]', /is not a LUN record \(an object with "format" and "volumes"\)/],
    ['{"format":1,"volumes":{"a":{"lun":300}}}', /volume "a" has no LUN from 0 to 255/],
    ['{"format":1,"volumes":{"a":{"lun":3},"b":{"lun":3}}}', /volumes "a" and "b" both hold LUN 3/],
    ['{"format":2,"volumes":{}}', /is format 2, written by a newer rblkd; this one reads format 1/],
  ];
  for (const [text, re] of cases) {
    put(state, 'luns.json', text);
    t.false(readLunRecord(state).ok, text);
    const e = t.throws(() => load(state, ['a']), { instanceOf: ConfigError });
    t.is(e.errors.length, 1);
    t.is(e.errors[0]!.path, 'state_dir');
    t.regex(e.errors[0]!.message, re);
    t.true(e.errors[0]!.message.startsWith(file), e.errors[0]!.message);
  }
});

test('--check-config reads the record and never writes it, even with no state_dir at all', (t) => {
  const dir = tempDir(t);
  const state = join(dir, 'state');
  const config = put(dir, 'rblkd.yaml', dump({ state_dir: state, volumes: [{ name: 'a', memory: true, size: '1MiB' }] }));
  const out: string[] = [];
  t.is(runCheckConfig(config, { write: (s: string) => out.push(s) }, { write: (s: string) => out.push(s) }), 0, out.join(''));
  t.false(existsSync(state), 'the check made no state_dir');
  put(state, 'luns.json', '{"format":1,"volumes":{"a":{"lun":"x"}}}');
  t.is(runCheckConfig(config, { write: () => undefined }, { write: (s: string) => out.push(s) }), 78);
  t.regex(out.join(''), /state_dir: .*luns\.json: volume "a" has no LUN from 0 to 255/);
});
