// The busy_poll_us key (docs/operations.md "busy_poll_us"): 0 unless the file
// gives microseconds from 0 to 10 000; a reload may change it (connections
// accepted after the reload take the new value).
import test from 'ava';
import { parseConfig } from '../../config/loader.js';
import { planReload } from '../../target/daemon/reload-plan.js';
import { serverOptions } from '../../target/daemon/server-options.js';
import type { DaemonLogger } from '../../target/daemon/logger.js';
import { memoryLog } from '../helpers/target-fixture.js';

const parse = (yaml: string) => parseConfig(`volumes: []\n${yaml}`, 'rblkd.yaml', { stateDir: '/x' });

test('busy_poll_us is 0 by default, and the microseconds as written', (t) => {
  t.is(parse('').busyPollMicros, 0);
  t.is(parse('busy_poll_us: 0\n').busyPollMicros, 0);
  t.is(parse('busy_poll_us: 50\n').busyPollMicros, 50);
  t.is(parse('busy_poll_us: 10000\n').busyPollMicros, 10_000);
});

test('busy_poll_us refuses a negative or too long spin, a fraction and words, on its line', (t) => {
  for (const [value, why] of [
    ['-1', /busy_poll_us.*at least 0/],
    ['10001', /busy_poll_us.*at most 10000/],
    ['2.5', /busy_poll_us/],
    ['fast', /busy_poll_us/],
  ] as const) {
    const e = t.throws(() => parse(`busy_poll_us: ${value}\n`), undefined, value);
    t.regex(e?.message ?? '', why, value);
    t.regex(e?.message ?? '', /rblkd\.yaml:2/, value);
  }
});

test('a reload may change busy_poll_us', (t) => {
  t.deepEqual(planReload(parse('busy_poll_us: 0\n'), parse('busy_poll_us: 100\n')).refusals, []);
});

test('rblkd hands busy_poll_us to its target server, which gives it to each accepted fabric connection', (t) => {
  const log = memoryLog() as unknown as DaemonLogger;
  t.is(serverOptions(parse('busy_poll_us: 50\n'), log, null).busyPollMicros, 50);
  t.is(serverOptions(parse(''), log, null).busyPollMicros, 0);
});
