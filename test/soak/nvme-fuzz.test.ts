// The NVMe/TCP soak's fuzz phase at a small scale against a real rblkd (bench/soak/nvme-fuzz.ts,
// docs/nvme.md "Bad input"): hostile hosts at every queue step beside a healthy host on its own
// namespace; rblkd never exits, answers every command on a queue it keeps open, and gives back
// its fds; the healthy host sees no error. `npm run soak` runs it at 100,000 PDUs.
import test from 'ava';
import { nvmeFuzz } from '../../bench/soak/nvme-fuzz.js';

test.serial('NVMe/TCP: 5,000 fuzzed PDUs at every queue step; rblkd stays up with its fds back, the healthy host sees no error', async (t) => {
  const [row] = await nvmeFuzz({ pdus: 5_000, budgetMs: 120_000 });
  for (const n of row!.notes) t.log(n);
  t.is(row!.daemonExits, 0, 'rblkd exits');
  t.is(row!.healthyErrors, 0, 'errors seen by the healthy host');
  t.true(row!.operations >= 5_000, `${row!.operations} PDUs sent`);
  t.is(row!.fdsAfter, row!.fdsBefore, 'fds back where they were');
  t.true(row!.ok, row!.notes.join('; '));
});
