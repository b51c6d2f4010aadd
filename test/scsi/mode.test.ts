import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import {
  findModePage,
  modeSelectList10,
  modeSelectList6,
  parseCachingPage,
  parseControlPage,
  parseModeSense10,
  parseModeSense6,
} from '../../protocol/scsi/mode.js';
import { ModePage, PageControl } from '../../protocol/scsi/opcodes.js';
import {
  INVALID_FIELD_IN_CDB,
  INVALID_FIELD_IN_PARAMETER_LIST,
  LBA_OUT_OF_RANGE,
  MODE_PARAMETERS_CHANGED,
  PARAMETER_LIST_LENGTH_ERROR,
  SAVING_PARAMETERS_NOT_SUPPORTED,
  SOFTWARE_WRITE_PROTECTED,
} from '../../protocol/scsi/sense-codes.js';
import { assertGood, assertSense, makeLu, ready, run } from './helpers/harness.js';

async function sense6(lu: ReturnType<typeof makeLu>['lu'], n: Parameters<typeof run>[1], page: number, pc: 0 | 1 | 2 | 3 = 0) {
  const r = await run(lu, n, cdb.modeSense6({ page, pageControl: pc, allocationLength: 255 }));
  return { r, p: parseModeSense6(r.data) };
}

test('MODE SENSE(6) for all pages: header, block descriptor, Caching then Control', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const { r, p } = await sense6(lu, n, ModePage.ALL);
  assertGood(t, r);
  t.is(r.data[0], r.data.length - 1, 'MODE DATA LENGTH');
  t.false(p.writeProtect);
  t.true(p.dpoFua);
  t.deepEqual(p.blockDescriptors, [{ blocks: 2048n, blockLength: 512 }]);
  t.deepEqual(
    p.pages.map((x) => [x.code, x.bytes.length]),
    [
      [0x08, 20],
      [0x0a, 12],
    ],
  );
  t.true(parseCachingPage(p.pages[0].bytes).writeCacheEnabled);
  t.false(parseControlPage(p.pages[1].bytes).descriptorSense);
});

test('MODE SENSE(10) with DBD omits the block descriptor; allocation length truncates', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const r = await run(lu, n, cdb.modeSense10({ page: ModePage.CACHING, dbd: true, allocationLength: 1000 }));
  assertGood(t, r);
  const p = parseModeSense10(r.data);
  t.deepEqual(p.blockDescriptors, []);
  t.is(r.data.length, 8 + 20);
  t.is(r.data.readUInt16BE(0), r.data.length - 2);
  const short = await run(lu, n, cdb.modeSense6({ page: ModePage.ALL, allocationLength: 4 }));
  t.is(short.data.length, 4);
  t.is(short.data[0], 3 + 8 + 20 + 12, 'length field still describes everything');
});

test('the WP bit is set for a read-only LU and under ro access', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const ro = await run(lu, n, cdb.modeSense6({ page: ModePage.ALL, allocationLength: 255 }), { access: 'ro' });
  t.true(parseModeSense6(ro.data).writeProtect);
  const rolu = makeLu({ readOnly: true }).lu;
  const m = await ready(t, rolu, 'host-b');
  t.true(parseModeSense10((await run(rolu, m, cdb.modeSense10({ page: 0x08, allocationLength: 255 }))).data).writeProtect);
});

test('changeable values show WCE, D_SENSE and SWP only; saved values are not supported', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const { p } = await sense6(lu, n, ModePage.ALL, PageControl.CHANGEABLE);
  const caching = findModePage(p, 0x08);
  const control = findModePage(p, 0x0a);
  t.deepEqual(caching && [...caching.subarray(2)], [0x04, ...Array<number>(17).fill(0)]);
  t.deepEqual(control && [...control.subarray(2)], [0x04, 0, 0x08, ...Array<number>(7).fill(0)]);
  const saved = await run(lu, n, cdb.modeSense6({ page: 0x3f, pageControl: PageControl.SAVED, allocationLength: 255 }));
  assertSense(t, saved, SAVING_PARAMETERS_NOT_SUPPORTED);
});

test('MODE SENSE rejects unknown pages and subpages', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  assertSense(t, await run(lu, n, cdb.modeSense6({ page: 0x1c, allocationLength: 255 })), INVALID_FIELD_IN_CDB);
  assertSense(t, await run(lu, n, cdb.modeSense6({ page: 0x0a, subpage: 1, allocationLength: 255 })), INVALID_FIELD_IN_CDB);
  assertGood(t, await run(lu, n, cdb.modeSense10({ page: 0x3f, subpage: 0xff, allocationLength: 255 })));
});

test('MODE SELECT round trip: clearing WCE makes writes FUA, and others hear 2A/01', async (t) => {
  const { lu, backend } = makeLu();
  const a = await ready(t, lu, 'host-a');
  const b = await ready(t, lu, 'host-b');
  const { p } = await sense6(lu, a, ModePage.CACHING);
  const caching = Buffer.from(findModePage(p, 0x08) ?? Buffer.alloc(0));
  caching[2] &= ~0x04;
  const list = modeSelectList6([caching]);
  assertGood(t, await run(lu, a, cdb.modeSelect6(list.length), { out: list }));
  t.false(parseCachingPage(findModePage((await sense6(lu, a, 0x08)).p, 0x08) ?? Buffer.alloc(0)).writeCacheEnabled);
  assertSense(t, await run(lu, b, cdb.testUnitReady()), MODE_PARAMETERS_CHANGED, 'the other nexus');
  assertGood(t, await run(lu, a, cdb.testUnitReady()), 'not the one that changed them');
  assertGood(t, await run(lu, a, cdb.write10(0, 1), { out: Buffer.alloc(512) }));
  t.true(backend.calls.filter((c) => c.op === 'write').at(-1)?.fua);
});

// SWP (SPC-5 7.5.8): what iscsi-test-cu's ModeSense6.ControlSwp and Sanitize.Readonly set.
test('setting SWP write-protects the LU for every nexus until it is cleared; reads and MODE SELECT still run', async (t) => {
  const { lu, backend } = makeLu();
  const a = await ready(t, lu, 'host-a');
  const b = await ready(t, lu, 'host-b');
  t.true(parseControlPage(findModePage((await sense6(lu, a, 0x0a, 1)).p, 0x0a) ?? Buffer.alloc(0)).softwareWriteProtect, 'changeable');
  const control = Buffer.from(findModePage((await sense6(lu, a, 0x0a)).p, 0x0a) ?? Buffer.alloc(0));
  t.false(parseControlPage(control).softwareWriteProtect);
  assertGood(t, await run(lu, a, cdb.write10(4, 1), { out: Buffer.alloc(512, 0x11) }));
  control[4] |= 0x08;
  assertGood(t, await run(lu, a, cdb.modeSelect6(16), { out: modeSelectList6([control]) }));
  const { p } = await sense6(lu, a, 0x0a);
  t.true(parseControlPage(findModePage(p, 0x0a) ?? Buffer.alloc(0)).softwareWriteProtect, 'current value set');
  t.true(p.writeProtect, 'the header says WP');
  t.false(parseControlPage(findModePage((await sense6(lu, a, 0x0a, 2)).p, 0x0a) ?? Buffer.alloc(0)).softwareWriteProtect, 'default value clear');
  const writesBefore = backend.calls.filter((c) => c.op === 'write').length;
  assertSense(t, await run(lu, a, cdb.write10(4, 1), { out: Buffer.alloc(512, 0x22) }), SOFTWARE_WRITE_PROTECTED, 'WRITE(10)');
  assertSense(t, await run(lu, a, cdb.writeSame16(0, 8), { out: Buffer.alloc(512) }), SOFTWARE_WRITE_PROTECTED, 'WRITE SAME(16)');
  assertSense(t, await run(lu, b, cdb.testUnitReady()), MODE_PARAMETERS_CHANGED, 'the other nexus hears of it');
  assertSense(t, await run(lu, b, cdb.write10(4, 1), { out: Buffer.alloc(512, 0x33) }), SOFTWARE_WRITE_PROTECTED, 'the other nexus');
  t.is(backend.calls.filter((c) => c.op === 'write').length, writesBefore, 'no refused write reached the backend');
  const read = await run(lu, b, cdb.read10(4, 1));
  assertGood(t, read, 'reads run');
  t.true(read.data.equals(Buffer.alloc(512, 0x11)), 'the block kept the write from before SWP');
  control[4] &= ~0x08;
  assertGood(t, await run(lu, b, cdb.modeSelect6(16), { out: modeSelectList6([control]) }), 'another nexus clears SWP');
  assertSense(t, await run(lu, a, cdb.testUnitReady()), MODE_PARAMETERS_CHANGED);
  assertGood(t, await run(lu, a, cdb.write10(4, 1), { out: Buffer.alloc(512, 0x44) }), 'writes run again');
  t.false((await sense6(lu, a, 0x0a)).p.writeProtect);
});

test('setting D_SENSE switches the LU to descriptor-format sense', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const control = Buffer.from(findModePage((await sense6(lu, n, 0x0a)).p, 0x0a) ?? Buffer.alloc(0));
  control[2] |= 0x04;
  const list = modeSelectList10([control]);
  assertGood(t, await run(lu, n, cdb.modeSelect10(list.length), { out: list }));
  const r = await run(lu, n, cdb.read16(2n ** 40n, 1));
  assertSense(t, r, LBA_OUT_OF_RANGE);
  t.is(r.sense?.format, 'descriptor');
  t.is(r.completion.sense?.[0], 0x72);
});

test('MODE SELECT refuses non-changeable bits, unknown pages, wrong lengths, SP, and short lists', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const control = Buffer.from(findModePage((await sense6(lu, n, 0x0a)).p, 0x0a) ?? Buffer.alloc(0));
  const rac = Buffer.from(control);
  rac[4] |= 0x40;
  const r = await run(lu, n, cdb.modeSelect6(16), { out: modeSelectList6([rac]) });
  assertSense(t, r, INVALID_FIELD_IN_PARAMETER_LIST, 'RAC is not changeable');
  t.deepEqual(r.sense?.fieldPointer, { inCdb: false, byte: 4 + 4, bit: 6 });
  const unknown = modeSelectList6([Buffer.from([0x1c, 0x0a, ...Buffer.alloc(10)])]);
  assertSense(t, await run(lu, n, cdb.modeSelect6(unknown.length), { out: unknown }), INVALID_FIELD_IN_PARAMETER_LIST, 'unknown page');
  const badLen = Buffer.from(control);
  badLen[1] = 0x0b;
  const bl = modeSelectList6([Buffer.concat([badLen, Buffer.alloc(1)])]);
  assertSense(t, await run(lu, n, cdb.modeSelect6(bl.length), { out: bl }), INVALID_FIELD_IN_PARAMETER_LIST, 'page length');
  const cut = modeSelectList6([control]).subarray(0, 10);
  assertSense(t, await run(lu, n, cdb.modeSelect6(cut.length), { out: cut }), PARAMETER_LIST_LENGTH_ERROR, 'page cut short');
  assertSense(t, await run(lu, n, cdb.modeSelect10(3), { out: Buffer.alloc(3) }), PARAMETER_LIST_LENGTH_ERROR, 'header cut short');
  assertSense(t, await run(lu, n, cdb.modeSelect6(0, { save: true })), INVALID_FIELD_IN_CDB, 'SP');
  assertGood(t, await run(lu, n, cdb.modeSelect6(0)), 'an empty list changes nothing');
  t.deepEqual(lu.modes, lu.defaultModes);
});

test('MODE SELECT accepts a block descriptor that matches the medium and refuses one that does not', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const head = Buffer.from([0, 0, 0, 8]);
  const bd = Buffer.alloc(8);
  bd.writeUIntBE(512, 5, 3);
  assertGood(t, await run(lu, n, cdb.modeSelect6(12), { out: Buffer.concat([head, bd]) }));
  bd.writeUIntBE(4096, 5, 3);
  assertSense(t, await run(lu, n, cdb.modeSelect6(12), { out: Buffer.concat([head, bd]) }), INVALID_FIELD_IN_PARAMETER_LIST);
});
