// ORWRITE(16) (SBC-4 5.11) and READ DEFECT DATA(10)/(12) (SBC-4 5.22, 5.23),
// as libiscsi's OrWrite and ReadDefectData families exercise them.
import test from 'ava';
import { Opcode } from '../../protocol/scsi/opcodes.js';
import { INVALID_FIELD_IN_CDB, LBA_OUT_OF_RANGE, WRITE_PROTECTED } from '../../protocol/scsi/sense-codes.js';
import { orInto } from '../../target/scsi/commands/orwrite.js';
import { assertGood, assertSense, makeLu, pattern, ready, run } from './helpers/harness.js';

function orwrite(lba: bigint | number, blocks: number, o: { fua?: boolean; orprotect?: number } = {}): Buffer {
  const c = Buffer.alloc(16);
  c[0] = Opcode.ORWRITE_16;
  c[1] = ((o.orprotect ?? 0) << 5) | (o.fua ? 0x08 : 0);
  c.writeBigUInt64BE(BigInt(lba), 2);
  c.writeUInt32BE(blocks, 10);
  return c;
}

test('ORWRITE ORs the data-out into the blocks and writes the result', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const old = pattern(1024, 1);
  backend.bytes.set(old, 20 * 512);
  const mask = pattern(1024, 2);
  const r = await run(lu, n, orwrite(20, 2, { fua: true }), { out: mask });
  assertGood(t, r);
  t.is(r.transferLength, 1024);
  const want = Buffer.from(old.map((b, i) => b | mask[i]));
  t.true(backend.bytes.subarray(20 * 512, 22 * 512).equals(want));
  t.true(backend.calls.filter((c) => c.op === 'write').at(-1)?.fua, 'FUA reaches the backend');
  // libiscsi's Verify: 0xa5 then 0x5a over zeroes reads back as 0xff.
  backend.bytes.fill(0, 0, 512);
  assertGood(t, await run(lu, n, orwrite(0, 1), { out: Buffer.alloc(512, 0xa5) }));
  assertGood(t, await run(lu, n, orwrite(0, 1), { out: Buffer.alloc(512, 0x5a) }));
  t.true(backend.bytes.subarray(0, 512).equals(Buffer.alloc(512, 0xff)));
});

test('ORWRITE checks the range (also for 0 blocks), ORPROTECT and write access', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const blocks = lu.blocks;
  assertGood(t, await run(lu, n, orwrite(0, 0)), '0 blocks at LBA 0');
  assertSense(t, await run(lu, n, orwrite(blocks + 1, 0)), LBA_OUT_OF_RANGE, '0 blocks past the end');
  assertSense(t, await run(lu, n, orwrite(0x8000000000000000n, 1), { out: Buffer.alloc(512) }), LBA_OUT_OF_RANGE, 'LBA 2^63');
  assertSense(t, await run(lu, n, orwrite(0xffffffffffffffffn, 1), { out: Buffer.alloc(512) }), LBA_OUT_OF_RANGE, 'LBA -1');
  assertSense(t, await run(lu, n, orwrite(blocks - 1, 2), { out: Buffer.alloc(1024) }), LBA_OUT_OF_RANGE, 'across the end');
  for (let p = 1; p < 8; p++) {
    const r = await run(lu, n, orwrite(0, 1, { orprotect: p }), { out: Buffer.alloc(512) });
    assertSense(t, r, INVALID_FIELD_IN_CDB, `ORPROTECT ${p}`);
    t.deepEqual(r.sense?.fieldPointer, { inCdb: true, byte: 1, bit: 7 });
  }
  const writes = backend.calls.filter((c) => c.op === 'write').length;
  assertSense(t, await run(lu, n, orwrite(0, 1), { out: Buffer.alloc(512, 1), access: 'ro' }), WRITE_PROTECTED);
  t.is(backend.calls.filter((c) => c.op === 'write').length, writes, 'nothing written');
});

test('orInto handles unaligned views the same as aligned ones', (t) => {
  const a = Buffer.alloc(13, 0x0f);
  const b = Buffer.from(pattern(14, 3).subarray(1));
  orInto(a, b);
  t.deepEqual([...a], [...b].map((x) => x | 0x0f));
});

test('READ DEFECT DATA(10) and (12) return an empty list in the format asked for', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const c10 = Buffer.from([Opcode.READ_DEFECT_DATA_10, 0, 0x18 | 0x05, 0, 0, 0, 0, 0, 32, 0]);
  const r10 = await run(lu, n, c10);
  assertGood(t, r10);
  t.deepEqual([...r10.data], [0, 0x1d, 0, 0], 'PLISTV, GLISTV, format 5, length 0');
  const c12 = Buffer.alloc(12);
  c12[0] = Opcode.READ_DEFECT_DATA_12;
  c12[1] = 0x08 | 0x04;
  c12.writeUInt32BE(64, 6);
  const r12 = await run(lu, n, c12);
  assertGood(t, r12);
  t.deepEqual([...r12.data], [0, 0x0c, 0, 0, 0, 0, 0, 0]);
  const short = await run(lu, n, Buffer.from([Opcode.READ_DEFECT_DATA_10, 0, 0, 0, 0, 0, 0, 0, 2, 0]));
  assertGood(t, short);
  t.is(short.data.length, 2, 'cut to the allocation length');
});
