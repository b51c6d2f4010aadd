// The limits and geometry libiscsi's Inquiry, ReadCapacity16 and WriteSame
// families read (SBC-4 6.6.4, 5.21, 5.49): WRITE SAME with zero blocks
// writes to the end of the medium (WSNZ 0) within MAXIMUM WRITE SAME LENGTH,
// UNMAP's LBA count stays at most 2^20, and 512-byte logical blocks sit in
// 4 KiB physical blocks.
import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { parseBlockLimits } from '../../protocol/scsi/inquiry.js';
import { VpdPage } from '../../protocol/scsi/opcodes.js';
import { parseReadCapacity16 } from '../../protocol/scsi/read-capacity.js';
import { INVALID_FIELD_IN_CDB, LBA_OUT_OF_RANGE } from '../../protocol/scsi/sense-codes.js';
import { assertGood, assertSense, makeLu, ready, run } from './helpers/harness.js';

test('default Block Limits: WSNZ 0, MAXIMUM WRITE SAME LENGTH 65535, UNMAP LBA count at most 2^20', async (t) => {
  const { lu } = makeLu({ sizeBytes: 4 << 30, thin: true });
  const n = await ready(t, lu, 'host-a');
  const r = await run(lu, n, cdb.inquiry(255, VpdPage.BLOCK_LIMITS));
  assertGood(t, r);
  const bl = parseBlockLimits(r.data);
  t.false(bl.wsnz);
  t.is(bl.maxWriteSameLength, 0xffff);
  t.true(bl.maxUnmapLbaCount > 0 && bl.maxUnmapLbaCount <= 1 << 20, `${bl.maxUnmapLbaCount}`);
});

test('READ CAPACITY(16) reports 4 KiB physical blocks: exponent 3 at 512, 0 at 4096', async (t) => {
  for (const [blockSize, exp] of [[512, 3], [4096, 0]] as const) {
    const { lu } = makeLu({ blockSize });
    const n = await ready(t, lu, `host-${blockSize}`);
    const r = await run(lu, n, cdb.readCapacity16());
    assertGood(t, r);
    t.is(parseReadCapacity16(r.data).physicalBlockExponent, exp, `block size ${blockSize}`);
  }
});

test('physicalBlockSize 512 at 512-byte blocks: exponent 0, transfer and unmap granularity 1; below the block size it is refused', async (t) => {
  const { lu } = makeLu({ blockSize: 512, physicalBlockSize: 512, thin: true });
  const n = await ready(t, lu, 'host-a');
  const rc = await run(lu, n, cdb.readCapacity16());
  assertGood(t, rc);
  t.is(rc.data[13], 0, 'LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT');
  const r = await run(lu, n, cdb.inquiry(255, VpdPage.BLOCK_LIMITS));
  assertGood(t, r);
  const bl = parseBlockLimits(r.data);
  t.is(bl.optimalTransferLengthGranularity, 1);
  t.is(bl.optimalUnmapGranularity, 1);
  t.throws(() => makeLu({ blockSize: 4096, physicalBlockSize: 512 }), { message: /physical block size 512/ });
});

test('WRITE SAME with zero blocks writes from the LBA to the end of the medium', async (t) => {
  const { lu, backend } = makeLu({ sizeBytes: 64 * 1024 });
  const n = await ready(t, lu, 'host-a');
  const blocks = lu.blocks;
  backend.bytes.fill(0x11);
  const r = await run(lu, n, cdb.writeSame10(blocks - 4, 0), { out: Buffer.alloc(512, 0xab) });
  assertGood(t, r);
  t.true(backend.bytes.subarray((blocks - 4) * 512).equals(Buffer.alloc(4 * 512, 0xab)), 'the last 4 blocks written');
  t.is(backend.bytes[(blocks - 5) * 512], 0x11, 'the block before untouched');
  assertGood(t, await run(lu, n, cdb.writeSame16(blocks, 0), { out: Buffer.alloc(512) }), 'at the capacity: nothing to write');
  assertSense(t, await run(lu, n, cdb.writeSame10(blocks + 1, 0), { out: Buffer.alloc(512) }), LBA_OUT_OF_RANGE, 'past the end');
  assertSense(t, await run(lu, n, cdb.writeSame16(0xffffffffffffffffn, 0), { out: Buffer.alloc(512) }), LBA_OUT_OF_RANGE, 'LBA -1');
});

test('WRITE SAME to the end of a medium larger than MAXIMUM WRITE SAME LENGTH is 05 24/00', async (t) => {
  const { lu } = makeLu({ sizeBytes: 1 << 20, limits: { maxWriteSameBlocks: 1024 } });
  const n = await ready(t, lu, 'host-a');
  const r = await run(lu, n, cdb.writeSame16(0, 0), { out: Buffer.alloc(512) });
  assertSense(t, r, INVALID_FIELD_IN_CDB);
  t.deepEqual(r.sense?.fieldPointer, { inCdb: true, byte: 10 });
  assertGood(t, await run(lu, n, cdb.writeSame16(lu.blocks - 1024, 0), { out: Buffer.alloc(512) }), 'exactly the limit');
});
