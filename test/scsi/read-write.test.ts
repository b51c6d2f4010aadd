import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import {
  ALUA_UNAVAILABLE,
  INTERNAL_TARGET_FAILURE,
  INVALID_FIELD_IN_CDB,
  LBA_OUT_OF_RANGE,
  SPACE_ALLOCATION_FAILED_WRITE_PROTECT,
  UNRECOVERED_READ_ERROR,
  WRITE_ERROR,
  WRITE_PROTECTED,
} from '../../protocol/scsi/sense-codes.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { assertGood, assertSense, makeLu, pattern, ready, run } from './helpers/harness.js';

const BLOCKS = 2048; // 1 MiB of 512-byte blocks

test('WRITE then READ returns the same bytes for every CDB size', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const sizes: [string, (lba: number, blocks: number) => Buffer, (lba: number, blocks: number) => Buffer][] = [
    ['6', cdb.write6, cdb.read6],
    ['10', cdb.write10, cdb.read10],
    ['12', cdb.write12, cdb.read12],
    ['16', cdb.write16, cdb.read16],
  ];
  for (const [i, [name, w, rd]] of sizes.entries()) {
    const lba = 10 + i * 20;
    const data = pattern(8 * 512, i + 1);
    const wr = await run(lu, n, w(lba, 8), { out: data });
    assertGood(t, wr, `WRITE(${name})`);
    t.is(wr.direction, 'out');
    t.is(wr.transferLength, 8 * 512);
    t.true(backend.bytes.subarray(lba * 512, (lba + 8) * 512).equals(data), `WRITE(${name}) reached the medium`);
    const r = await run(lu, n, rd(lba, 8));
    assertGood(t, r, `READ(${name})`);
    t.is(r.direction, 'in');
    t.true(r.data.equals(data), `READ(${name}) returns what was written`);
  }
});

test('READ(6) with TRANSFER LENGTH 0 moves 256 blocks', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const c = cdb.read6(0, 1);
  c[4] = 0;
  const r = await run(lu, n, c);
  assertGood(t, r);
  t.is(r.transferLength, 256 * 512);
  t.is(r.data.length, 256 * 512);
});

test('a 4096-byte-block LU addresses 4 KiB blocks', async (t) => {
  const { lu, backend } = makeLu({ blockSize: 4096 });
  const n = await ready(t, lu, 'host-a');
  const data = pattern(4096 * 2, 9);
  assertGood(t, await run(lu, n, cdb.write10(3, 2), { out: data }));
  t.true(backend.bytes.subarray(3 * 4096, 5 * 4096).equals(data));
  t.true((await run(lu, n, cdb.read16(3, 2))).data.equals(data));
});

test('FUA reaches the backend; so does write-through when WCE is off', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  await run(lu, n, cdb.write10(0, 1, { fua: true }), { out: Buffer.alloc(512, 1) });
  await run(lu, n, cdb.write10(1, 1), { out: Buffer.alloc(512, 1) });
  const writes = backend.calls.filter((c) => c.op === 'write');
  t.deepEqual(
    writes.map((c) => c.fua),
    [true, false],
  );
  lu.setModes({ ...lu.modes, wce: false }, n);
  await run(lu, n, cdb.write16(2, 1), { out: Buffer.alloc(512, 1) });
  t.true(backend.calls.filter((c) => c.op === 'write')[2].fua);
});

test('zero-length transfers succeed without touching the backend', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const before = backend.calls.length;
  const r = await run(lu, n, cdb.read10(5, 0));
  assertGood(t, r);
  t.is(r.direction, 'none');
  assertGood(t, await run(lu, n, cdb.write16(BLOCKS, 0)));
  t.is(backend.calls.length, before);
});

test('LBA past the end, an overflowing range and a wrapping 64-bit LBA are 05 21/00', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  assertSense(t, await run(lu, n, cdb.read10(BLOCKS, 1)), LBA_OUT_OF_RANGE, 'at the end');
  assertSense(t, await run(lu, n, cdb.read10(BLOCKS - 1, 2)), LBA_OUT_OF_RANGE, 'across the end');
  assertSense(t, await run(lu, n, cdb.read10(BLOCKS + 1, 0)), LBA_OUT_OF_RANGE, 'zero blocks past the end');
  assertSense(t, await run(lu, n, cdb.write16(0xffff_ffff_ffff_ffffn, 2)), LBA_OUT_OF_RANGE, 'wraps');
  assertSense(t, await run(lu, n, cdb.read16(2n ** 63n, 1)), LBA_OUT_OF_RANGE, '2^63');
  assertGood(t, await run(lu, n, cdb.read10(BLOCKS - 1, 1)), 'last block');
});

test('RDPROTECT/WRPROTECT and a transfer over the limit are 05 24/00 with a field pointer', async (t) => {
  const { lu } = makeLu({ limits: { maxTransferBlocks: 64 } });
  const n = await ready(t, lu, 'host-a');
  const c = cdb.read10(0, 1);
  c[1] = 0x20;
  const r = await run(lu, n, c);
  assertSense(t, r, INVALID_FIELD_IN_CDB);
  t.deepEqual(r.sense?.fieldPointer, { inCdb: true, byte: 1, bit: 7 });
  const big = await run(lu, n, cdb.write16(0, 65));
  assertSense(t, big, INVALID_FIELD_IN_CDB);
  t.deepEqual(big.sense?.fieldPointer, { inCdb: true, byte: 10 });
  assertGood(t, await run(lu, n, cdb.read16(0, 64)));
});

test('writes to a read-only LU, or under ro access, are 07 27/00; reads still work', async (t) => {
  const ro = makeLu({ readOnly: true }).lu;
  const n = await ready(t, ro, 'host-a');
  const r = await run(ro, n, cdb.write10(0, 1), { out: Buffer.alloc(512) });
  assertSense(t, r, WRITE_PROTECTED);
  t.is(r.transferLength, 0, 'refused without fetching any data-out');
  assertGood(t, await run(ro, n, cdb.read10(0, 1)));
  const backendRo = makeLu({ backendReadOnly: true }).lu;
  t.true(backendRo.readOnly);

  const { lu, backend } = makeLu();
  const m = await ready(t, lu, 'host-b');
  assertSense(t, await run(lu, m, cdb.write16(0, 1), { out: Buffer.alloc(512, 7), access: 'ro' }), WRITE_PROTECTED);
  t.is(backend.bytes[0], 0, 'nothing written');
  assertGood(t, await run(lu, m, cdb.read16(0, 1), { access: 'ro' }));
});

test('backend errno maps to sense in one place', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const out = { out: Buffer.alloc(512, 3) };
  backend.failNext('read', 'EIO');
  assertSense(t, await run(lu, n, cdb.read10(0, 1)), UNRECOVERED_READ_ERROR, 'EIO on read');
  backend.failNext('write', 'EIO');
  assertSense(t, await run(lu, n, cdb.write10(0, 1), out), WRITE_ERROR, 'EIO on write');
  backend.failNext('write', 'ENOSPC');
  assertSense(t, await run(lu, n, cdb.write10(0, 1), out), SPACE_ALLOCATION_FAILED_WRITE_PROTECT, 'ENOSPC');
  backend.failNext('write', 'EROFS');
  assertSense(t, await run(lu, n, cdb.write10(0, 1), out), WRITE_PROTECTED, 'EROFS');
  backend.failNext('write', 'EACCES');
  assertSense(t, await run(lu, n, cdb.write10(0, 1), out), WRITE_PROTECTED, 'EACCES');
  backend.failNext('flush', 'EIO');
  assertSense(t, await run(lu, n, cdb.synchronizeCache10()), WRITE_ERROR, 'EIO on flush');
  backend.failNext('read', 'ENOMEM');
  const busy = await run(lu, n, cdb.read10(0, 1));
  t.is(busy.status, ScsiStatus.BUSY);
  t.is(busy.completion.sense, undefined);
  backend.failNext('read', 'EOVERFLOW');
  assertSense(t, await run(lu, n, cdb.read10(0, 1)), LBA_OUT_OF_RANGE, 'EOVERFLOW');
  // librados's EBLOCKLISTED: this gateway is fenced from the image (docs/backends.md "Several gateways and stale writes").
  backend.failNext('write', 'ESHUTDOWN');
  assertSense(t, await run(lu, n, cdb.write10(0, 1), out), ALUA_UNAVAILABLE, 'ESHUTDOWN');
  backend.failNext('read', 'ESTALE');
  assertSense(t, await run(lu, n, cdb.read10(0, 1)), INTERNAL_TARGET_FAILURE, 'anything else');
  assertGood(t, await run(lu, n, cdb.read10(0, 1)), 'the next read is fine');
});

test('SYNCHRONIZE CACHE flushes and checks its range; PRE-FETCH only checks', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  assertGood(t, await run(lu, n, cdb.synchronizeCache10({ lba: 8, blocks: 8 })));
  assertGood(t, await run(lu, n, cdb.synchronizeCache16()));
  t.is(backend.calls.filter((c) => c.op === 'flush').length, 2);
  assertSense(t, await run(lu, n, cdb.synchronizeCache16({ lba: BLOCKS, blocks: 1 })), LBA_OUT_OF_RANGE);
  assertGood(t, await run(lu, n, cdb.prefetch10({ lba: 0, blocks: 16 })));
  assertSense(t, await run(lu, n, cdb.prefetch16({ lba: BLOCKS + 1 })), LBA_OUT_OF_RANGE);
  t.is(backend.calls.filter((c) => c.op === 'flush').length, 2);
});
