import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import {
  INVALID_FIELD_IN_CDB,
  LBA_OUT_OF_RANGE,
  MISCOMPARE_DURING_VERIFY,
  UNRECOVERED_READ_ERROR,
  WRITE_PROTECTED,
} from '../../protocol/scsi/sense-codes.js';
import { assertGood, assertSense, makeLu, pattern, ready, run } from './helpers/harness.js';

test('VERIFY with BYTCHK 0 reads the medium and moves no data', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const r = await run(lu, n, cdb.verify10(0, 16));
  assertGood(t, r);
  t.is(r.direction, 'none');
  t.deepEqual(backend.calls.filter((c) => c.op === 'read').map((c) => c.length), [16 * 512]);
  backend.failNext('read', 'EIO');
  assertSense(t, await run(lu, n, cdb.verify16(0, 16)), UNRECOVERED_READ_ERROR);
});

test('VERIFY with BYTCHK 1 compares data-out, and reports the first differing byte', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const data = pattern(4 * 512, 7);
  assertGood(t, await run(lu, n, cdb.write10(20, 4), { out: data }));
  assertGood(t, await run(lu, n, cdb.verify12(20, 4, { bytchk: 1 }), { out: data }));
  const bad = Buffer.from(data);
  bad[1500] ^= 1;
  const r = await run(lu, n, cdb.verify16(20, 4, { bytchk: 1 }), { out: bad });
  assertSense(t, r, MISCOMPARE_DURING_VERIFY);
  t.is(r.sense?.information, 1500n);
});

test('VERIFY with BYTCHK 3 compares one block against each', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const block = pattern(512, 8);
  assertGood(t, await run(lu, n, cdb.writeSame16(40, 3), { out: block }));
  const r = await run(lu, n, cdb.verify10(40, 3, { bytchk: 3 }), { out: block });
  assertGood(t, r);
  t.is(r.transferLength, 512);
  const m = await run(lu, n, cdb.verify10(40, 4, { bytchk: 3 }), { out: block });
  assertSense(t, m, MISCOMPARE_DURING_VERIFY);
  t.is(m.sense?.information, BigInt(3 * 512));
});

test('VERIFY errors: BYTCHK 2, VRPROTECT, past the end', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const c = cdb.verify10(0, 1);
  c[1] = 0x04;
  assertSense(t, await run(lu, n, c), INVALID_FIELD_IN_CDB);
  const p = cdb.verify16(0, 1);
  p[1] = 0x40;
  assertSense(t, await run(lu, n, p), INVALID_FIELD_IN_CDB);
  assertSense(t, await run(lu, n, cdb.verify16(2047, 2)), LBA_OUT_OF_RANGE);
  assertGood(t, await run(lu, n, cdb.verify16(2048, 0)));
});

test('WRITE AND VERIFY writes through and compares what it reads back', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const data = pattern(2 * 512, 9);
  assertGood(t, await run(lu, n, cdb.writeAndVerify10(5, 2, { bytchk: 1 }), { out: data }));
  t.true(backend.bytes.subarray(5 * 512, 7 * 512).equals(data));
  t.true(backend.calls.filter((c) => c.op === 'write').at(-1)?.fua);
  assertGood(t, await run(lu, n, cdb.writeAndVerify16(7, 1), { out: data }));
  assertSense(t, await run(lu, n, cdb.writeAndVerify12(0, 1), { out: data, access: 'ro' }), WRITE_PROTECTED);
  const c = cdb.writeAndVerify10(0, 1);
  c[1] = 0x06;
  assertSense(t, await run(lu, n, c, { out: data }), INVALID_FIELD_IN_CDB, 'BYTCHK 3 is not defined here');
});
