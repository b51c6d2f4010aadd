// Short session churn (bench/soak/churn.ts): login/logout cycles and connections that never
// log in, with rblkd's fd count and RSS before and after.
import test from 'ava';
import { churn } from '../../bench/soak/churn.js';

test.serial('300 login/logout cycles all succeed, then 50 never-login connections: rblkd stays up, back to its fds and within 10% of its RSS', async (t) => {
  t.timeout(180_000);
  const rows = await churn({ cycles: 300, idle: 50, rawTcp: 10 });
  const [cycles] = rows;
  t.is(cycles.operations, 300, 'logins that completed');
  t.is(cycles.healthyErrors, 0, 'logins that failed');
  for (const row of rows) {
    t.log(`${row.scenario}: fds ${row.fdsBefore}→${row.fdsAfter}, RSS ${row.rssBeforeKiB}→${row.rssAfterKiB} KiB; ${row.notes.join('; ')}`);
    t.true(row.ok, `${row.scenario}: ${row.notes.join('; ')}`);
    t.true(row.fdsAfter !== undefined && row.fdsBefore !== undefined && row.fdsAfter <= row.fdsBefore, `${row.scenario}: fds ${row.fdsBefore}→${row.fdsAfter}`);
    t.is(row.daemonExits, 0, `${row.scenario}: rblkd exits`);
  }
});
