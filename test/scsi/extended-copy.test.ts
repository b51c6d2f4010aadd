// EXTENDED COPY(LID1) and RECEIVE COPY RESULTS (SPC-4 6.4, 6.18;
// target/scsi/commands/extended-copy.ts): blocks copied within the LU (overlapping
// ranges included), the outcome held per nexus and list identifier, and
// every refusal of the parameter list with nothing written.
import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import {
  COPY_ABORTED,
  COPY_TARGET_DEVICE_NOT_REACHABLE,
  INVALID_FIELD_IN_CDB,
  PARAMETER_LIST_LENGTH_ERROR,
  TOO_MANY_SEGMENT_DESCRIPTORS,
  TOO_MANY_TARGET_DESCRIPTORS,
  UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE,
  UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE,
} from '../../protocol/scsi/sense-codes.js';
import { assertGood, assertSense, makeLu, pattern, ready, run } from './helpers/harness.js';

const BLOCK = 512;

test('two segments copy their blocks, an overlapping one as if through a buffer; COPY STATUS reports them to this nexus only', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const other = await ready(t, lu, 'host-b');
  const a = pattern(8 * BLOCK, 1);
  const b = pattern(8 * BLOCK, 2);
  a.copy(backend.bytes, 0);
  b.copy(backend.bytes, 100 * BLOCK);
  const list = cdb.extendedCopyList({
    listId: 7,
    targets: [lu.naa],
    blockSize: BLOCK,
    segments: [
      { blocks: 8, srcLba: 0, dstLba: 50 },
      // Overlapping: blocks 100..107 move to 104..111.
      { blocks: 8, srcLba: 100, dstLba: 104 },
    ],
  });
  assertGood(t, await run(lu, n, cdb.extendedCopy(list.length), { out: list }));
  t.true(backend.bytes.subarray(50 * BLOCK, 58 * BLOCK).equals(a), 'segment 1');
  t.true(backend.bytes.subarray(104 * BLOCK, 112 * BLOCK).equals(b), 'segment 2, overlapping');
  t.true(backend.bytes.subarray(0, 8 * BLOCK).equals(a), 'the source of segment 1 unchanged');

  const st = await run(lu, n, cdb.receiveCopyResults(0, 7, 1024));
  assertGood(t, st);
  t.deepEqual([...st.data], [0, 0, 0, 8, 0x01, 0, 2, 0, 0, 0, (16 * BLOCK) >> 8, 0], 'completed, 2 segments, 8 KiB in bytes');
  assertSense(t, await run(lu, other, cdb.receiveCopyResults(0, 7, 1024)), INVALID_FIELD_IN_CDB, 'another nexus');
  assertSense(t, await run(lu, n, cdb.receiveCopyResults(0, 8, 1024)), INVALID_FIELD_IN_CDB, 'a list never sent');

  const discard = cdb.extendedCopyList({ listId: 9, listIdUsage: 2, targets: [lu.naa], blockSize: BLOCK, segments: [{ blocks: 1, srcLba: 0, dstLba: 200 }] });
  assertGood(t, await run(lu, n, cdb.extendedCopy(discard.length), { out: discard }));
  assertSense(t, await run(lu, n, cdb.receiveCopyResults(0, 9, 1024)), INVALID_FIELD_IN_CDB, 'LIST ID USAGE 10b: not held');
  assertGood(t, await run(lu, n, cdb.extendedCopy(0)), 'no list: nothing to copy');
});

test('OPERATING PARAMETERS: the limits the parser enforces and the two descriptor types', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const r = await run(lu, n, cdb.receiveCopyResults(3, 0, 1024));
  assertGood(t, r);
  const d = r.data;
  t.is(d.length, 46);
  t.is(d.readUInt32BE(0), 42, 'AVAILABLE DATA');
  t.is(d.readUInt16BE(8), 2, 'MAXIMUM TARGET DESCRIPTOR COUNT');
  t.is(d.readUInt16BE(10), 16, 'MAXIMUM SEGMENT DESCRIPTOR COUNT');
  t.is(d.readUInt32BE(12), 1024, 'MAXIMUM DESCRIPTOR LIST LENGTH');
  t.is(d.readUInt32BE(20), 0, 'MAXIMUM INLINE DATA LENGTH');
  t.is(d[43], 2);
  t.deepEqual([d[44], d[45]], [0x02, 0xe4]);
});

test('list errors are refused before any block moves; a segment past the end aborts the copy after the segments before it', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  pattern(4 * BLOCK, 5).copy(backend.bytes, 0);
  const seg = { blocks: 4, srcLba: 0, dstLba: 40 };
  const good = cdb.extendedCopyList({ listId: 1, targets: [lu.naa], blockSize: BLOCK, segments: [seg] });
  const elsewhere = Buffer.from(lu.naa);
  elsewhere[15] ^= 0xff;
  const typed = (at: number, value: number): Buffer => {
    const l = Buffer.from(good);
    l[at] = value;
    return l;
  };
  const cases: [Buffer, number, Parameters<typeof assertSense>[2], string][] = [
    [good.subarray(0, 12), 12, PARAMETER_LIST_LENGTH_ERROR, 'shorter than the header'],
    [good.subarray(0, good.length - 1), good.length - 1, PARAMETER_LIST_LENGTH_ERROR, 'shorter than its descriptors'],
    [cdb.extendedCopyList({ listId: 1, targets: [lu.naa, lu.naa, lu.naa], blockSize: BLOCK, segments: [seg] }), -1, TOO_MANY_TARGET_DESCRIPTORS, 'three targets'],
    [cdb.extendedCopyList({ listId: 1, targets: [lu.naa], blockSize: BLOCK, segments: Array.from({ length: 17 }, () => seg) }), -1, TOO_MANY_SEGMENT_DESCRIPTORS, '17 segments'],
    [cdb.extendedCopyList({ listId: 1, targets: [lu.naa, lu.naa], blockSize: BLOCK, segments: Array.from({ length: 35 }, () => seg) }), -1, PARAMETER_LIST_LENGTH_ERROR, 'longer than MAXIMUM DESCRIPTOR LIST LENGTH'],
    [typed(16, 0xe0), -1, UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE, 'an N_Port name target descriptor'],
    [typed(48, 0x03), -1, UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE, 'a stream-to-stream segment'],
    [cdb.extendedCopyList({ listId: 1, targets: [elsewhere], blockSize: BLOCK, segments: [seg] }), -1, COPY_TARGET_DEVICE_NOT_REACHABLE, 'another LU'],
    [cdb.extendedCopyList({ listId: 1, targets: [lu.naa], blockSize: 4096, segments: [seg] }), -1, COPY_TARGET_DEVICE_NOT_REACHABLE, 'another block length'],
    [cdb.extendedCopyList({ listId: 1, targets: [lu.naa], blockSize: BLOCK, segments: [{ ...seg, dst: 1 }] }), -1, COPY_TARGET_DEVICE_NOT_REACHABLE, 'a target index beyond the list'],
  ];
  for (const [list, length, code, what] of cases) {
    const r = await run(lu, n, cdb.extendedCopy(length < 0 ? list.length : length), { out: list });
    assertSense(t, r, code, what);
  }
  t.true(backend.bytes.subarray(40 * BLOCK, 44 * BLOCK).equals(Buffer.alloc(4 * BLOCK)), 'nothing was copied');

  const partly = cdb.extendedCopyList({ listId: 2, targets: [lu.naa], blockSize: BLOCK, segments: [seg, { blocks: 8, srcLba: 0, dstLba: lu.blocks - 4 }] });
  assertSense(t, await run(lu, n, cdb.extendedCopy(partly.length), { out: partly }), COPY_ABORTED, 'the second segment ends past the medium');
  t.true(backend.bytes.subarray(40 * BLOCK, 44 * BLOCK).equals(backend.bytes.subarray(0, 4 * BLOCK)), 'the first segment was copied');
  const st = await run(lu, n, cdb.receiveCopyResults(0, 2, 1024));
  assertGood(t, st);
  t.is(st.data[4], 0x02, 'completed with errors');
  t.is(st.data.readUInt16BE(5), 1, 'one segment processed');
});
