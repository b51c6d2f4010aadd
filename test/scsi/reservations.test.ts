import test, { type ExecutionContext } from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { PrInAction, PrOutAction, PrType, type PrTypeCode } from '../../protocol/scsi/opcodes.js';
import {
  decodeNameTransportId,
  parseReadFullStatus,
  parseReadKeys,
  parseReadReservation,
  parseReportCapabilities,
} from '../../protocol/scsi/persistent-reservation.js';
import {
  INVALID_FIELD_IN_CDB,
  INVALID_FIELD_IN_PARAMETER_LIST,
  INVALID_RELEASE_OF_PERSISTENT_RESERVATION,
  PARAMETER_LIST_LENGTH_ERROR,
  POWER_ON_RESET,
  REGISTRATIONS_PREEMPTED,
  RESERVATIONS_PREEMPTED,
  RESERVATIONS_RELEASED,
} from '../../protocol/scsi/sense-codes.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import type { LogicalUnit } from '../../target/scsi/logical-unit.js';
import type { Nexus } from '../../target/scsi/nexus.js';
import { ScsiTarget } from '../../target/scsi/scsi-target.js';
import { assertConflict, assertGood, assertSense, makeLu, ready, run, type Result } from './helpers/harness.js';

function prOut(lu: LogicalUnit, n: Nexus, sa: number, o: { key?: bigint; saKey?: bigint; type?: PrTypeCode; aptpl?: boolean } = {}) {
  const list = cdb.prOutParameterList({ key: o.key ?? 0n, serviceActionKey: o.saKey ?? 0n, aptpl: o.aptpl ?? false });
  return run(lu, n, cdb.persistentReserveOut(sa, o.type ?? 0), { out: list });
}

const register = (lu: LogicalUnit, n: Nexus, saKey: bigint, key = 0n) => prOut(lu, n, PrOutAction.REGISTER, { key, saKey });
const reserve = (lu: LogicalUnit, n: Nexus, key: bigint, type: PrTypeCode) => prOut(lu, n, PrOutAction.RESERVE, { key, type });

async function readKeys(lu: LogicalUnit, n: Nexus, alloc = 1024) {
  return parseReadKeys((await run(lu, n, cdb.persistentReserveIn(PrInAction.READ_KEYS, alloc))).data);
}

async function readReservation(lu: LogicalUnit, n: Nexus) {
  return parseReadReservation((await run(lu, n, cdb.persistentReserveIn(PrInAction.READ_RESERVATION, 1024))).data);
}

async function three(t: ExecutionContext) {
  const { lu, backend } = makeLu();
  return { lu, backend, a: await ready(t, lu, 'host-a'), b: await ready(t, lu, 'host-b'), c: await ready(t, lu, 'host-c') };
}

function allowed(t: ExecutionContext, r: Result, what: string) {
  t.is(r.status, ScsiStatus.GOOD, `${what} is allowed`);
}

/** Expected access for a registered non-holder (B) and an unregistered nexus (C), per SPC-5 table 69. */
const MATRIX: [string, PrTypeCode, { bRead: boolean; bWrite: boolean; cRead: boolean; cWrite: boolean }][] = [
  ['Write Exclusive', PrType.WRITE_EXCLUSIVE, { bRead: true, bWrite: false, cRead: true, cWrite: false }],
  ['Exclusive Access', PrType.EXCLUSIVE_ACCESS, { bRead: false, bWrite: false, cRead: false, cWrite: false }],
  ['Write Exclusive, Registrants Only', PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY, { bRead: true, bWrite: true, cRead: true, cWrite: false }],
  ['Exclusive Access, Registrants Only', PrType.EXCLUSIVE_ACCESS_REGISTRANTS_ONLY, { bRead: true, bWrite: true, cRead: false, cWrite: false }],
  ['Write Exclusive, All Registrants', PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS, { bRead: true, bWrite: true, cRead: true, cWrite: false }],
  ['Exclusive Access, All Registrants', PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS, { bRead: true, bWrite: true, cRead: false, cWrite: false }],
];

for (const [name, type, expect] of MATRIX) {
  test(`${name}: access for the holder, a registrant and a stranger`, async (t) => {
    const { lu, backend, a, b, c } = await three(t);
    assertGood(t, await register(lu, a, 0xaan));
    assertGood(t, await register(lu, b, 0xbbn));
    assertGood(t, await reserve(lu, a, 0xaan, type));
    const out = { out: Buffer.alloc(512, 1) };
    for (const [who, n, canRead, canWrite] of [
      ['holder', a, true, true],
      ['registrant', b, expect.bRead, expect.bWrite],
      ['stranger', c, expect.cRead, expect.cWrite],
    ] as const) {
      const rd = await run(lu, n, cdb.read10(0, 1));
      if (canRead) allowed(t, rd, `${who} READ`);
      else assertConflict(t, rd, `${who} READ`);
      const wr = await run(lu, n, cdb.write10(1, 1), out);
      if (canWrite) allowed(t, wr, `${who} WRITE`);
      else assertConflict(t, wr, `${who} WRITE`);
      // Commands SPC-5 allows under every reservation type.
      for (const [what, c2] of [
        ['INQUIRY', cdb.inquiry(36)],
        ['TEST UNIT READY', cdb.testUnitReady()],
        ['READ CAPACITY(16)', cdb.readCapacity16()],
        ['REPORT LUNS', cdb.reportLuns(64)],
        ['PR IN', cdb.persistentReserveIn(PrInAction.READ_KEYS, 64)],
      ] as const) {
        allowed(t, await run(lu, n, c2), `${who} ${what}`);
      }
    }
    const rr = await readReservation(lu, c);
    t.is(rr.reservation?.type, type);
    const allReg = type === PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS || type === PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS;
    t.is(rr.reservation?.key, allReg ? 0n : 0xaan, 'READ RESERVATION key');
    t.is(backend.calls.filter((x) => x.op === 'write').length, 1 + (expect.bWrite ? 1 : 0) + (expect.cWrite ? 1 : 0));
  });
}

test('REGISTER: key rules, REGISTER AND IGNORE EXISTING KEY, unregister, PRgeneration', async (t) => {
  const { lu, a, b } = await three(t);
  assertConflict(t, await register(lu, a, 0x11n, 0x99n), 'unregistered nexus with a non-zero key');
  t.deepEqual(await readKeys(lu, a), { generation: 0, keys: [] });
  assertGood(t, await register(lu, a, 0x11n));
  assertGood(t, await register(lu, b, 0x22n));
  t.deepEqual(await readKeys(lu, a), { generation: 2, keys: [0x11n, 0x22n] });
  assertConflict(t, await register(lu, a, 0x33n, 0x99n), 'wrong key');
  assertGood(t, await register(lu, a, 0x33n, 0x11n), 'change key');
  assertGood(t, await prOut(lu, b, PrOutAction.REGISTER_AND_IGNORE_EXISTING_KEY, { key: 0x77n, saKey: 0x44n }));
  t.deepEqual(await readKeys(lu, a), { generation: 4, keys: [0x33n, 0x44n] });
  assertGood(t, await register(lu, b, 0n, 0x44n), 'unregister');
  t.deepEqual(await readKeys(lu, a), { generation: 5, keys: [0x33n] });
  assertGood(t, await register(lu, b, 0n), 'unregistered with SA key 0 does nothing');
  t.is((await readKeys(lu, a)).generation, 5);
});

test('READ KEYS truncated to the allocation length still reports the full length', async (t) => {
  const { lu, a, b, c } = await three(t);
  await register(lu, a, 1n);
  await register(lu, b, 2n);
  await register(lu, c, 3n);
  const r = await run(lu, a, cdb.persistentReserveIn(PrInAction.READ_KEYS, 16));
  t.is(r.data.length, 16);
  t.is(r.data.readUInt32BE(4), 24);
  t.deepEqual(parseReadKeys(r.data).keys, [1n]);
});

test('RESERVE needs a registration and the right key; repeats are GOOD, others conflict', async (t) => {
  const { lu, a, b, c } = await three(t);
  assertConflict(t, await reserve(lu, c, 0n, PrType.WRITE_EXCLUSIVE), 'unregistered');
  await register(lu, a, 0xan);
  await register(lu, b, 0xbn);
  assertConflict(t, await reserve(lu, a, 0xbn, PrType.WRITE_EXCLUSIVE), 'wrong key');
  assertGood(t, await reserve(lu, a, 0xan, PrType.WRITE_EXCLUSIVE));
  assertGood(t, await reserve(lu, a, 0xan, PrType.WRITE_EXCLUSIVE), 'same type again');
  assertConflict(t, await reserve(lu, a, 0xan, PrType.EXCLUSIVE_ACCESS), 'holder asks for another type');
  assertConflict(t, await reserve(lu, b, 0xbn, PrType.WRITE_EXCLUSIVE), 'another nexus');
  t.is((await readKeys(lu, a)).generation, 2, 'RESERVE does not change PRgeneration');
});

test('RELEASE: non-holder no-op, wrong type 05 26/04, registrants-only release raises 2A/04', async (t) => {
  const { lu, a, b, c } = await three(t);
  await register(lu, a, 0xan);
  await register(lu, b, 0xbn);
  await register(lu, c, 0xcn);
  await reserve(lu, a, 0xan, PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY);
  assertGood(t, await prOut(lu, b, PrOutAction.RELEASE, { key: 0xbn, type: PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY }));
  t.is((await readReservation(lu, a)).reservation?.type, PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY, 'still held');
  assertSense(
    t,
    await prOut(lu, a, PrOutAction.RELEASE, { key: 0xan, type: PrType.WRITE_EXCLUSIVE }),
    INVALID_RELEASE_OF_PERSISTENT_RESERVATION,
  );
  assertConflict(t, await prOut(lu, a, PrOutAction.RELEASE, { key: 0xbn, type: PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY }));
  assertGood(t, await prOut(lu, a, PrOutAction.RELEASE, { key: 0xan, type: PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY }));
  t.is((await readReservation(lu, a)).reservation, undefined);
  assertSense(t, await run(lu, b, cdb.testUnitReady()), RESERVATIONS_RELEASED, 'registrant B');
  assertSense(t, await run(lu, c, cdb.testUnitReady()), RESERVATIONS_RELEASED, 'registrant C');
  assertGood(t, await run(lu, a, cdb.testUnitReady()), 'not the releaser');
  await reserve(lu, a, 0xan, PrType.WRITE_EXCLUSIVE);
  await prOut(lu, a, PrOutAction.RELEASE, { key: 0xan, type: PrType.WRITE_EXCLUSIVE });
  assertGood(t, await run(lu, b, cdb.testUnitReady()), 'releasing Write Exclusive tells nobody');
});

test('unregistering the holder of a registrants-only reservation releases it with 2A/04', async (t) => {
  const { lu, a, b } = await three(t);
  await register(lu, a, 0xan);
  await register(lu, b, 0xbn);
  await reserve(lu, a, 0xan, PrType.EXCLUSIVE_ACCESS_REGISTRANTS_ONLY);
  assertGood(t, await register(lu, a, 0n, 0xan));
  assertSense(t, await run(lu, b, cdb.testUnitReady()), RESERVATIONS_RELEASED);
  t.is((await readReservation(lu, b)).reservation, undefined);
});

test('all-registrants reservations survive the reserver leaving, while registrants remain', async (t) => {
  const { lu, a, b, c } = await three(t);
  await register(lu, a, 0xan);
  await register(lu, b, 0xbn);
  await reserve(lu, a, 0xan, PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS);
  assertGood(t, await register(lu, a, 0n, 0xan));
  t.is((await readReservation(lu, b)).reservation?.type, PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS);
  assertGood(t, await run(lu, b, cdb.read10(0, 1)), 'B is a holder now');
  assertConflict(t, await run(lu, a, cdb.read10(0, 1)), 'A left');
  assertConflict(t, await run(lu, c, cdb.read10(0, 1)));
  assertGood(t, await register(lu, b, 0n, 0xbn));
  t.is((await readReservation(lu, c)).reservation, undefined, 'gone with the last registrant');
  assertGood(t, await run(lu, c, cdb.read10(0, 1)));
});

test('CLEAR removes everything and raises 2A/03 for the other registrants', async (t) => {
  const { lu, a, b, c } = await three(t);
  await register(lu, a, 0xan);
  await register(lu, b, 0xbn);
  await reserve(lu, a, 0xan, PrType.EXCLUSIVE_ACCESS);
  assertConflict(t, await prOut(lu, c, PrOutAction.CLEAR, { key: 0n }), 'unregistered');
  assertConflict(t, await prOut(lu, b, PrOutAction.CLEAR, { key: 0xan }), 'wrong key');
  assertGood(t, await prOut(lu, b, PrOutAction.CLEAR, { key: 0xbn }));
  t.deepEqual(await readKeys(lu, c), { generation: 3, keys: [] });
  t.is((await readReservation(lu, c)).reservation, undefined);
  assertSense(t, await run(lu, a, cdb.testUnitReady()), RESERVATIONS_PREEMPTED);
  assertGood(t, await run(lu, b, cdb.testUnitReady()));
  assertGood(t, await run(lu, c, cdb.testUnitReady()), 'C was never registered');
});

test('PREEMPT of the holder moves the reservation and unregisters the holder', async (t) => {
  const { lu, a, b, c } = await three(t);
  await register(lu, a, 0xan);
  await register(lu, b, 0xbn);
  await register(lu, c, 0xcn);
  await reserve(lu, a, 0xan, PrType.WRITE_EXCLUSIVE);
  assertGood(t, await prOut(lu, b, PrOutAction.PREEMPT, { key: 0xbn, saKey: 0xan, type: PrType.EXCLUSIVE_ACCESS }));
  t.deepEqual(await readKeys(lu, b), { generation: 4, keys: [0xbn, 0xcn] });
  t.deepEqual((await readReservation(lu, b)).reservation, { key: 0xbn, scope: 0, type: PrType.EXCLUSIVE_ACCESS });
  assertSense(t, await run(lu, a, cdb.testUnitReady()), REGISTRATIONS_PREEMPTED, 'the preempted holder');
  assertSense(t, await run(lu, c, cdb.testUnitReady()), RESERVATIONS_RELEASED, 'the type changed under C');
  assertConflict(t, await run(lu, a, cdb.read10(0, 1)));
  assertConflict(t, await run(lu, c, cdb.read10(0, 1)));
  assertGood(t, await run(lu, b, cdb.write10(0, 1), { out: Buffer.alloc(512) }));
});

test('PREEMPT of a non-holder removes its registration only; bad keys are refused', async (t) => {
  const { lu, a, b, c } = await three(t);
  await register(lu, a, 0xan);
  await register(lu, b, 0xbn);
  await register(lu, c, 0xcn);
  await reserve(lu, a, 0xan, PrType.WRITE_EXCLUSIVE);
  assertGood(t, await prOut(lu, a, PrOutAction.PREEMPT_AND_ABORT, { key: 0xan, saKey: 0xcn, type: PrType.WRITE_EXCLUSIVE }));
  t.deepEqual((await readKeys(lu, a)).keys, [0xan, 0xbn]);
  t.is((await readReservation(lu, a)).reservation?.key, 0xan);
  assertSense(t, await run(lu, c, cdb.testUnitReady()), REGISTRATIONS_PREEMPTED);
  assertConflict(t, await prOut(lu, a, PrOutAction.PREEMPT, { key: 0xan, saKey: 0x99n, type: PrType.WRITE_EXCLUSIVE }), 'no such key');
  assertSense(
    t,
    await prOut(lu, b, PrOutAction.PREEMPT, { key: 0xbn, saKey: 0n, type: PrType.WRITE_EXCLUSIVE }),
    INVALID_FIELD_IN_PARAMETER_LIST,
    'SA key 0 names nobody',
  );
  assertConflict(t, await prOut(lu, c, PrOutAction.PREEMPT, { key: 0xcn, saKey: 0xan, type: PrType.WRITE_EXCLUSIVE }), 'C was preempted');
});

test('PREEMPT with SA key 0 under an all-registrants reservation takes it over alone', async (t) => {
  const { lu, a, b, c } = await three(t);
  await register(lu, a, 0xan);
  await register(lu, b, 0xbn);
  await register(lu, c, 0xcn);
  await reserve(lu, a, 0xan, PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS);
  assertGood(t, await prOut(lu, b, PrOutAction.PREEMPT, { key: 0xbn, saKey: 0n, type: PrType.EXCLUSIVE_ACCESS }));
  t.deepEqual((await readKeys(lu, b)).keys, [0xbn]);
  t.deepEqual((await readReservation(lu, b)).reservation, { key: 0xbn, scope: 0, type: PrType.EXCLUSIVE_ACCESS });
  assertSense(t, await run(lu, a, cdb.testUnitReady()), REGISTRATIONS_PREEMPTED);
  assertSense(t, await run(lu, c, cdb.testUnitReady()), REGISTRATIONS_PREEMPTED);
});

test('REPORT CAPABILITIES lists all six types and no optional features', async (t) => {
  const { lu, a } = await three(t);
  const r = await run(lu, a, cdb.persistentReserveIn(PrInAction.REPORT_CAPABILITIES, 8));
  assertGood(t, r);
  t.is(r.data.readUInt16BE(0), 8);
  t.like(parseReportCapabilities(r.data), {
    typeMaskValid: true,
    specifyInitiatorPortsCapable: false,
    allTargetPortsCapable: false,
    persistThroughPowerLossCapable: false,
    types: [1, 3, 5, 6, 7, 8],
  });
});

test('READ FULL STATUS names each registrant and marks the holder', async (t) => {
  const { lu, a, b } = await three(t);
  await register(lu, a, 0xan);
  await register(lu, b, 0xbn);
  await reserve(lu, b, 0xbn, PrType.EXCLUSIVE_ACCESS);
  const fs = parseReadFullStatus((await run(lu, a, cdb.persistentReserveIn(PrInAction.READ_FULL_STATUS, 4096))).data);
  t.is(fs.generation, 2);
  t.deepEqual(
    fs.entries.map((e) => [e.key, e.holder, e.type, decodeNameTransportId(e.transportId)]),
    [
      [0xan, false, 0, 'host-a'],
      [0xbn, true, PrType.EXCLUSIVE_ACCESS, 'host-b'],
    ],
  );
});

test('PR CDB and parameter-list errors', async (t) => {
  const { lu, a } = await three(t);
  for (let sa = 4; sa < 0x20; sa++) {
    assertSense(t, await run(lu, a, cdb.persistentReserveIn(sa, 64)), INVALID_FIELD_IN_CDB, `PR IN SA ${sa}`);
  }
  const move = await run(lu, a, cdb.persistentReserveOut(PrOutAction.REGISTER_AND_MOVE), { out: Buffer.alloc(24) });
  assertSense(t, move, INVALID_FIELD_IN_CDB, 'REGISTER AND MOVE');
  t.deepEqual(move.sense?.fieldPointer, { inCdb: true, byte: 1, bit: 4 });
  assertSense(t, await run(lu, a, cdb.persistentReserveOut(PrOutAction.REGISTER, 0, 23)), PARAMETER_LIST_LENGTH_ERROR);
  assertSense(t, await prOut(lu, a, PrOutAction.REGISTER, { saKey: 1n, aptpl: true }), INVALID_FIELD_IN_PARAMETER_LIST, 'APTPL');
  const scope = cdb.persistentReserveOut(PrOutAction.RESERVE, PrType.WRITE_EXCLUSIVE);
  scope[2] |= 0x20;
  assertSense(t, await run(lu, a, scope, { out: Buffer.alloc(24) }), INVALID_FIELD_IN_CDB, 'scope');
  const badType = cdb.persistentReserveOut(PrOutAction.RESERVE, 0);
  badType[2] = 2;
  assertSense(t, await run(lu, a, badType, { out: Buffer.alloc(24) }), INVALID_FIELD_IN_CDB, 'type 2');
});

test('registrations belong to the initiator, so a reconnecting session keeps them', async (t) => {
  const target = new ScsiTarget();
  const { lu } = makeLu();
  target.addUnit(lu);
  const a = await ready(t, lu, 'host-a');
  await register(lu, a, 0xan);
  await reserve(lu, a, 0xan, PrType.EXCLUSIVE_ACCESS);
  target.logout(a);
  const again = await ready(t, lu, 'host-a');
  t.not(again.sessionId, a.sessionId);
  assertGood(t, await run(lu, again, cdb.read10(0, 1)), 'still the holder');
});

test('RESERVE(6) and RELEASE(6) between two initiators', async (t) => {
  const { lu, a, b } = await three(t);
  assertGood(t, await run(lu, a, cdb.reserve6()));
  assertGood(t, await run(lu, a, cdb.reserve6()), 'again by the holder');
  assertConflict(t, await run(lu, b, cdb.reserve6()));
  assertGood(t, await run(lu, b, cdb.release6()), 'a no-op for a non-holder');
  assertGood(t, await run(lu, a, cdb.modeSense6({ page: 0x3f, allocationLength: 255 })));
  assertConflict(t, await run(lu, b, cdb.modeSense6({ page: 0x3f, allocationLength: 255 })));
  assertConflict(t, await run(lu, b, cdb.testUnitReady()));
  assertGood(t, await run(lu, b, cdb.inquiry(36)), 'INQUIRY is still answered');
  assertConflict(t, await register(lu, a, 1n), 'PR while RESERVE(6) is held');
  assertGood(t, await run(lu, a, cdb.release6()));
  assertGood(t, await run(lu, b, cdb.reserve6()));
  lu.detach(b);
  assertGood(t, await run(lu, a, cdb.reserve6()), 'nexus loss released it');
  await run(lu, a, cdb.release6());
  await register(lu, a, 1n);
  assertSense(t, await run(lu, b, cdb.testUnitReady()), POWER_ON_RESET, 'B is a new nexus to the LU');
  assertConflict(t, await run(lu, b, cdb.reserve6()), 'RESERVE(6) while PR registrations exist');
});
