// The request core (target/scsi/request) driven through a front end written
// here, as a second front end would drive it: what it allocates, fetches and
// pushes, and the one response it gets, with its status, sense and residuals.
import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import {
  INTERNAL_TARGET_FAILURE,
  INVALID_FIELD_IN_CDB,
  INVALID_FIELD_IN_COMMAND_INFORMATION_UNIT,
  LOGICAL_UNIT_NOT_SUPPORTED,
  PROTOCOL_SERVICE_CRC_ERROR,
  UNRECOVERED_READ_ERROR,
  WRITE_PROTECTED,
  type SenseCode,
} from '../../protocol/scsi/sense-codes.js';
import { decodeSense } from '../../protocol/scsi/sense.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import type { LogicalUnit } from '../../target/scsi/logical-unit.js';
import type { Nexus } from '../../target/scsi/nexus.js';
import { DataOutUnusable, type DataOffer, type RequestBuffer, type RequestFrontEnd, type RequestScope, type Residuals } from '../../target/scsi/request/front-end.js';
import { ScsiRequest } from '../../target/scsi/request/request.js';
import { makeLu, nexus, pattern, ready } from './helpers/harness.js';

interface Answer {
  status: number;
  sense: Buffer | undefined;
  residuals: Residuals;
}

class TestBuffer implements RequestBuffer {
  released = 0;
  constructor(readonly buffer: Buffer) {}
  release(): void {
    this.released++;
  }
}

/** An initiator's buffer on one side, the core's calls recorded on the other. */
class TestFrontEnd implements RequestFrontEnd<TestBuffer> {
  readonly label = 'test command';
  readonly calls: string[] = [];
  readonly answers: Answer[] = [];
  readonly failures: { step: string; error: unknown }[] = [];
  readonly buffers: TestBuffer[] = [];
  /** Runs inside allocate(), before it resolves: where a test aborts or throws. */
  onAllocate: (() => void) | null = null;
  failFetch = false;
  failPush = false;
  failComplete = false;

  /** `initiator` is the initiator's buffer: data-out comes from it, data-in lands in it. */
  constructor(readonly initiator: Buffer) {}

  async allocate(length: number): Promise<TestBuffer> {
    this.calls.push(`allocate ${length}`);
    await Promise.resolve();
    this.onAllocate?.();
    const b = new TestBuffer(Buffer.alloc(length));
    this.buffers.push(b);
    return b;
  }

  async fetchDataOut(into: TestBuffer, offset: number, length: number): Promise<void> {
    this.calls.push(`fetch ${offset}+${length}`);
    await Promise.resolve();
    if (this.failFetch) throw new Error('the link went down');
    this.initiator.copy(into.buffer, offset, offset, offset + length);
  }

  async pushDataIn(from: TestBuffer, offset: number, length: number): Promise<void> {
    this.calls.push(`push ${offset}+${length}`);
    await Promise.resolve();
    if (this.failPush) throw new Error('the link went down');
    from.buffer.copy(this.initiator, offset, offset, offset + length);
  }

  async complete(status: number, sense: Buffer | undefined, residuals: Residuals): Promise<void> {
    this.calls.push('complete');
    this.answers.push({ status, sense, residuals });
    if (this.failComplete) throw new Error('could not send the response');
  }

  transferFailed(step: 'data-out' | 'data-in', error: unknown): void {
    this.calls.push(`failed ${step}`);
    this.failures.push({ step, error });
  }
}

function scope(nexus: Nexus, lu: LogicalUnit | undefined, errors: string[] = []): RequestScope {
  return { nexus, lu, access: lu ? 'rw' : 'ro', visibleLuns: lu ? [0] : [], maxTransfer: 1 << 20, log: { error: (m) => errors.push(m) } };
}

async function runOne(fe: TestFrontEnd, s: RequestScope, c: Buffer, offer: DataOffer): Promise<ScsiRequest<TestBuffer>> {
  const r = new ScsiRequest(fe, s, c, offer);
  await r.run();
  return r;
}

function senseOf(a: Answer): Pick<SenseCode, 'key' | 'asc' | 'ascq'> | undefined {
  const d = a.sense ? decodeSense(a.sense) : undefined;
  return d ? { key: d.key, asc: d.asc, ascq: d.ascq } : undefined;
}

const code = (c: SenseCode): Pick<SenseCode, 'key' | 'asc' | 'ascq'> => ({ key: c.key, asc: c.asc, ascq: c.ascq });

test('a READ pushes the blocks as data-in and completes GOOD once, without residuals', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const blocks = pattern(4 * 512, 3);
  blocks.copy(backend.bytes, 8 * 512);
  const fe = new TestFrontEnd(Buffer.alloc(4 * 512));
  await runOne(fe, scope(n, lu), cdb.read10(8, 4), { direction: 'in', length: 4 * 512 });
  t.deepEqual(fe.calls, ['allocate 2048', 'push 0+2048', 'complete']);
  t.true(fe.initiator.equals(blocks), 'the initiator holds the blocks read');
  t.is(fe.answers.length, 1);
  t.is(fe.answers[0].status, ScsiStatus.GOOD);
  t.is(fe.answers[0].sense, undefined);
  t.deepEqual(fe.answers[0].residuals, { dataOut: 0, dataIn: 0 });
  t.is(fe.buffers[0].released, 1, 'the data buffer goes back once');
});

test('a WRITE fetches its data-out into the buffer before it reaches the medium', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const data = pattern(2 * 512, 9);
  const fe = new TestFrontEnd(Buffer.from(data));
  await runOne(fe, scope(n, lu), cdb.write10(100, 2), { direction: 'out', length: 2 * 512 });
  t.deepEqual(fe.calls, ['allocate 1024', 'fetch 0+1024', 'complete']);
  t.true(backend.bytes.subarray(100 * 512, 102 * 512).equals(data), 'the medium holds the data-out');
  t.deepEqual(fe.answers, [{ status: ScsiStatus.GOOD, sense: undefined, residuals: { dataOut: 0, dataIn: 0 } }]);
  t.is(fe.buffers[0].released, 1);
});

test('a command aborted while it waits for a buffer never fetches its data-out and answers TASK ABORTED once', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const fe = new TestFrontEnd(pattern(512, 5));
  const r = new ScsiRequest(fe, scope(n, lu), cdb.write10(7, 1), { direction: 'out', length: 512 });
  fe.onAllocate = () => r.abort();
  await r.run();
  t.true(r.aborted);
  t.deepEqual(fe.calls, ['allocate 512', 'complete'], 'no fetch');
  t.deepEqual(fe.answers, [{ status: ScsiStatus.TASK_ABORTED, sense: undefined, residuals: { dataOut: 0, dataIn: 0 } }]);
  t.true(backend.bytes.subarray(7 * 512, 8 * 512).equals(Buffer.alloc(512)), 'the medium is untouched');
  t.is(fe.buffers[0].released, 1);
});

test('a command aborted before it starts asks for no buffer', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const fe = new TestFrontEnd(Buffer.alloc(512));
  const r = new ScsiRequest(fe, scope(n, lu), cdb.read10(0, 1), { direction: 'in', length: 512 });
  r.abort();
  await r.run();
  t.deepEqual(fe.calls, ['complete']);
  t.is(fe.answers[0].status, ScsiStatus.TASK_ABORTED);
});

test('data-in residuals: an underflow when the offer is larger, an overflow when it is smaller', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  pattern(2 * 512, 4).copy(backend.bytes, 0);
  const under = new TestFrontEnd(Buffer.alloc(2048));
  await runOne(under, scope(n, lu), cdb.read10(0, 1), { direction: 'in', length: 2048 });
  t.deepEqual(under.calls, ['allocate 512', 'push 0+512', 'complete']);
  t.deepEqual(under.answers[0].residuals, { dataOut: 0, dataIn: 1536 });
  t.true(under.initiator.subarray(0, 512).equals(backend.bytes.subarray(0, 512)));
  t.true(under.initiator.subarray(512).equals(Buffer.alloc(1536)), 'nothing beyond the data is written');

  const over = new TestFrontEnd(Buffer.alloc(512));
  await runOne(over, scope(n, lu), cdb.read10(0, 2), { direction: 'in', length: 512 });
  t.deepEqual(over.calls, ['allocate 1024', 'push 0+512', 'complete'], 'only the bytes offered are pushed');
  t.is(over.answers[0].status, ScsiStatus.GOOD);
  t.deepEqual(over.answers[0].residuals, { dataOut: 0, dataIn: -512 });
  t.true(over.initiator.equals(backend.bytes.subarray(0, 512)));
});

test('data-out residuals: a longer offer is an underflow of what was not fetched; a shorter one writes the whole blocks it covers, the rest an overflow', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const longer = new TestFrontEnd(pattern(1024, 6));
  await runOne(longer, scope(n, lu), cdb.write10(3, 1), { direction: 'out', length: 1024 });
  t.deepEqual(longer.calls, ['allocate 512', 'fetch 0+512', 'complete'], 'only the CDB transfer is fetched');
  t.is(longer.answers[0].status, ScsiStatus.GOOD);
  t.deepEqual(longer.answers[0].residuals, { dataOut: 512, dataIn: 0 });
  t.true(backend.bytes.subarray(3 * 512, 4 * 512).equals(longer.initiator.subarray(0, 512)));

  // SAM-5 5.5: the smaller of the two moves. Two blocks asked, one offered: the first is written.
  const shorter = new TestFrontEnd(pattern(512, 7));
  await runOne(shorter, scope(n, lu), cdb.write10(20, 2), { direction: 'out', length: 512 });
  t.deepEqual(shorter.calls, ['allocate 512', 'fetch 0+512', 'complete']);
  t.is(shorter.answers[0].status, ScsiStatus.GOOD);
  t.deepEqual(shorter.answers[0].residuals, { dataOut: -512, dataIn: 0 }, 'an overflow of the bytes the offer lacks (RFC 7143 11.4.5)');
  t.true(backend.bytes.subarray(20 * 512, 21 * 512).equals(shorter.initiator), 'the offered block is written');
  t.true(backend.bytes.subarray(21 * 512, 22 * 512).equals(Buffer.alloc(512)), 'the second is not');

  // No offer at all (iSCSI EDTL 0): a write of nothing, the whole block overflowing.
  const none = new TestFrontEnd(Buffer.alloc(0));
  await runOne(none, scope(n, lu), cdb.write10(30, 1), { direction: 'none', length: 0 });
  t.deepEqual(none.calls, ['allocate 0', 'complete'], 'nothing fetched');
  t.is(none.answers[0].status, ScsiStatus.GOOD);
  t.deepEqual(none.answers[0].residuals, { dataOut: -512, dataIn: 0 });
  t.true(backend.bytes.subarray(30 * 512, 31 * 512).equals(Buffer.alloc(512)));

  // Part of a block cannot be written: refused with 0E/03, nothing written, the same overflow.
  const partial = new TestFrontEnd(pattern(200, 8));
  await runOne(partial, scope(n, lu), cdb.writeAndVerify16(40, 1), { direction: 'out', length: 200 });
  t.deepEqual(partial.calls, ['complete']);
  t.deepEqual(senseOf(partial.answers[0]), code(INVALID_FIELD_IN_COMMAND_INFORMATION_UNIT));
  t.deepEqual(partial.answers[0].residuals, { dataOut: -312, dataIn: 0 });
  t.true(backend.bytes.subarray(40 * 512, 41 * 512).equals(Buffer.alloc(512)));
});

test('WRITE SAME and COMPARE AND WRITE take exactly the data-out their CDB sizes; anything else is 05 24/00, nothing written', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const ws = new TestFrontEnd(pattern(1024, 8));
  await runOne(ws, scope(n, lu), cdb.writeSame10(0, 1), { direction: 'out', length: 1024 });
  t.deepEqual(ws.calls, ['complete']);
  t.deepEqual(senseOf(ws.answers[0]), code(INVALID_FIELD_IN_CDB));
  t.deepEqual(ws.answers[0].residuals, { dataOut: 512, dataIn: 0 });
  t.true(backend.bytes.subarray(0, 512).equals(Buffer.alloc(512)), 'nothing was written');
  // NLB 0 (a count of 256 that wrapped in its one byte) with data offered: not a silent no-op.
  const caw = new TestFrontEnd(pattern(4096, 9));
  await runOne(caw, scope(n, lu), cdb.compareAndWrite(0, 0), { direction: 'out', length: 4096 });
  t.deepEqual(senseOf(caw.answers[0]), code(INVALID_FIELD_IN_CDB));
  t.deepEqual(caw.answers[0].residuals, { dataOut: 4096, dataIn: 0 });
  const exact = new TestFrontEnd(pattern(512, 10));
  await runOne(exact, scope(n, lu), cdb.writeSame10(0, 2), { direction: 'out', length: 512 });
  t.is(exact.answers[0].status, ScsiStatus.GOOD);
  // A refused write still answers its refusal, whatever was offered.
  const ro = new TestFrontEnd(pattern(1024, 11));
  await runOne(ro, { ...scope(n, lu), access: 'ro' }, cdb.writeSame10(0, 1), { direction: 'out', length: 1024 });
  t.deepEqual(senseOf(ro.answers[0]), code(WRITE_PROTECTED));
});

test('a direction that disagrees with the CDB, or a transfer above max_io, is 05 24/00 with the offer as residual', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const wrong = new TestFrontEnd(Buffer.alloc(512));
  await runOne(wrong, scope(n, lu), cdb.read10(0, 1), { direction: 'out', length: 512 });
  t.deepEqual(wrong.calls, ['complete']);
  t.deepEqual(senseOf(wrong.answers[0]), code(INVALID_FIELD_IN_CDB));
  t.deepEqual(wrong.answers[0].residuals, { dataOut: 512, dataIn: 0 });

  const big = new TestFrontEnd(Buffer.alloc(4096));
  await runOne(big, { ...scope(n, lu), maxTransfer: 2048 }, cdb.read10(0, 8), { direction: 'in', length: 4096 });
  t.deepEqual(big.calls, ['complete']);
  t.deepEqual(senseOf(big.answers[0]), code(INVALID_FIELD_IN_CDB));
  t.deepEqual(big.answers[0].residuals, { dataOut: 0, dataIn: 4096 });
});

test('a LUN the nexus cannot see answers 05 25/00 with the residual in the command direction only; INQUIRY still answers', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const read = new TestFrontEnd(Buffer.alloc(512));
  await runOne(read, scope(n, undefined), cdb.read10(0, 1), { direction: 'in', length: 512 });
  t.deepEqual(read.calls, ['complete']);
  t.deepEqual(senseOf(read.answers[0]), code(LOGICAL_UNIT_NOT_SUPPORTED));
  t.deepEqual(read.answers[0].residuals, { dataOut: 0, dataIn: 512 });

  const inquiry = new TestFrontEnd(Buffer.alloc(96));
  await runOne(inquiry, scope(n, undefined), cdb.inquiry(96), { direction: 'in', length: 96 });
  t.is(inquiry.answers[0].status, ScsiStatus.GOOD);
  // SPC-5 6.7.2: peripheral qualifier 3, device type 1Fh: no logical unit here.
  t.is(inquiry.initiator[0], 0x7f);
});

test('a backend error reaches the front end as sense, once', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  backend.failNext('read', 'EIO');
  const fe = new TestFrontEnd(Buffer.alloc(512));
  await runOne(fe, scope(n, lu), cdb.read10(0, 1), { direction: 'in', length: 512 });
  t.deepEqual(fe.calls, ['allocate 512', 'complete'], 'no data-in for a failed read');
  t.is(fe.answers[0].status, ScsiStatus.CHECK_CONDITION);
  t.deepEqual(senseOf(fe.answers[0]), code(UNRECOVERED_READ_ERROR));
  t.deepEqual(fe.answers[0].residuals, { dataOut: 0, dataIn: 512 });
});

test('a step that throws answers HARDWARE ERROR 04 44/00 once and is logged', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const errors: string[] = [];
  const fe = new TestFrontEnd(Buffer.alloc(512));
  fe.onAllocate = () => {
    throw new Error('pool bug');
  };
  await runOne(fe, scope(n, lu, errors), cdb.read10(0, 1), { direction: 'in', length: 512 });
  t.deepEqual(fe.calls, ['allocate 512', 'complete']);
  t.is(fe.answers[0].status, ScsiStatus.CHECK_CONDITION);
  t.deepEqual(senseOf(fe.answers[0]), code(INTERNAL_TARGET_FAILURE));
  t.deepEqual(fe.answers[0].residuals, { dataOut: 0, dataIn: 0 });
  t.is(errors.length, 1);
  t.regex(errors[0], /^command test command failed unexpectedly: Error: pool bug/);
});

test('a response that fails to send is not sent again', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const errors: string[] = [];
  const fe = new TestFrontEnd(Buffer.alloc(512));
  fe.failComplete = true;
  await runOne(fe, scope(n, lu, errors), cdb.read10(0, 1), { direction: 'in', length: 512 });
  t.deepEqual(fe.calls, ['allocate 512', 'push 0+512', 'complete']);
  t.is(fe.answers[0].status, ScsiStatus.GOOD);
  t.is(errors.length, 1);
  t.regex(errors[0], /could not send the response/);
  t.is(fe.buffers[0].released, 1);
});

test('a failed transfer ends the command through transferFailed, with no response', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const out = new TestFrontEnd(pattern(512, 8));
  out.failFetch = true;
  await runOne(out, scope(n, lu), cdb.write10(5, 1), { direction: 'out', length: 512 });
  t.deepEqual(out.calls, ['allocate 512', 'fetch 0+512', 'failed data-out']);
  t.is(out.answers.length, 0);
  t.true(backend.bytes.subarray(5 * 512, 6 * 512).equals(Buffer.alloc(512)), 'nothing was written');
  t.is(out.buffers[0].released, 1);

  const push = new TestFrontEnd(Buffer.alloc(512));
  push.failPush = true;
  await runOne(push, scope(n, lu), cdb.read10(0, 1), { direction: 'in', length: 512 });
  t.deepEqual(push.calls, ['allocate 512', 'push 0+512', 'failed data-in']);
  t.is(push.answers.length, 0);
  t.is((push.failures[0].error as Error).message, 'the link went down');
});

test('a command aborted while it pushes data-in still answers once, TASK ABORTED, with the residuals it had', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const fe = new TestFrontEnd(Buffer.alloc(1024));
  const r = new ScsiRequest(fe, scope(n, lu), cdb.read10(0, 1), { direction: 'in', length: 1024 });
  const push = fe.pushDataIn.bind(fe);
  fe.pushDataIn = async (b, o, l) => {
    r.abort();
    await push(b, o, l);
  };
  await r.run();
  t.deepEqual(fe.calls, ['allocate 512', 'push 0+512', 'complete']);
  t.deepEqual(fe.answers, [{ status: ScsiStatus.TASK_ABORTED, sense: undefined, residuals: { dataOut: 0, dataIn: 512 } }]);
});

test("otherDirection 'moves-nothing': a READ offered data-out runs moving nothing, the offer an underflow; 'refuse' (the default) is 05 24/00", async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  backend.bytes.fill(0x5c, 0, 512);
  const fe = new TestFrontEnd(Buffer.alloc(512, 0xa6));
  await runOne(fe, scope(n, lu), cdb.read10(0, 1), { direction: 'out', length: 512, otherDirection: 'moves-nothing' });
  t.false(fe.calls.some((c) => c.startsWith('fetch') || c.startsWith('push')), `no data moved: ${fe.calls.join(', ')}`);
  t.deepEqual(fe.answers, [{ status: ScsiStatus.GOOD, sense: undefined, residuals: { dataOut: 512, dataIn: -512 } }]);
  t.true(backend.bytes.subarray(0, 512).equals(Buffer.alloc(512, 0x5c)), 'the data-out was not written');

  const refused = new TestFrontEnd(Buffer.alloc(512, 0xa6));
  await runOne(refused, scope(n, lu), cdb.read10(0, 1), { direction: 'out', length: 512 });
  t.is(refused.answers[0].status, ScsiStatus.CHECK_CONDITION);
  t.deepEqual(senseOf(refused.answers[0]), code(INVALID_FIELD_IN_CDB));
});

test('a fetchDataOut that rejects with DataOutUnusable answers CHECK CONDITION with its sense, nothing written', async (t) => {
  const { lu, backend } = makeLu();
  const n = await ready(t, lu, 'host-a');
  const fe = new TestFrontEnd(pattern(1024, 4));
  fe.fetchDataOut = async (): Promise<void> => {
    fe.calls.push('fetch');
    await Promise.resolve();
    throw new DataOutUnusable(PROTOCOL_SERVICE_CRC_ERROR, 'Data-Out with DataSN 0, expected 1');
  };
  await runOne(fe, scope(n, lu), cdb.write10(40, 2), { direction: 'out', length: 1024 });
  t.deepEqual(fe.calls, ['allocate 1024', 'fetch', 'complete']);
  t.is(fe.failures.length, 0, 'not a failed transfer: the command answers');
  t.is(fe.answers[0].status, ScsiStatus.CHECK_CONDITION);
  t.deepEqual(senseOf(fe.answers[0]), code(PROTOCOL_SERVICE_CRC_ERROR));
  t.deepEqual(fe.answers[0].residuals, { dataOut: 1024, dataIn: 0 });
  t.true(backend.bytes.subarray(40 * 512, 42 * 512).equals(Buffer.alloc(1024)), 'nothing written');
});

test("a unit attention is not counted as an error in the volume's counters; a command that fails is", async (t) => {
  const { lu } = makeLu();
  // A nexus that has not yet heard of the power-on reset (SAM-5 5.14): its first command gets 06 29/00.
  const n = nexus('host-ua');
  const fe = new TestFrontEnd(Buffer.alloc(512));
  await runOne(fe, scope(n, lu), cdb.testUnitReady(), { direction: 'none', length: 0 });
  t.is(fe.answers[0].status, ScsiStatus.CHECK_CONDITION);
  t.is(senseOf(fe.answers[0])?.key, 0x06, 'the unit attention');
  t.is(lu.stats.byClass().other.ops, 1);
  t.is(lu.stats.byClass().other.errors, 0, 'an event the initiator is told of, not a failure');
  // LBA past the end: 05 21/00, an error.
  const past = new TestFrontEnd(Buffer.alloc(512));
  await runOne(past, scope(n, lu), cdb.read10(lu.blocks + 1, 1), { direction: 'in', length: 512 });
  t.is(senseOf(past.answers[0])?.key, 0x05);
  t.is(lu.stats.byClass().read.errors, 1);
});

test('QoS: a READ over the volume\'s limit waits before it takes a buffer; aborted while it waits, it answers TASK ABORTED at once, taking none', async (t) => {
  const { lu } = makeLu();
  const n = await ready(t, lu, 'host-a');
  // One command a second, no burst: the first runs, the second waits a second for its turn.
  lu.qos.configure({ iops: 1, burstMs: 0, initiators: [] });
  const first = new TestFrontEnd(Buffer.alloc(512));
  await runOne(first, scope(n, lu), cdb.read10(0, 1), { direction: 'in', length: 512 });
  t.is(first.answers[0]!.status, ScsiStatus.GOOD);
  const fe = new TestFrontEnd(Buffer.alloc(512));
  const r = new ScsiRequest(fe, scope(n, lu), cdb.read10(0, 1), { direction: 'in', length: 512 });
  const running = r.run();
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.deepEqual(fe.calls, [], 'still waiting for its turn, with no buffer');
  r.abort();
  await running;
  // Its turn was one interval (1 s) before the iops slot's next free time (qos-bucket.ts layout: slot 2, word 2): still ahead.
  t.true(process.hrtime.bigint() < lu.qos.volume.state[2 * 3 + 2]! - 1_000_000_000n, 'answered before its turn came');
  t.deepEqual(fe.calls, ['complete']);
  t.is(fe.answers[0]!.status, ScsiStatus.TASK_ABORTED);
  t.is(lu.qos.throttledCommands, 1);
  lu.qos.close();
});
