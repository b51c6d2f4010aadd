// The reactors key (docs/operations.md "reactors"): auto unless the file
// gives a count from 0 to 64; a reload may not change it.
import test from 'ava';
import { parseConfig } from '../../config/loader.js';
import { planReload } from '../../target/daemon/reload-plan.js';
import { Reactors } from '../../native/reactors.js';

const parse = (yaml: string) => parseConfig(`volumes: []\n${yaml}`, 'rblkd.yaml', { stateDir: '/x' });

test('reactors is auto by default, and the count as written', (t) => {
  t.is(parse('').reactors, 'auto');
  t.is(parse('reactors: auto\n').reactors, 'auto');
  t.is(parse('reactors: 0\n').reactors, 0);
  t.is(parse('reactors: 4\n').reactors, 4);
});

test('reactors refuses a negative or too large count, a fraction and other words, on its line', (t) => {
  for (const [value, why] of [
    ['-1', /reactors.*at least 0/],
    ['65', /reactors.*at most 64/],
    ['1.5', /reactors/],
    ['many', /reactors: must be a number of threads from 0 to 64, or 'auto', not 'many'/],
  ] as const) {
    const e = t.throws(() => parse(`reactors: ${value}\n`), undefined, value);
    t.regex(e?.message ?? '', why, value);
    t.regex(e?.message ?? '', /rblkd\.yaml:2/, value);
  }
});

test('a reload that changes reactors is refused; one that keeps it is not', (t) => {
  const before = parse('reactors: 2\n');
  t.deepEqual(planReload(before, parse('reactors: 2\n')).refusals, []);
  const refused = planReload(before, parse('reactors: auto\n')).refusals;
  t.is(refused.length, 1);
  t.regex(refused[0], /reactors cannot change from 2 to auto while rblkd runs \(restart it\)/);
});

test('auto: no reactor below 4 cores, then half the cores up to 16', (t) => {
  t.is(Reactors.autoCount(1), 0);
  t.is(Reactors.autoCount(2), 0);
  t.is(Reactors.autoCount(3), 0);
  t.is(Reactors.autoCount(4), 2);
  t.is(Reactors.autoCount(12), 6);
  t.is(Reactors.autoCount(64), 16);
});
