import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { parseLbaStatus } from '../../protocol/scsi/lba-status.js';
import { ProvisioningStatus } from '../../protocol/scsi/opcodes.js';
import { parseReadCapacity10, parseReadCapacity16 } from '../../protocol/scsi/read-capacity.js';
import {
  INVALID_COMMAND_OPERATION_CODE,
  INVALID_FIELD_IN_CDB,
  INVALID_FIELD_IN_PARAMETER_LIST,
  LBA_OUT_OF_RANGE,
  PARAMETER_LIST_LENGTH_ERROR,
  WRITE_PROTECTED,
} from '../../protocol/scsi/sense-codes.js';
import { assertGood, assertSense, makeLu, pattern, ready, run } from './helpers/harness.js';

const BLOCKS = 2048;

test('READ CAPACITY(10) and (16) report the last LBA and block size; thin sets LBPME and LBPRZ', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const r10 = await run(lu, n, cdb.readCapacity10());
  assertGood(t, r10);
  t.deepEqual(parseReadCapacity10(r10.data), { lastLba: BLOCKS - 1, blockSize: 512 });
  const r16 = await run(lu, n, cdb.readCapacity16());
  t.is(r16.data.length, 32);
  t.like(parseReadCapacity16(r16.data), { lastLba: BigInt(BLOCKS - 1), blockSize: 512, lbpme: true, lbprz: true });
  const thick = makeLu({ thin: false }).lu;
  const m = await ready(t, thick, 'host-b');
  t.like(parseReadCapacity16((await run(thick, m, cdb.readCapacity16())).data), { lbpme: false, lbprz: false });
  t.is((await run(lu, n, cdb.readCapacity16(12))).data.length, 12, 'cut to the allocation length');
});

test('WRITE SAME repeats a non-zero block over the range', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const block = pattern(512, 5);
  assertGood(t, await run(lu, n, cdb.writeSame10(100, 300), { out: block }));
  for (let b = 100; b < 400; b++) t.true(backend.bytes.subarray(b * 512, (b + 1) * 512).equals(block), `block ${b}`);
  t.is(backend.bytes[99 * 512], 0);
  t.is(backend.bytes[400 * 512], 0);
  const r = await run(lu, n, cdb.writeSame16(1000, 3), { out: block });
  assertGood(t, r);
  t.is(r.transferLength, 512, 'one block of data-out');
});

test('WRITE SAME of zeroes with UNMAP deallocates on a thin LU; without UNMAP it writes zeroes', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  assertGood(t, await run(lu, n, cdb.write16(0, 64), { out: Buffer.alloc(64 * 512, 0xaa) }));
  t.true(backend.isMapped(0));
  assertGood(t, await run(lu, n, cdb.writeSame16(0, 32, { unmap: true }), { out: Buffer.alloc(512) }));
  const zw = backend.calls.filter((c) => c.op === 'writeZeroes');
  t.deepEqual(zw.at(-1), { op: 'writeZeroes', offset: 0, length: 32 * 512, unmap: true });
  t.false(backend.isMapped(0));
  t.true(backend.bytes.subarray(0, 32 * 512).every((x) => x === 0));
  t.is(backend.bytes[32 * 512], 0xaa);
  assertGood(t, await run(lu, n, cdb.writeSame10(32, 8), { out: Buffer.alloc(512) }));
  t.deepEqual(backend.calls.filter((c) => c.op === 'writeZeroes').at(-1), {
    op: 'writeZeroes',
    offset: 32 * 512,
    length: 8 * 512,
    unmap: false,
  });
});

test('WRITE SAME with UNMAP on a fully provisioned LU (LBPWS and LBPWS10 clear): INVALID FIELD IN CDB at byte 1 bit 3, nothing written; without UNMAP it writes', async (t) => {
  const { lu, backend } = makeLu({ thin: false });
  const n = await ready(t, lu, 'host-a');
  assertGood(t, await run(lu, n, cdb.write16(0, 8), { out: Buffer.alloc(8 * 512, 0xaa) }));
  for (const c of [cdb.writeSame10(0, 8, { unmap: true }), cdb.writeSame16(0, 8, { unmap: true })]) {
    const r = await run(lu, n, c, { out: Buffer.alloc(512) });
    assertSense(t, r, INVALID_FIELD_IN_CDB);
    t.deepEqual(r.sense?.fieldPointer, { inCdb: true, byte: 1, bit: 3 }, 'the UNMAP bit');
  }
  t.true(backend.bytes.subarray(0, 8 * 512).every((x) => x === 0xaa), 'nothing was written');
  assertGood(t, await run(lu, n, cdb.writeSame16(0, 8), { out: Buffer.alloc(512) }));
  t.true(backend.bytes.subarray(0, 8 * 512).every((x) => x === 0));
});

test('WRITE SAME(16) with NDOB moves no data and zeroes the range', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  assertGood(t, await run(lu, n, cdb.write10(8, 8), { out: Buffer.alloc(8 * 512, 0x55) }));
  const r = await run(lu, n, cdb.writeSame16(8, 8, { ndob: true, unmap: true }));
  assertGood(t, r);
  t.is(r.direction, 'none');
  t.true(backend.bytes.subarray(8 * 512, 16 * 512).every((x) => x === 0));
});

test('WRITE SAME errors: zero blocks (WSNZ), over the limit, ANCHOR, past the end, read-only', async (t) => {
  const { lu } = makeLu({ limits: { maxWriteSameBlocks: 100 } });
  const n = await ready(t, lu, 'host-a');
  const block = { out: Buffer.alloc(512, 1) };
  assertSense(t, await run(lu, n, cdb.writeSame16(0, 0), block), INVALID_FIELD_IN_CDB, 'zero blocks');
  assertSense(t, await run(lu, n, cdb.writeSame16(0, 101), block), INVALID_FIELD_IN_CDB, 'over the limit');
  assertGood(t, await run(lu, n, cdb.writeSame16(0, 100), block), 'at the limit');
  assertSense(t, await run(lu, n, cdb.writeSame10(0, 1, { anchor: true }), block), INVALID_FIELD_IN_CDB, 'ANCHOR');
  assertSense(t, await run(lu, n, cdb.writeSame16(BLOCKS - 1, 2), block), LBA_OUT_OF_RANGE, 'past the end');
  assertSense(t, await run(lu, n, cdb.writeSame16(2n ** 63n, 1), block), LBA_OUT_OF_RANGE, '2^63');
  const ro = makeLu({ readOnly: true }).lu;
  const m = await ready(t, ro, 'host-b');
  assertSense(t, await run(ro, m, cdb.writeSame16(0, 1), block), WRITE_PROTECTED);
});

test('UNMAP deallocates every described range', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  assertGood(t, await run(lu, n, cdb.write16(0, 256), { out: Buffer.alloc(256 * 512, 0x77) }));
  const list = cdb.unmapParameterList([
    { lba: 0, blocks: 8 },
    { lba: 64, blocks: 16 },
    { lba: 200, blocks: 0 },
  ]);
  assertGood(t, await run(lu, n, cdb.unmap(list.length), { out: list }));
  const discards = backend.calls.filter((c) => c.op === 'discard').map((c) => [c.offset, c.length]);
  t.deepEqual(discards, [
    [0, 8 * 512],
    [64 * 512, 16 * 512],
  ]);
  const back = await run(lu, n, cdb.read10(0, 8));
  t.true(back.data.every((x) => x === 0), 'unmapped blocks read as zero');
  t.is(backend.bytes[8 * 512], 0x77);
});

test('UNMAP checks the parameter list and its limits before discarding anything', async (t) => {
  const { lu, backend } = makeLu({ limits: { maxUnmapDescriptors: 2, maxUnmapLbaCount: 64 } });
  const n = await ready(t, lu, 'host-a');
  assertGood(t, await run(lu, n, cdb.unmap(0)), 'no parameter list');
  assertSense(t, await run(lu, n, cdb.unmap(6), { out: Buffer.alloc(6) }), PARAMETER_LIST_LENGTH_ERROR, 'shorter than the header');
  const three = cdb.unmapParameterList([
    { lba: 0, blocks: 1 },
    { lba: 1, blocks: 1 },
    { lba: 2, blocks: 1 },
  ]);
  assertSense(t, await run(lu, n, cdb.unmap(three.length), { out: three }), INVALID_FIELD_IN_PARAMETER_LIST, 'too many descriptors');
  const long = cdb.unmapParameterList([{ lba: 0, blocks: 65 }]);
  assertSense(t, await run(lu, n, cdb.unmap(long.length), { out: long }), INVALID_FIELD_IN_PARAMETER_LIST, 'too many blocks');
  const past = cdb.unmapParameterList([
    { lba: 0, blocks: 8 },
    { lba: BLOCKS - 4, blocks: 8 },
  ]);
  assertSense(t, await run(lu, n, cdb.unmap(past.length), { out: past }), LBA_OUT_OF_RANGE, 'past the end');
  t.is(backend.calls.filter((c) => c.op === 'discard').length, 0, 'nothing discarded on error');
  // A descriptor length longer than the list is cut to the list; a partial descriptor is ignored.
  const lying = cdb.unmapParameterList([{ lba: 4, blocks: 4 }]);
  lying.writeUInt16BE(40, 2);
  assertGood(t, await run(lu, n, cdb.unmap(lying.length + 8), { out: Buffer.concat([lying, Buffer.alloc(8, 0xff)]) }));
  t.deepEqual(backend.calls.filter((c) => c.op === 'discard').map((c) => c.offset), [4 * 512]);
  const anchor = cdb.unmap(24);
  anchor[1] = 0x01;
  assertSense(t, await run(lu, n, anchor), INVALID_FIELD_IN_CDB, 'ANCHOR');
});

test('UNMAP on a fully provisioned LU is not supported (05 20/00)', async (t) => {
  const { lu } = makeLu({ canDiscard: false });
  const n = await ready(t, lu, 'host-a');
  t.false(lu.thin);
  const list = cdb.unmapParameterList([{ lba: 0, blocks: 1 }]);
  assertSense(t, await run(lu, n, cdb.unmap(list.length), { out: list }), INVALID_COMMAND_OPERATION_CODE);
});

test('GET LBA STATUS reports mapped and deallocated runs after writes and UNMAP', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  // 4 KiB granules: blocks 0-15 written, 16-31 unmapped, 32-47 written, then holes.
  assertGood(t, await run(lu, n, cdb.write16(0, 48), { out: Buffer.alloc(48 * 512, 1) }));
  const list = cdb.unmapParameterList([{ lba: 16, blocks: 16 }]);
  assertGood(t, await run(lu, n, cdb.unmap(list.length), { out: list }));
  const r = await run(lu, n, cdb.getLbaStatus(0, 8 + 16 * 8));
  assertGood(t, r);
  t.deepEqual(parseLbaStatus(r.data), [
    { lba: 0n, blocks: 16, status: ProvisioningStatus.MAPPED },
    { lba: 16n, blocks: 16, status: ProvisioningStatus.DEALLOCATED },
    { lba: 32n, blocks: 16, status: ProvisioningStatus.MAPPED },
    { lba: 48n, blocks: BLOCKS - 48, status: ProvisioningStatus.DEALLOCATED },
  ]);
  const one = await run(lu, n, cdb.getLbaStatus(20, 24));
  t.deepEqual(parseLbaStatus(one.data), [{ lba: 20n, blocks: 12, status: ProvisioningStatus.DEALLOCATED }]);
  assertSense(t, await run(lu, n, cdb.getLbaStatus(BLOCKS, 24)), LBA_OUT_OF_RANGE);
});
