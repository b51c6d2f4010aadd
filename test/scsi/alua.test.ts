// ALUA in the SCSI core (target/scsi/port-groups.ts, SPC-4 5.15): INQUIRY
// TPGS, the VPD 83h target port designators, REPORT TARGET PORT GROUPS bytes,
// NOT READY in standby and unavailable, and 2A/06 when the state changes.
import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { Association, CodeSet, DesignatorType, parseDeviceIdentification, parseStandardInquiry } from '../../protocol/scsi/inquiry.js';
import { MaintenanceIn, Opcode } from '../../protocol/scsi/opcodes.js';
import {
  ALUA_STANDBY,
  ALUA_UNAVAILABLE,
  ASYMMETRIC_ACCESS_STATE_CHANGED,
  INVALID_COMMAND_OPERATION_CODE,
  INVALID_FIELD_IN_CDB,
} from '../../protocol/scsi/sense-codes.js';
import { CommandSupport, parseAllCommands, parseOneCommand } from '../../protocol/scsi/supported-opcodes.js';
import { AluaStateCode, parseTargetPortGroups, type AluaState } from '../../protocol/scsi/target-port-groups.js';
import { TargetPortGroups, type PortGroupsConfig } from '../../target/scsi/port-groups.js';
import { assertGood, assertSense, makeLu, pattern, ready, run } from './helpers/harness.js';

function groups(state: AluaState = 'active-optimized', peerState: AluaState = 'active-non-optimized'): PortGroupsConfig {
  return { local: { group: 2, state, relativePort: 7 }, peers: [{ group: 1, state: peerState, relativePort: 1 }] };
}

function aluaLu(state: AluaState = 'active-optimized') {
  const pg = new TargetPortGroups(groups(state));
  return { ...makeLu({ portGroups: pg }), pg };
}

test('INQUIRY reports TPGS 01b (implicit ALUA) with target port groups, 00b without', async (t) => {
  const { lu } = aluaLu();
  const n = await ready(t, lu, 'host-a');
  const r = await run(lu, n, cdb.inquiry(96));
  assertGood(t, r);
  t.is(r.data[5] & 0x30, 0x10);
  t.is(parseStandardInquiry(r.data).tpgs, 1);
  const plain = makeLu().lu;
  t.is(parseStandardInquiry((await run(plain, n, cdb.inquiry(96))).data).tpgs, 0);
});

test('VPD 83h names the relative target port and the target port group, associated with the target port', async (t) => {
  const { lu } = aluaLu();
  const n = await ready(t, lu, 'host-a');
  const ids = parseDeviceIdentification((await run(lu, n, cdb.inquiry(255, 0x83))).data);
  const port = ids.find((d) => d.type === DesignatorType.RELATIVE_TARGET_PORT);
  const group = ids.find((d) => d.type === DesignatorType.TARGET_PORT_GROUP);
  t.deepEqual(port && { a: port.association, c: port.codeSet, v: [...port.value] }, { a: Association.TARGET_PORT, c: CodeSet.BINARY, v: [0, 0, 0, 7] });
  t.deepEqual(group && { a: group.association, c: group.codeSet, v: [...group.value] }, { a: Association.TARGET_PORT, c: CodeSet.BINARY, v: [0, 0, 0, 2] });
  // The logical unit's own designators are what they are without ALUA: one device behind every gateway.
  const plain = parseDeviceIdentification((await run(makeLu().lu, n, cdb.inquiry(255, 0x83))).data);
  t.deepEqual(
    ids.filter((d) => d.association === Association.LOGICAL_UNIT),
    plain,
  );
  t.false(plain.some((d) => d.association === Association.TARGET_PORT));
});

test('REPORT TARGET PORT GROUPS: the local group first, then the peers, byte for byte', async (t) => {
  const { lu } = aluaLu();
  const n = await ready(t, lu, 'host-a');
  const r = await run(lu, n, cdb.reportTargetPortGroups(1024));
  assertGood(t, r);
  t.deepEqual(
    [...r.data],
    [
      0, 0, 0, 24,
      // group 2: PREF, active/optimized; U_SUP S_SUP AN_SUP AO_SUP; no status; one port, relative port 7
      0x80, 0x0f, 0, 2, 0, 0, 0, 1, 0, 0, 0, 7,
      // group 1: active/non-optimized
      0x01, 0x0f, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
    ],
  );
  const ext = await run(lu, n, cdb.reportTargetPortGroups(1024, true));
  assertGood(t, ext);
  t.deepEqual([...ext.data.subarray(0, 8)], [0, 0, 0, 28, 0x10, 0, 0, 0]);
  t.deepEqual(ext.data.subarray(8), r.data.subarray(4));
  t.deepEqual(
    parseTargetPortGroups(ext.data).map((g) => [g.group, g.state, g.preferred, g.relativePorts]),
    [
      [2, AluaStateCode.ACTIVE_OPTIMIZED, true, [7]],
      [1, AluaStateCode.ACTIVE_NON_OPTIMIZED, false, [1]],
    ],
  );
  // The allocation length cuts the data; the length field still tells the whole.
  const short = await run(lu, n, cdb.reportTargetPortGroups(6));
  assertGood(t, short);
  t.deepEqual([...short.data], [0, 0, 0, 24, 0x80, 0x0f]);
});

test('REPORT TARGET PORT GROUPS refuses a reserved data format, and is unsupported without target port groups', async (t) => {
  const { lu } = aluaLu();
  const n = await ready(t, lu, 'host-a');
  const bad = cdb.reportTargetPortGroups(64);
  bad[1] |= 0x40; // PARAMETER DATA FORMAT 010b
  const r = await run(lu, n, bad);
  assertSense(t, r, INVALID_FIELD_IN_CDB);
  t.deepEqual(r.sense?.fieldPointer, { inCdb: true, byte: 1, bit: 7 });
  const plain = makeLu().lu;
  const m = await ready(t, plain, 'host-b');
  assertSense(t, await run(plain, m, cdb.reportTargetPortGroups(64)), INVALID_COMMAND_OPERATION_CODE);
});

test('REPORT SUPPORTED OPERATION CODES lists REPORT TARGET PORT GROUPS with its usage data', async (t) => {
  const { lu } = aluaLu();
  const n = await ready(t, lu, 'host-a');
  const all = parseAllCommands((await run(lu, n, cdb.reportSupportedOperationCodes({ allocationLength: 8192 }))).data);
  t.true(all.some((c) => c.opcode === Opcode.MAINTENANCE_IN && c.hasServiceAction && c.serviceAction === MaintenanceIn.REPORT_TARGET_PORT_GROUPS && c.cdbLength === 12));
  const one = parseOneCommand(
    (await run(lu, n, cdb.reportSupportedOperationCodes({ allocationLength: 64, reportingOptions: 2, opcode: Opcode.MAINTENANCE_IN, serviceAction: MaintenanceIn.REPORT_TARGET_PORT_GROUPS }))).data,
  );
  t.is(one.support, CommandSupport.SUPPORTED);
  t.deepEqual([...one.usage.subarray(0, 2)], [Opcode.MAINTENANCE_IN, 0xea]);
});

test('standby: media access is NOT READY 04/0B; INQUIRY, MODE SENSE, PERSISTENT RESERVE IN and REPORT TARGET PORT GROUPS still answer', async (t) => {
  const { lu, backend } = aluaLu('standby');
  const n = await ready(t, lu, 'host-a');
  assertSense(t, await run(lu, n, cdb.testUnitReady()), ALUA_STANDBY, 'TEST UNIT READY');
  assertSense(t, await run(lu, n, cdb.read10(0, 1)), ALUA_STANDBY, 'READ');
  const before = Buffer.from(backend.bytes.subarray(0, 512));
  assertSense(t, await run(lu, n, cdb.write10(0, 1), { out: pattern(512, 3) }), ALUA_STANDBY, 'WRITE');
  t.deepEqual(backend.bytes.subarray(0, 512), before, 'the refused write changed nothing');
  assertGood(t, await run(lu, n, cdb.inquiry(96)), 'INQUIRY');
  assertGood(t, await run(lu, n, cdb.modeSense10({ page: 0x3f, allocationLength: 255 })), 'MODE SENSE');
  assertGood(t, await run(lu, n, cdb.persistentReserveIn(0, 64)), 'PERSISTENT RESERVE IN');
  const g = parseTargetPortGroups((await run(lu, n, cdb.reportTargetPortGroups(64))).data);
  t.is(g[0].state, AluaStateCode.STANDBY);
  t.false(g[0].preferred);
});

test('unavailable: MODE SENSE too is NOT READY 04/0C; INQUIRY, REPORT LUNS and REPORT TARGET PORT GROUPS answer', async (t) => {
  const { lu } = aluaLu('unavailable');
  const n = await ready(t, lu, 'host-a');
  assertSense(t, await run(lu, n, cdb.read16(0, 1)), ALUA_UNAVAILABLE, 'READ');
  assertSense(t, await run(lu, n, cdb.modeSense10({ page: 0x3f, allocationLength: 255 })), ALUA_UNAVAILABLE, 'MODE SENSE');
  assertSense(t, await run(lu, n, cdb.persistentReserveIn(0, 64)), ALUA_UNAVAILABLE, 'PERSISTENT RESERVE IN');
  assertGood(t, await run(lu, n, cdb.inquiry(96)), 'INQUIRY');
  assertGood(t, await run(lu, n, cdb.reportLuns(64)), 'REPORT LUNS');
  assertGood(t, await run(lu, n, cdb.reportTargetPortGroups(64)), 'REPORT TARGET PORT GROUPS');
});

test('a state change raises 2A/06 for every nexus once, sets STATUS CODE 02h, and moves media access', async (t) => {
  const { lu, pg } = aluaLu('active-optimized');
  const a = await ready(t, lu, 'host-a');
  const b = await ready(t, lu, 'host-b');
  assertGood(t, await run(lu, a, cdb.read10(0, 1)));
  t.false(pg.update(groups('active-optimized')), 'the same config changes nothing');
  t.true(pg.update(groups('standby', 'active-optimized')));
  lu.raiseAccessStateChanged();
  for (const n of [a, b]) {
    assertSense(t, await run(lu, n, cdb.read10(0, 1)), ASYMMETRIC_ACCESS_STATE_CHANGED, `${n.initiator}: unit attention`);
    assertSense(t, await run(lu, n, cdb.read10(0, 1)), ALUA_STANDBY, `${n.initiator}: then standby`);
  }
  const g = parseTargetPortGroups((await run(lu, a, cdb.reportTargetPortGroups(64))).data);
  t.deepEqual(
    g.map((d) => [d.group, d.state, d.statusCode, d.preferred]),
    [
      [2, AluaStateCode.STANDBY, 0x02, false],
      [1, AluaStateCode.ACTIVE_OPTIMIZED, 0x00, true],
    ],
  );
  t.true(pg.update(groups('active-non-optimized')));
  lu.raiseAccessStateChanged();
  assertSense(t, await run(lu, a, cdb.read10(0, 1)), ASYMMETRIC_ACCESS_STATE_CHANGED);
  assertGood(t, await run(lu, a, cdb.read10(0, 1)));
});

test('the fast path is allowed only while the group may reach the medium', (t) => {
  const { lu, pg } = aluaLu('active-optimized');
  const n = { sessionId: 's', initiator: 'fp' };
  lu.attach(n);
  lu.attentions.take('fp');
  const seen: string[] = [];
  lu.fastPath.bind({ nexusKey: 'fp', allow: () => seen.push('allow'), revoke: () => seen.push('revoke'), idle: () => Promise.resolve() });
  t.deepEqual(seen.splice(0), ['allow']);
  pg.update(groups('standby'));
  lu.raiseAccessStateChanged();
  t.is(seen.at(-1), 'revoke');
  lu.attentions.take('fp');
  t.is(seen.at(-1), 'revoke', 'standby keeps it revoked after the unit attention is reported');
  pg.update(groups('active-optimized'));
  lu.raiseAccessStateChanged();
  lu.attentions.take('fp');
  t.is(seen.at(-1), 'allow');
});
