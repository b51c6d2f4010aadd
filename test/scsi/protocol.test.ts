import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { decodeLun, encodeLun } from '../../protocol/scsi/lun.js';
import { modeSelectList6, parseModeSense10 } from '../../protocol/scsi/mode.js';
import { decodeNameTransportId, encodeNameTransportId } from '../../protocol/scsi/persistent-reservation.js';
import { parseReportLuns } from '../../protocol/scsi/report-luns.js';
import {
  INVALID_FIELD_IN_CDB,
  MISCOMPARE_DURING_VERIFY,
  POWER_ON_RESET,
  SenseKey,
} from '../../protocol/scsi/sense-codes.js';
import { buildSense, decodeSense, describeSense, senseIs } from '../../protocol/scsi/sense.js';
import { Opcode, PrType } from '../../protocol/scsi/opcodes.js';

test('fixed sense is 18 bytes with key, ASC, ASCQ at SPC-5 offsets', (t) => {
  const b = buildSense({ code: INVALID_FIELD_IN_CDB, fieldPointer: { inCdb: true, byte: 2, bit: 5 } });
  t.is(b.length, 18);
  t.is(b[0], 0x70);
  t.is(b[2], SenseKey.ILLEGAL_REQUEST);
  t.is(b[7], 10);
  t.is(b[12], 0x24);
  t.is(b[13], 0x00);
  t.is(b[15], 0x80 | 0x40 | 0x08 | 5);
  t.is(b.readUInt16BE(16), 2);
  const d = decodeSense(b);
  t.deepEqual(d, {
    format: 'fixed',
    deferred: false,
    key: 5,
    asc: 0x24,
    ascq: 0,
    fieldPointer: { inCdb: true, byte: 2, bit: 5 },
  });
});

test('fixed sense sets VALID and INFORMATION, and leaves VALID clear when it does not fit', (t) => {
  const b = buildSense({ code: MISCOMPARE_DURING_VERIFY, information: 513 });
  t.is(b[0], 0xf0);
  t.is(b.readUInt32BE(3), 513);
  t.is(decodeSense(b)?.information, 513n);
  const big = buildSense({ code: MISCOMPARE_DURING_VERIFY, information: 2n ** 40n });
  t.is(big[0], 0x70);
  t.is(decodeSense(big)?.information, undefined);
});

test('descriptor sense carries information and sense-key-specific descriptors', (t) => {
  const b = buildSense(
    { code: MISCOMPARE_DURING_VERIFY, information: 2n ** 40n + 3n, fieldPointer: { inCdb: false, byte: 20 } },
    'descriptor',
  );
  t.is(b[0], 0x72);
  t.deepEqual([b[1], b[2], b[3]], [0x0e, 0x1d, 0x00]);
  t.is(b[7], b.length - 8);
  const d = decodeSense(b);
  t.is(d?.format, 'descriptor');
  t.is(d?.information, 2n ** 40n + 3n);
  t.deepEqual(d?.fieldPointer, { inCdb: false, byte: 20 });
  t.true(senseIs(d, MISCOMPARE_DURING_VERIFY));
});

test('decodeSense rejects what is not sense data', (t) => {
  t.is(decodeSense(Buffer.alloc(0)), undefined);
  t.is(decodeSense(Buffer.from([0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])), undefined);
  t.is(decodeSense(Buffer.from([0x70, 0, 6])), undefined);
});

test('describeSense names known codes', (t) => {
  t.is(describeSense(POWER_ON_RESET), 'UNIT ATTENTION 29/00 POWER ON, RESET, OR BUS DEVICE RESET OCCURRED');
  t.is(describeSense({ key: 5, asc: 0x99, ascq: 0x01 }), 'ILLEGAL REQUEST 99/01');
});

test('LUNs use peripheral addressing below 256 and flat addressing above', (t) => {
  t.deepEqual([...encodeLun(5)], [0, 5, 0, 0, 0, 0, 0, 0]);
  t.deepEqual([...encodeLun(300)], [0x41, 0x2c, 0, 0, 0, 0, 0, 0]);
  t.is(decodeLun(encodeLun(16383)), 16383);
  t.is(decodeLun(Buffer.from([0x80, 1, 0, 0, 0, 0, 0, 0])), undefined);
  t.throws(() => encodeLun(16384), { instanceOf: RangeError, message: 'LUN 16384 is outside 0..16383' });
});

test('READ/WRITE builders lay out LBA, length and FUA', (t) => {
  const w = cdb.write16(0x1_0000_0002n, 9, { fua: true });
  t.is(w[0], Opcode.WRITE_16);
  t.is(w[1], 0x08);
  t.is(w.readBigUInt64BE(2), 0x1_0000_0002n);
  t.is(w.readUInt32BE(10), 9);
  t.is(cdb.read(10, 8)[0], Opcode.READ_10);
  t.is(cdb.read(0xffff_fff0, 100)[0], Opcode.READ_16);
  t.deepEqual([...cdb.read6(0x1234, 256)], [0x08, 0x00, 0x12, 0x34, 0x00, 0x00]);
  t.throws(() => cdb.read10(2 ** 32, 1), { instanceOf: RangeError, message: 'LBA 4294967296 does not fit in 32 bits' });
});

test('COMPARE AND WRITE, WRITE SAME, UNMAP and PR builders', (t) => {
  const caw = cdb.compareAndWrite(7, 1);
  t.is(caw.length, 16);
  t.is(caw[13], 1);
  const ws = cdb.writeSame16(1, 2, { unmap: true, ndob: true });
  t.is(ws[1], 0x09);
  t.throws(() => cdb.writeSame10(0, 1, { ndob: true }), { message: 'NDOB exists only in WRITE SAME(16)' });
  const list = cdb.unmapParameterList([{ lba: 8, blocks: 16 }]);
  t.is(list.length, 24);
  t.is(list.readUInt16BE(0), 22);
  t.is(list.readUInt16BE(2), 16);
  t.is(list.readBigUInt64BE(8), 8n);
  const pro = cdb.persistentReserveOut(1, PrType.EXCLUSIVE_ACCESS);
  t.deepEqual([pro[0], pro[1], pro[2], pro.readUInt32BE(5)], [0x5f, 1, 3, 24]);
  const params = cdb.prOutParameterList({ key: 0xabn, serviceActionKey: 0xcdn, aptpl: true });
  t.is(params.readBigUInt64BE(0), 0xabn);
  t.is(params.readBigUInt64BE(8), 0xcdn);
  t.is(params[20], 0x01);
});

test('REPORT LUNS parser reads entries and the total', (t) => {
  const b = Buffer.alloc(24);
  b.writeUInt32BE(24, 0);
  encodeLun(0, b, 8);
  encodeLun(7, b, 16);
  t.deepEqual(parseReportLuns(b), { total: 3, luns: [0, 7] });
});

test('name TransportIDs round-trip and pad to a multiple of four', (t) => {
  const id = encodeNameTransportId('iqn.2024-01.org.example:host1');
  t.is(id[0], 0x05);
  t.is(id.length % 4, 0);
  t.true(id.length >= 20);
  t.is(decodeNameTransportId(id), 'iqn.2024-01.org.example:host1');
});

test('MODE SENSE(10) parser reads WP, DPOFUA, a long descriptor and pages', (t) => {
  const page = Buffer.from([0x08, 0x12, 0x04, ...Buffer.alloc(17)]);
  const head = Buffer.alloc(8);
  const bd = Buffer.alloc(16);
  bd.writeBigUInt64BE(2n ** 33n, 0);
  bd.writeUInt32BE(4096, 12);
  head.writeUInt16BE(6 + 16 + page.length, 0);
  head[3] = 0x90;
  head[4] = 0x01;
  head.writeUInt16BE(16, 6);
  const p = parseModeSense10(Buffer.concat([head, bd, page]));
  t.true(p.writeProtect);
  t.true(p.dpoFua);
  t.deepEqual(p.blockDescriptors, [{ blocks: 2n ** 33n, blockLength: 4096 }]);
  t.is(p.pages.length, 1);
  t.is(p.pages[0].code, 0x08);
  t.is(modeSelectList6([Buffer.from([0x88, 0x12])])[4], 0x08);
});
