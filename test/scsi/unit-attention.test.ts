import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { parseReportLuns } from '../../protocol/scsi/report-luns.js';
import {
  CAPACITY_DATA_HAS_CHANGED,
  NO_ADDITIONAL_SENSE,
  POWER_ON_RESET,
  REPORTED_LUNS_DATA_HAS_CHANGED,
} from '../../protocol/scsi/sense-codes.js';
import { decodeSense } from '../../protocol/scsi/sense.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { ScsiTarget } from '../../target/scsi/scsi-target.js';
import { assertGood, assertSense, makeLu, nexus, run } from './helpers/harness.js';

test('after login the first command gets 29/00, once', async (t) => {
  const target = new ScsiTarget();
  const { lu } = makeLu();
  target.addUnit(lu);
  const n = nexus('host-a');
  target.login(n);
  assertSense(t, await run(lu, n, cdb.read10(0, 1)), POWER_ON_RESET);
  assertGood(t, await run(lu, n, cdb.read10(0, 1)));
});

test('INQUIRY and REPORT LUNS are not blocked by a pending unit attention, and do not consume it', async (t) => {
  const { lu } = makeLu();
  const n = nexus('host-a');
  lu.attach(n);
  assertGood(t, await run(lu, n, cdb.inquiry(96)));
  const rl = await run(lu, n, cdb.reportLuns(256), { luns: [0, 3] });
  assertGood(t, rl);
  t.deepEqual(parseReportLuns(rl.data).luns, [0, 3]);
  assertSense(t, await run(lu, n, cdb.testUnitReady()), POWER_ON_RESET);
});

test('REQUEST SENSE reports and consumes the pending unit attention, then NO SENSE', async (t) => {
  const { lu } = makeLu();
  const n = nexus('host-a');
  lu.attach(n);
  const r = await run(lu, n, cdb.requestSense(252));
  assertGood(t, r);
  t.is(r.data.length, 18);
  t.like(decodeSense(r.data), { key: 6, asc: 0x29, ascq: 0 });
  const again = await run(lu, n, cdb.requestSense(252, true));
  assertGood(t, again);
  t.like(decodeSense(again.data), { format: 'descriptor', key: NO_ADDITIONAL_SENSE.key, asc: 0, ascq: 0 });
  assertGood(t, await run(lu, n, cdb.testUnitReady()));
});

test('a resize raises 2A/09 for every nexus that knows the LU', async (t) => {
  const { lu, backend } = makeLu();
  const a = nexus('host-a');
  const b = nexus('host-b');
  lu.attach(a);
  lu.attach(b);
  assertSense(t, await run(lu, a, cdb.testUnitReady()), POWER_ON_RESET);
  assertSense(t, await run(lu, b, cdb.testUnitReady()), POWER_ON_RESET);
  t.false(await lu.refreshCapacity(), 'no change, no attention');
  assertGood(t, await run(lu, a, cdb.testUnitReady()));
  backend.resizeOnRefresh(2 * 1024 * 1024);
  t.true(await lu.refreshCapacity());
  assertSense(t, await run(lu, a, cdb.read16(0, 1)), CAPACITY_DATA_HAS_CHANGED);
  assertSense(t, await run(lu, b, cdb.readCapacity16()), CAPACITY_DATA_HAS_CHANGED);
  assertGood(t, await run(lu, a, cdb.read16(4095, 1)), 'the new blocks are addressable');
});

test('a reload raises 3F/0E on every LU; a new LU starts with 29/00', async (t) => {
  const target = new ScsiTarget();
  const one = makeLu().lu;
  target.addUnit(one);
  const n = nexus('host-a');
  target.login(n);
  assertSense(t, await run(one, n, cdb.testUnitReady()), POWER_ON_RESET);
  const two = makeLu({ name: 'vol1' }).lu;
  target.addUnit(two);
  target.raiseInventoryChanged();
  assertSense(t, await run(one, n, cdb.testUnitReady()), REPORTED_LUNS_DATA_HAS_CHANGED);
  assertSense(t, await run(two, n, cdb.testUnitReady()), POWER_ON_RESET, 'reset supersedes the rest');
  assertGood(t, await run(two, n, cdb.testUnitReady()));
  t.deepEqual(target.units, [one, two]);
});

test('unit attentions queue in order without duplicates', async (t) => {
  const { lu } = makeLu();
  const n = nexus('host-a');
  lu.attach(n);
  assertSense(t, await run(lu, n, cdb.testUnitReady()), POWER_ON_RESET);
  lu.raiseCapacityChanged();
  lu.raiseInventoryChanged();
  lu.raiseCapacityChanged();
  assertSense(t, await run(lu, n, cdb.testUnitReady()), CAPACITY_DATA_HAS_CHANGED);
  assertSense(t, await run(lu, n, cdb.testUnitReady()), REPORTED_LUNS_DATA_HAS_CHANGED);
  assertGood(t, await run(lu, n, cdb.testUnitReady()));
});

test('LU reset gives 29/00 to every nexus, the issuer included; logout and login start over', async (t) => {
  const target = new ScsiTarget();
  const { lu } = makeLu();
  target.addUnit(lu);
  const a = nexus('host-a');
  const b = nexus('host-b');
  target.login(a);
  target.login(b);
  await run(lu, a, cdb.testUnitReady());
  await run(lu, b, cdb.testUnitReady());
  lu.reset();
  assertSense(t, await run(lu, a, cdb.testUnitReady()), POWER_ON_RESET, 'the issuer (SAM-5 6.3.3: every I_T nexus)');
  assertGood(t, await run(lu, a, cdb.testUnitReady()), 'the issuer, once reported');
  assertSense(t, await run(lu, b, cdb.testUnitReady()), POWER_ON_RESET);
  target.logout(b);
  const b2 = nexus('host-b');
  target.login(b2);
  assertSense(t, await run(lu, b2, cdb.testUnitReady()), POWER_ON_RESET, 'after a new login');
});

test('the end of an old session of the same I_T nexus, processed after the new one logged in, changes nothing for the new one', async (t) => {
  const target = new ScsiTarget();
  const { lu } = makeLu();
  target.addUnit(lu);
  const other = nexus('host-b', 'port-1');
  target.login(other);
  assertSense(t, await run(lu, other, cdb.testUnitReady()), POWER_ON_RESET);
  const old = nexus('host-a', 'port-1');
  target.login(old);
  assertSense(t, await run(lu, old, cdb.testUnitReady()), POWER_ON_RESET);
  // A reconnect: the new session logs in before the old connection's end is processed.
  const fresh = nexus('host-a', 'port-1');
  target.login(fresh);
  assertSense(t, await run(lu, fresh, cdb.testUnitReady()), POWER_ON_RESET, 'a new login reports 29/00');
  assertGood(t, await run(lu, fresh, cdb.reserve6()), 'RESERVE(6) by the new session');
  target.logout(old);
  assertGood(t, await run(lu, fresh, cdb.testUnitReady()), "no second 29/00 from the old session's end");
  t.is((await run(lu, other, cdb.write10(0, 1))).status, ScsiStatus.RESERVATION_CONFLICT, 'the RESERVE(6) still holds');
  // The last session of the nexus ending is the nexus loss: its RESERVE(6) goes, a later login starts over.
  target.logout(fresh);
  assertGood(t, await run(lu, other, cdb.write10(0, 1)), 'the RESERVE(6) went with the nexus');
  const later = nexus('host-a', 'port-1');
  target.login(later);
  assertSense(t, await run(lu, later, cdb.testUnitReady()), POWER_ON_RESET);
});

test('a nexus the LU has never seen starts with 29/00 even without login()', async (t) => {
  const { lu } = makeLu();
  const n = nexus('stranger');
  assertSense(t, await run(lu, n, cdb.testUnitReady()), POWER_ON_RESET);
  assertGood(t, await run(lu, n, cdb.testUnitReady()));
});
