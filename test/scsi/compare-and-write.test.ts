import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import {
  INVALID_FIELD_IN_CDB,
  LBA_OUT_OF_RANGE,
  MISCOMPARE_DURING_VERIFY,
  WRITE_PROTECTED,
} from '../../protocol/scsi/sense-codes.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { assertGood, assertSense, makeLu, pattern, ready, run } from './helpers/harness.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

test('COMPARE AND WRITE writes when the verify data matches', async (t) => {
  const { lu, backend } = makeLu({ limits: { maxCompareAndWriteBlocks: 2 } });
  const n = await ready(t, lu, 'host-a');
  const old = pattern(1024, 1);
  const next = pattern(1024, 2);
  assertGood(t, await run(lu, n, cdb.write10(10, 2), { out: old }));
  const r = await run(lu, n, cdb.compareAndWrite(10, 2, { fua: true }), { out: Buffer.concat([old, next]) });
  assertGood(t, r);
  t.is(r.transferLength, 2048, 'data-out is verify then write: 2 x NLB blocks');
  t.true(backend.bytes.subarray(10 * 512, 12 * 512).equals(next));
  t.true(backend.calls.filter((c) => c.op === 'write').at(-1)?.fua);
});

test('a miscompare reports the offset of the first differing byte and writes nothing', async (t) => {
  const { lu, backend } = makeLu({ limits: { maxCompareAndWriteBlocks: 2 } });
  const n = await ready(t, lu, 'host-a');
  const old = pattern(1024, 3);
  assertGood(t, await run(lu, n, cdb.write10(4, 2), { out: old }));
  const verify = Buffer.from(old);
  verify[700] ^= 0xff;
  verify[900] ^= 0xff;
  const writes = backend.calls.filter((c) => c.op === 'write').length;
  const r = await run(lu, n, cdb.compareAndWrite(4, 2), { out: Buffer.concat([verify, pattern(1024, 4)]) });
  assertSense(t, r, MISCOMPARE_DURING_VERIFY);
  t.is(r.sense?.information, 700n);
  t.is(r.completion.sense?.[0], 0xf0, 'VALID is set');
  t.true(backend.bytes.subarray(4 * 512, 6 * 512).equals(old), 'medium unchanged');
  t.is(backend.calls.filter((c) => c.op === 'write').length, writes);
});

test('COMPARE AND WRITE checks NLB against the limit, the range, WRPROTECT and read-only', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const two = await run(lu, n, cdb.compareAndWrite(0, 2), { out: Buffer.alloc(2048) });
  assertSense(t, two, INVALID_FIELD_IN_CDB, 'NLB over the B0h limit of 1');
  t.deepEqual(two.sense?.fieldPointer, { inCdb: true, byte: 13 });
  assertSense(t, await run(lu, n, cdb.compareAndWrite(2048, 1), { out: Buffer.alloc(1024) }), LBA_OUT_OF_RANGE);
  const wp = cdb.compareAndWrite(0, 1);
  wp[1] = 0x20;
  assertSense(t, await run(lu, n, wp, { out: Buffer.alloc(1024) }), INVALID_FIELD_IN_CDB, 'WRPROTECT');
  const zero = await run(lu, n, cdb.compareAndWrite(0, 0));
  assertGood(t, zero, 'NLB 0 is a no-op');
  t.is(zero.direction, 'none');
  assertSense(t, await run(lu, n, cdb.compareAndWrite(0, 1), { out: Buffer.alloc(1024), access: 'ro' }), WRITE_PROTECTED);
});

test('concurrent COMPARE AND WRITEs of the same old data from three nexuses: exactly one wins', async (t) => {
  const { lu, backend } = makeLu();
  const nexuses = [await ready(t, lu, 'host-a'), await ready(t, lu, 'host-b'), await ready(t, lu, 'host-c')];
  const old = Buffer.alloc(512);
  const results = await Promise.all(
    nexuses.map((n, i) => run(lu, n, cdb.compareAndWrite(7, 1), { out: Buffer.concat([old, Buffer.alloc(512, i + 1)]) })),
  );
  const winners = results.flatMap((r, i) => (r.status === ScsiStatus.GOOD ? [i] : []));
  t.is(winners.length, 1, 'one GOOD');
  for (const [i, r] of results.entries()) {
    if (i !== winners[0]) assertSense(t, r, MISCOMPARE_DURING_VERIFY, `loser ${i}`);
  }
  t.true(backend.bytes.subarray(7 * 512, 8 * 512).equals(Buffer.alloc(512, winners[0] + 1)), "the winner's data is on the medium");
});

test('a WRITE to the same block waits until COMPARE AND WRITE has compared and written', async (t) => {
  const { lu, backend } = makeLu();
  const a = await ready(t, lu, 'host-a');
  const b = await ready(t, lu, 'host-b');
  const openReads = backend.gate('read');
  const caw = run(lu, a, cdb.compareAndWrite(3, 1), { out: Buffer.concat([Buffer.alloc(512), Buffer.alloc(512, 0xca)]) });
  await tick();
  const write = run(lu, b, cdb.write10(3, 1), { out: Buffer.alloc(512, 0xbb) });
  for (let i = 0; i < 5; i++) await tick();
  t.is(backend.calls.filter((c) => c.op === 'write').length, 0, 'the WRITE is held while COMPARE AND WRITE holds the blocks');
  t.is(lu.rangeLock.waitingCount, 1);
  openReads();
  const [cr, wr] = await Promise.all([caw, write]);
  assertGood(t, cr, 'COMPARE AND WRITE');
  assertGood(t, wr, 'WRITE');
  t.deepEqual(
    backend.calls.filter((c) => c.op === 'write').map((c) => c.length),
    [512, 512],
  );
  t.true(backend.bytes.subarray(3 * 512, 4 * 512).equals(Buffer.alloc(512, 0xbb)), 'the later WRITE lands last');
  t.is(lu.rangeLock.activeCount, 0);
});

test('a WRITE to other blocks is not held by COMPARE AND WRITE', async (t) => {
  const { lu, backend } = makeLu();
  const a = await ready(t, lu, 'host-a');
  const b = await ready(t, lu, 'host-b');
  const openReads = backend.gate('read');
  const caw = run(lu, a, cdb.compareAndWrite(3, 1), { out: Buffer.alloc(1024) });
  await tick();
  assertGood(t, await run(lu, b, cdb.write10(4, 1), { out: Buffer.alloc(512, 0xbb) }));
  openReads();
  assertGood(t, await caw);
});
