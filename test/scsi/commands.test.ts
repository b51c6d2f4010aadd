import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { Opcode, ReportingOptions } from '../../protocol/scsi/opcodes.js';
import { parseReportLuns } from '../../protocol/scsi/report-luns.js';
import {
  INTERNAL_TARGET_FAILURE,
  INVALID_COMMAND_OPERATION_CODE,
  INVALID_FIELD_IN_CDB,
  LOGICAL_UNIT_NOT_SUPPORTED,
} from '../../protocol/scsi/sense-codes.js';
import { decodeSense } from '../../protocol/scsi/sense.js';
import { CommandSupport, parseAllCommands, parseOneCommand } from '../../protocol/scsi/supported-opcodes.js';
import { COMMANDS } from '../../target/scsi/command-table.js';
import { parseCommand } from '../../target/scsi/scsi-command.js';
import { ScsiTarget } from '../../target/scsi/scsi-target.js';
import { assertGood, assertSense, makeLu, nexus, ready, run } from './helpers/harness.js';

test('REPORT LUNS lists the LUNs the caller says this nexus may see, sorted', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const r = await run(lu, n, cdb.reportLuns(1024), { luns: [300, 2, 0, 2] });
  assertGood(t, r);
  t.deepEqual(parseReportLuns(r.data), { total: 3, luns: [0, 2, 300] });
  const short = await run(lu, n, cdb.reportLuns(16), { luns: [0, 1, 2] });
  t.is(short.data.length, 16);
  t.deepEqual(parseReportLuns(short.data), { total: 3, luns: [0] });
  t.deepEqual(parseReportLuns((await run(lu, n, cdb.reportLuns(64, 1), { luns: [0, 1] })).data).luns, [], 'well-known only');
  assertSense(t, await run(lu, n, cdb.reportLuns(3)), INVALID_FIELD_IN_CDB, 'allocation length under 4');
  assertSense(t, await run(lu, n, cdb.reportLuns(64, 0x12)), INVALID_FIELD_IN_CDB, 'SELECT REPORT 12h');
});

test('a LUN with no logical unit answers INQUIRY, REPORT LUNS and REQUEST SENSE only', async (t) => {
  const n = nexus('host-a');
  const rl = await run(undefined, n, cdb.reportLuns(64), { luns: [1] });
  assertGood(t, rl);
  t.deepEqual(parseReportLuns(rl.data).luns, [1]);
  const rs = await run(undefined, n, cdb.requestSense(18));
  assertGood(t, rs);
  t.like(decodeSense(rs.data), { key: 5, asc: 0x25, ascq: 0 });
  assertSense(t, await run(undefined, n, cdb.testUnitReady()), LOGICAL_UNIT_NOT_SUPPORTED);
  assertSense(t, await run(undefined, n, cdb.read10(0, 1)), LOGICAL_UNIT_NOT_SUPPORTED);
  assertSense(t, await run(undefined, n, Buffer.from([0xee, 0, 0, 0, 0, 0])), LOGICAL_UNIT_NOT_SUPPORTED);
});

test('unknown opcodes and service actions are 05 20/00; NACA is 05 24/00', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  assertSense(t, await run(lu, n, Buffer.from([0xee, 0, 0, 0, 0, 0])), INVALID_COMMAND_OPERATION_CODE);
  const sa = cdb.readCapacity16();
  sa[1] = 0x11;
  assertSense(t, await run(lu, n, sa), INVALID_COMMAND_OPERATION_CODE, 'SERVICE ACTION IN(16) 11h');
  const mi = cdb.reportSupportedOperationCodes({ allocationLength: 64 });
  mi[1] = 0x0a;
  assertSense(t, await run(lu, n, mi), INVALID_COMMAND_OPERATION_CODE, 'REPORT TARGET PORT GROUPS');
  const naca = cdb.testUnitReady();
  naca[5] = 0x04;
  const r = await run(lu, n, naca);
  assertSense(t, r, INVALID_FIELD_IN_CDB);
  t.deepEqual(r.sense?.fieldPointer, { inCdb: true, byte: 5, bit: 2 });
});

test('TEST UNIT READY, START STOP UNIT and PREVENT ALLOW are accepted', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  assertGood(t, await run(lu, n, cdb.testUnitReady()));
  assertGood(t, await run(lu, n, cdb.startStopUnit(false)));
  assertGood(t, await run(lu, n, cdb.startStopUnit(true, { immed: true })));
  assertGood(t, await run(lu, n, cdb.preventAllowMediumRemoval(true)));
  assertGood(t, await run(lu, n, cdb.preventAllowMediumRemoval(false)));
});

test('REPORT SUPPORTED OPERATION CODES lists the command table', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const r = await run(lu, n, cdb.reportSupportedOperationCodes({ allocationLength: 65535 }));
  assertGood(t, r);
  const all = parseAllCommands(r.data);
  t.is(all.length, COMMANDS.length);
  const key = (op: number, sa: number) => `${op}/${sa}`;
  t.deepEqual(
    all.map((d) => key(d.opcode, d.serviceAction)),
    COMMANDS.map((c) => [c.opcode, c.serviceAction ?? 0] as const)
      .sort((x, y) => x[0] - y[0] || x[1] - y[1])
      .map(([op, sa]) => key(op, sa)),
    'every entry, in opcode then service action order',
  );
  const rc16 = all.find((d) => d.opcode === Opcode.SERVICE_ACTION_IN_16 && d.serviceAction === 0x10);
  t.like(rc16, { hasServiceAction: true, cdbLength: 16 });
  t.like(all.find((d) => d.opcode === Opcode.WRITE_10), { hasServiceAction: false, cdbLength: 10 });
  const withTimeouts = parseAllCommands(
    (await run(lu, n, cdb.reportSupportedOperationCodes({ rctd: true, allocationLength: 65535 }))).data,
  );
  t.deepEqual(withTimeouts[0].timeouts, { nominal: 0, recommended: 30 });
});

test('every table entry answers the one-command query that matches it, with sane usage data', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  for (const c of COMMANDS) {
    const hasSa = c.serviceAction !== undefined;
    t.is(c.usage.length, c.cdbLength, `${c.name}: usage covers the CDB`);
    const good = await run(
      lu,
      n,
      cdb.reportSupportedOperationCodes({
        reportingOptions: hasSa ? ReportingOptions.ONE_SERVICE_ACTION : ReportingOptions.ONE_OPCODE,
        opcode: c.opcode,
        serviceAction: c.serviceAction ?? 0,
        allocationLength: 512,
      }),
    );
    assertGood(t, good, c.name);
    const one = parseOneCommand(good.data);
    t.is(one.support, CommandSupport.SUPPORTED, c.name);
    t.is(one.cdbLength, c.cdbLength, c.name);
    t.is(one.usage[0], c.opcode, `${c.name}: usage byte 0 is the opcode`);
    if (hasSa) t.is(one.usage[1] & 0x1f, c.serviceAction, `${c.name}: usage carries the service action`);
    const wrong = await run(
      lu,
      n,
      cdb.reportSupportedOperationCodes({
        reportingOptions: hasSa ? ReportingOptions.ONE_OPCODE : ReportingOptions.ONE_SERVICE_ACTION,
        opcode: c.opcode,
        serviceAction: c.serviceAction ?? 0,
        allocationLength: 512,
      }),
    );
    assertSense(t, wrong, INVALID_FIELD_IN_CDB, `${c.name}: the other reporting option`);
  }
  const none = await run(lu, n, cdb.reportSupportedOperationCodes({ reportingOptions: 1, opcode: 0xee, allocationLength: 64 }));
  assertGood(t, none);
  t.is(parseOneCommand(none.data).support, CommandSupport.NOT_SUPPORTED);
  assertSense(t, await run(lu, n, cdb.reportSupportedOperationCodes({ reportingOptions: 4, allocationLength: 64 })), INVALID_FIELD_IN_CDB);
});

test('a command executes once; a short data buffer is a transport bug reported as 04 44/00', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const parsed = parseCommand(cdb.read10(0, 1), lu, 'rw');
  t.true(parsed.ok);
  if (!parsed.ok) return;
  const ctx = { nexus: n, data: Buffer.alloc(512), access: 'rw' as const, visibleLuns: [0] };
  t.is((await parsed.command.execute(ctx)).status, 0);
  await t.throwsAsync(() => parsed.command.execute(ctx), { message: 'READ(10): execute() called twice' });
  const short = parseCommand(cdb.write10(0, 2), lu, 'rw');
  if (!short.ok) return t.fail('WRITE(10) should parse');
  const c = await short.command.execute({ ...ctx, data: Buffer.alloc(512) });
  t.is(c.status, 2);
  t.like(decodeSense(c.sense ?? Buffer.alloc(0)), { key: INTERNAL_TARGET_FAILURE.key, asc: INTERNAL_TARGET_FAILURE.asc, ascq: 0 });
});

test('ScsiTarget.login makes the first command of a nexus report POWER ON, RESET', async (t) => {
  const target = new ScsiTarget();
  const { lu } = makeLu();
  target.addUnit(lu);
  const n = nexus('host-a');
  target.login(n);
  const p = parseCommand(cdb.testUnitReady(), lu, 'rw');
  if (!p.ok) return t.fail('TUR should parse');
  t.is(p.command.direction, 'none');
  const c = await p.command.execute({ nexus: n, data: Buffer.alloc(0), access: 'rw', visibleLuns: [0] });
  t.is(c.status, 2);
  t.is(decodeSense(c.sense ?? Buffer.alloc(0))?.asc, 0x29);
  const bad = parseCommand(Buffer.from([0xee, 0, 0, 0, 0, 0]), lu, 'rw');
  t.false(bad.ok);
  if (!bad.ok) t.is(bad.completion.sense?.[12], 0x20);
});
