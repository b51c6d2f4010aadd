// The short kill campaign (bench/soak/kill-restart.ts): rblkd killed with -9 and with
// SIGTERM while FUA writes run; every acknowledged write must read back, through the path
// and from the backing file, and rblkd must never exit by itself.
import test from 'ava';
import { killRestart } from '../../bench/soak/kill-restart.js';
import type { SoakRow } from '../../bench/soak/report.js';

function check(t: import('ava').ExecutionContext, row: SoakRow, kills: number): void {
  t.log(`${row.scenario}: ${row.operations} writes; ${row.notes.join('; ')}`);
  t.is(row.runs, kills, 'every kill was followed by a restart and resumed I/O');
  t.true(row.operations > 0);
  t.is(row.lost, 0, 'acknowledged writes lost');
  t.is(row.daemonExits, 0, 'rblkd exits nobody asked for');
  t.true(row.ok, row.notes.join('; '));
}

test.serial('library: kill -9 twice and SIGTERM once under FUA writes, nothing acknowledged is lost', async (t) => {
  t.timeout(240_000);
  check(t, await killRestart({ path: 'library', signal: 'SIGKILL', kills: 2, writesBetween: 20 }), 2);
  check(t, await killRestart({ path: 'library', signal: 'SIGTERM', kills: 1, writesBetween: 20 }), 1);
});

test.serial('NBD export: kill -9 twice and SIGTERM once under FUA writes, nothing acknowledged is lost', async (t) => {
  t.timeout(240_000);
  check(t, await killRestart({ path: 'nbd', signal: 'SIGKILL', kills: 2, writesBetween: 20 }), 2);
  check(t, await killRestart({ path: 'nbd', signal: 'SIGTERM', kills: 1, writesBetween: 20 }), 1);
});

test.serial('NVMe/TCP host: kill -9 twice under FUA writes, nothing acknowledged is lost', async (t) => {
  t.timeout(240_000);
  check(t, await killRestart({ path: 'nvme', signal: 'SIGKILL', kills: 2, writesBetween: 20 }), 2);
});
