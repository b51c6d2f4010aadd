// The soak's sustained phase, short (bench/soak/sustained.ts; `npm run soak` runs it for
// minutes): every initiator path at once on one rblkd with reactor threads, nothing
// killed; each path must verify what it wrote, log in once, see no error and no
// reconnect, and the daemon's fds must come back.
import test from 'ava';
import { sustained } from '../../bench/soak/sustained.js';

test('sustained phase: library (registered and pooled), NBD export and NVMe/TCP host (plain; registered with digests and FUA), 5 s with reactors, one login each and no reconnect', async (t) => {
  t.timeout(120_000);
  const rows = await sustained({ seconds: Number(process.env.RBLK_SOAK_SUSTAIN_S ?? 5), reactors: [2] });
  t.is(rows.length, 5, 'a row per path');
  for (const row of rows) {
    t.log(`${row.scenario}: ${row.operations} operations; ${row.notes.join('; ')}`);
    t.true(row.operations > 0, `${row.scenario}: I/O ran`);
    t.is(row.lost, 0, `${row.scenario}: every block read back as written`);
    t.is(row.healthyErrors, 0, `${row.scenario}: errors`);
    t.true(row.notes.includes('reconnects 0') && row.notes.includes('logins 1'), `${row.scenario}: ${row.notes.join('; ')}`);
    t.is(row.daemonExits, 0);
    t.true(row.ok, row.notes.join('; '));
  }
});
