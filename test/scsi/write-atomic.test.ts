// WRITE ATOMIC(16) (SBC-4 5.48, target/scsi/commands/write-atomic.ts): the limits in
// VPD B0h, the refusals (range, alignment, granularity, length, boundary,
// WRPROTECT, a read-only LU, a backend without atomic writes), the bytes it
// writes, and that no READ sees the blocks while the write is under way.
import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { parseBlockLimits } from '../../protocol/scsi/inquiry.js';
import { VpdPage } from '../../protocol/scsi/opcodes.js';
import { INVALID_COMMAND_OPERATION_CODE, INVALID_FIELD_IN_CDB, LBA_OUT_OF_RANGE, WRITE_PROTECTED } from '../../protocol/scsi/sense-codes.js';
import { LogicalUnit } from '../../target/scsi/logical-unit.js';
import { assertGood, assertSense, makeLu, pattern, ready, run, UUID } from './helpers/harness.js';
import { MemBackend } from './helpers/mem-backend.js';

const BLOCK = 512;

test('VPD B0h: MAXIMUM ATOMIC TRANSFER LENGTH = MAXIMUM TRANSFER LENGTH in whole physical blocks, alignment and granularity one physical block', async (t) => {
  for (const [physicalBlockSize, per] of [[4096, 8], [512, 1]] as const) {
    const { lu } = makeLu({ physicalBlockSize, limits: { maxTransferBlocks: 2047 } });
    const n = await ready(t, lu, `host-${physicalBlockSize}`);
    const r = await run(lu, n, cdb.inquiry(255, VpdPage.BLOCK_LIMITS));
    assertGood(t, r);
    const page = r.data;
    t.is(page.readUInt32BE(44), per === 8 ? 2040 : 2047, 'MAXIMUM ATOMIC TRANSFER LENGTH');
    t.is(page.readUInt32BE(48), per, 'ATOMIC ALIGNMENT');
    t.is(page.readUInt32BE(52), per, 'ATOMIC TRANSFER LENGTH GRANULARITY');
    t.is(page.readUInt32BE(56), 0, 'MAXIMUM ATOMIC TRANSFER LENGTH WITH ATOMIC BOUNDARY');
    t.is(page.readUInt32BE(60), 0, 'MAXIMUM ATOMIC BOUNDARY SIZE');
    t.true(page.readUInt32BE(44) <= parseBlockLimits(page).maxTransferLength);
  }
});

test('an aligned atomic write lands exactly its blocks, with FUA passed on', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  backend.bytes.fill(0x11, 0, 32 * BLOCK);
  const data = pattern(16 * BLOCK, 156);
  assertGood(t, await run(lu, n, cdb.writeAtomic16(8, 16, { fua: true }), { out: data }));
  t.true(backend.bytes.subarray(8 * BLOCK, 24 * BLOCK).equals(data));
  t.true(backend.bytes.subarray(0, 8 * BLOCK).equals(Buffer.alloc(8 * BLOCK, 0x11)), 'before untouched');
  t.true(backend.bytes.subarray(24 * BLOCK, 32 * BLOCK).equals(Buffer.alloc(8 * BLOCK, 0x11)), 'after untouched');
  const w = backend.calls.filter((c) => c.op === 'write');
  t.deepEqual(w, [{ op: 'write', offset: 8 * BLOCK, length: 16 * BLOCK, fua: true }], 'one backend write');
  assertGood(t, await run(lu, n, cdb.writeAtomic16(0, 0)), 'zero blocks: nothing to do');
  t.is(backend.calls.filter((c) => c.op === 'write').length, 1);
});

test('refusals: out of range first, then length, granularity and alignment; boundary and WRPROTECT; nothing written', async (t) => {
  const { lu, backend } = makeLu({ limits: { maxTransferBlocks: 64 } });
  const n = await ready(t, lu, 'host-a');
  const out = pattern(128 * BLOCK, 3);
  const cases: [Buffer, typeof LBA_OUT_OF_RANGE, number | undefined, string][] = [
    [cdb.writeAtomic16(lu.blocks - 8, 16), LBA_OUT_OF_RANGE, undefined, 'past the end'],
    [cdb.writeAtomic16(lu.blocks - 8, 128), LBA_OUT_OF_RANGE, undefined, 'past the end and too long: the range decides'],
    [cdb.writeAtomic16(0x8000000000000000n, 8), LBA_OUT_OF_RANGE, undefined, 'LBA 2^63'],
    [cdb.writeAtomic16(lu.blocks + 8, 0), LBA_OUT_OF_RANGE, undefined, 'zero blocks past the end'],
    [cdb.writeAtomic16(0, 72), INVALID_FIELD_IN_CDB, 12, 'longer than MAXIMUM ATOMIC TRANSFER LENGTH'],
    [cdb.writeAtomic16(0, 4), INVALID_FIELD_IN_CDB, 12, 'not a multiple of the granularity'],
    [cdb.writeAtomic16(1, 8), INVALID_FIELD_IN_CDB, 2, 'misaligned LBA'],
    [cdb.writeAtomic16(0, 8, { boundary: 8 }), INVALID_FIELD_IN_CDB, 10, 'an ATOMIC BOUNDARY'],
  ];
  for (const [c, code, byte, what] of cases) {
    const r = await run(lu, n, c, { out });
    assertSense(t, r, code, what);
    if (byte !== undefined) t.deepEqual(r.sense?.fieldPointer, { inCdb: true, byte }, `${what}: field pointer`);
  }
  const prot = cdb.writeAtomic16(0, 8);
  prot[1] |= 0x20;
  assertSense(t, await run(lu, n, prot, { out }), INVALID_FIELD_IN_CDB, 'WRPROTECT 1');
  t.is(backend.calls.filter((c) => c.op === 'write').length, 0, 'nothing reached the backend');
});

test('a read-only LU refuses it with 07 27/00; a backend without atomic writes does not offer it (05 20/00, VPD limits 0)', async (t) => {
  const ro = makeLu({ readOnly: true });
  const n = await ready(t, ro.lu, 'host-a');
  assertSense(t, await run(ro.lu, n, cdb.writeAtomic16(0, 8), { out: pattern(8 * BLOCK, 1) }), WRITE_PROTECTED);
  t.is(ro.backend.calls.filter((c) => c.op === 'write').length, 0);

  // A store other hosts write too, as RbdBackend declares itself.
  const backend = new MemBackend(1 << 20);
  Object.defineProperty(backend, 'atomicWrites', { value: false });
  const lu = new LogicalUnit({ name: 'shared', identifier: UUID, backend });
  const m = await ready(t, lu, 'host-b');
  assertSense(t, await run(lu, m, cdb.writeAtomic16(0, 8), { out: pattern(8 * BLOCK, 1) }), INVALID_COMMAND_OPERATION_CODE);
  const r = await run(lu, m, cdb.inquiry(255, VpdPage.BLOCK_LIMITS));
  t.is(r.data.readUInt32BE(44), 0, 'MAXIMUM ATOMIC TRANSFER LENGTH 0');
});

test('a READ of the blocks waits for the atomic write and sees all of it; beside a plain WRITE it does not wait', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const m = await ready(t, lu, 'host-b');
  for (const [name, c] of [['WRITE ATOMIC(16)', cdb.writeAtomic16(0, 16)], ['WRITE(16)', cdb.write16(0, 16)]] as const) {
    backend.bytes.fill(0x22, 0, 16 * BLOCK);
    const data = pattern(16 * BLOCK, name.length);
    const open = backend.gate('write');
    const writing = run(lu, n, c, { out: data });
    // The write is held inside the backend; a READ of blocks 4..11 starts now.
    while (!backend.calls.some((x) => x.op === 'write' && x.offset === 0)) await new Promise<void>((r) => setImmediate(r));
    const before = backend.calls.length;
    const reading = run(lu, m, cdb.read16(4, 8));
    for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
    const readStarted = backend.calls.slice(before).some((x) => x.op === 'read');
    open();
    assertGood(t, await writing, name);
    const r = await reading;
    assertGood(t, r, `READ beside ${name}`);
    if (name === 'WRITE ATOMIC(16)') {
      t.false(readStarted, 'the READ did not reach the backend while the atomic write was under way');
      t.true(r.data.equals(data.subarray(4 * BLOCK, 12 * BLOCK)), 'and it read the new blocks');
    } else {
      t.true(readStarted, 'control: a READ beside a plain WRITE is not held back');
    }
    backend.calls.length = 0;
  }
});
