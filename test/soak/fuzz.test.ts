// The short capsule fuzz (bench/soak/capsule-fuzz.ts) against a live rblkd: disconnects at
// every protocol step and fuzzed command streams, while a healthy session on its own volume
// writes and reads back. rblkd must answer every command it accepts, never send an
// undecodable capsule, never exit, and the healthy session must see no error.
import test, { type ExecutionContext } from 'ava';
import { capsuleFuzz } from '../../bench/soak/capsule-fuzz.js';
import type { SoakRow } from '../../bench/soak/report.js';
import { availableRdmProviders } from '../../native/fabric.js';

function noteOf(row: SoakRow): string {
  return `${row.scenario}: ${row.operations} capsules, fds ${row.fdsBefore}→${row.fdsAfter}; ${row.notes.join('; ')}`;
}

function checkRows(t: ExecutionContext, rows: SoakRow[], capsules: number): void {
  // Every row's notes first: the healthy session's errors are noted on the last row only.
  for (const row of rows) t.log(noteOf(row));
  for (const row of rows) {
    t.true(row.operations >= capsules, `${row.scenario}: the fuzzer sent what it was asked to`);
    t.false(row.notes.some((n) => /never answered|undecodable/.test(n)), row.notes.join('; '));
    t.is(row.daemonExits, 0, `${row.scenario}: rblkd exits`);
    t.is(row.healthyErrors, 0, `${row.scenario}: errors seen by the healthy session`);
    t.true(row.fdsAfter !== undefined && row.fdsBefore !== undefined && row.fdsAfter <= row.fdsBefore, `${row.scenario}: fds ${row.fdsBefore}→${row.fdsAfter}`);
    t.true(row.ok, row.notes.join('; '));
  }
}

// One run over both providers (the tcp-only run before it fuzzed tcp twice).
test.serial('tcp and sockets: 10,000 fuzzed capsules each with disconnects at every step; rblkd stays up with its fds back, the healthy session sees no error', async (t) => {
  t.timeout(300_000);
  const rows = await capsuleFuzz({ providers: ['tcp', 'sockets'], capsules: 10_000, budgetMs: 120_000 });
  t.is(rows.length, 2);
  checkRows(t, rows, 10_000);
});

// The RDM listeners (docs/transport.md "RDM endpoints"): no connection, per-peer state from an
// address vector, so a fuzzer that leaves at any step leaves that state for rblkd to clean up.
const RDM = (['shm', 'tcp;ofi_rxm'] as const).filter((p) => availableRdmProviders().includes(p));
(RDM.length > 0 ? test.serial : test.skip)(`RDM listeners (${RDM.join(', ') || 'none here'}): 10,000 fuzzed capsules each with disconnects at every step; rblkd stays up with its fds back, the healthy session (tcp) sees no error`, async (t) => {
  t.timeout(300_000);
  const rows = await capsuleFuzz({ providers: [...RDM], capsules: 10_000, budgetMs: 120_000 });
  t.is(rows.length, RDM.length);
  checkRows(t, rows, 10_000);
});
