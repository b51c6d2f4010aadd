// Short session churn (bench/soak/churn.ts): login/logout cycles and connections that never
// log in, with rblkd's fd count and RSS before and after.
import test from 'ava';
import { churn } from '../../bench/soak/churn.js';

test.serial('300 login/logout cycles all succeed and rblkd stays up', async (t) => {
  t.timeout(180_000);
  const [cycles] = await churn({ cycles: 300, idle: 0 });
  t.log(`${cycles.scenario}: fds ${cycles.fdsBefore}→${cycles.fdsAfter}, RSS ${cycles.rssBeforeKiB}→${cycles.rssAfterKiB} KiB; ${cycles.notes.join('; ')}`);
  t.is(cycles.operations, 300, 'logins that completed');
  t.is(cycles.healthyErrors, 0, 'logins that failed');
  t.is(cycles.daemonExits, 0, 'rblkd exits');
});

test.serial('after 300 cycles and 50 never-login connections rblkd is back to its fds and within 10% of its RSS', async (t) => {
  t.timeout(180_000);
  const rows = await churn({ cycles: 300, idle: 50, rawTcp: 10 });
  for (const row of rows) {
    t.log(`${row.scenario}: fds ${row.fdsBefore}→${row.fdsAfter}, RSS ${row.rssBeforeKiB}→${row.rssAfterKiB} KiB; ${row.notes.join('; ')}`);
    t.true(row.ok, `${row.scenario}: ${row.notes.join('; ')}`);
    t.true(row.fdsAfter !== undefined && row.fdsBefore !== undefined && row.fdsAfter <= row.fdsBefore, `${row.scenario}: fds ${row.fdsBefore}→${row.fdsAfter}`);
  }
});
