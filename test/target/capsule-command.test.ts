// CapsuleCommand, the rblk CMD capsule as a front end of the request core:
// which bytes it copies from immediate data, which remote regions it asks the
// transport to RDMA-read or write for a piece of the transfer, and what it
// reports to its session.
import test from 'ava';
import { DataDirection, DataFormat, type CommandData, type DataDescriptor } from '../../protocol/wire/index.js';
import type { Residuals } from '../../target/scsi/index.js';
import { CapsuleCommand, offerOf, type CommandHost } from '../../target/rblk/command.js';
import type { DataBuffer, TargetConnection } from '../../target/transport/transport.js';

interface Rma {
  op: 'read' | 'write';
  offset: number;
  remote: readonly DataDescriptor[];
  remoteData?: number;
}

function host(remoteData = false, failWrites = false): { host: CommandHost<DataBuffer>; rma: Rma[]; answers: unknown[]; failures: string[] } {
  const rma: Rma[] = [];
  const answers: unknown[] = [];
  const failures: string[] = [];
  const conn: Pick<TargetConnection, 'allocate' | 'read' | 'write'> = {
    allocate: async (length) => ({ buffer: Buffer.alloc(length), release: () => undefined }),
    read: async (_into, offset, remote) => void rma.push({ op: 'read', offset, remote }),
    write: async (_from, offset, remote, opts) => {
      if (failWrites) throw new Error('RDMA WRITE failed (test)');
      rma.push(opts?.remoteData === undefined ? { op: 'write', offset, remote } : { op: 'write', offset, remote, remoteData: opts.remoteData });
    },
  };
  return {
    host: {
      conn,
      respond: async (tag: bigint, status: number, sense: Buffer | undefined, residuals: Residuals) => void answers.push({ tag, status, sense, residuals }),
      fail: (why) => void failures.push(why),
      remoteData,
      answeredByWrite: (tag) => {
        answers.push({ tag, byWrite: true });
        return true;
      },
    },
    rma,
    answers,
    failures,
  };
}

const list: CommandData = {
  format: DataFormat.LIST,
  descriptors: [
    { address: 0x1000n, key: 1n, length: 512 },
    { address: 0x8000n, key: 2n, length: 512 },
  ],
};

test('the offer is the capsule direction and data length', (t) => {
  t.deepEqual(offerOf(DataDirection.WRITE, list), { direction: 'out', length: 1024 });
  t.deepEqual(offerOf(DataDirection.READ, list), { direction: 'in', length: 1024 });
  t.deepEqual(offerOf(DataDirection.NONE, { format: DataFormat.NONE }), { direction: 'none', length: 0 });
});

test('data-out and data-in move the byte range asked for, from the matching descriptors', async (t) => {
  const h = host();
  const c = new CapsuleCommand(h.host, 5n, list);
  const b = await c.allocate(1024);
  await c.fetchDataOut(b, 0, 700);
  await c.pushDataIn(b, 600, 300);
  t.deepEqual(h.rma, [
    {
      op: 'read',
      offset: 0,
      remote: [
        { address: 0x1000n, key: 1n, length: 512 },
        { address: 0x8000n, key: 2n, length: 188 },
      ],
    },
    { op: 'write', offset: 600, remote: [{ address: 0x8000n + 88n, key: 2n, length: 300 }] },
  ]);
});

test('immediate data is copied into the buffer at the offset asked for, without RMA', async (t) => {
  const h = host();
  const immediate = Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]);
  const c = new CapsuleCommand(h.host, 6n, { format: DataFormat.IMMEDIATE, data: immediate });
  const b = await c.allocate(8);
  await c.fetchDataOut(b, 0, 3);
  await c.fetchDataOut(b, 5, 2);
  t.deepEqual([...b.buffer], [1, 2, 3, 0, 0, 6, 7, 0]);
  t.deepEqual(h.rma, []);
});

test('complete answers with the tag; a failed transfer ends the session with the RMA named', async (t) => {
  const h = host();
  const c = new CapsuleCommand(h.host, 9n, list);
  t.is(c.label, 'tag 9');
  await c.complete(0, undefined, { dataOut: 0, dataIn: 12 });
  t.deepEqual(h.answers, [{ tag: 9n, status: 0, sense: undefined, residuals: { dataOut: 0, dataIn: 12 } }]);
  c.transferFailed('data-out', new Error('FI_EIO'));
  c.transferFailed('data-in', new Error('FI_ECONNRESET'));
  t.deepEqual(h.failures, ['RDMA READ for tag 9 failed: FI_EIO', 'RDMA WRITE for tag 9 failed: FI_ECONNRESET']);
});

const GOOD = 0x00;
const CHECK_CONDITION = 0x02;
const NONE = { dataOut: 0, dataIn: 0 };
const direct: CommandData = { format: DataFormat.DIRECT, descriptor: { address: 0x2000n, key: 3n, length: 4096 } };

test('version 2: a GOOD read without residual is answered by its write, carrying the low 32 bits of the tag', async (t) => {
  const h = host(true);
  const tag = (7n << 32n) | 0x1234n;
  const c = new CapsuleCommand(h.host, tag, direct);
  const b = await c.allocate(4096);
  await c.pushDataIn(b, 0, 4096);
  t.deepEqual(h.rma, [], 'the write waits for the status');
  await c.complete(GOOD, undefined, NONE);
  t.deepEqual(h.rma, [{ op: 'write', offset: 0, remote: [direct.descriptor], remoteData: 0x1234 }]);
  t.deepEqual(h.answers, [{ tag, byWrite: true }], 'no RSP');
});

test('version 2: a failed or short read still sends its data, then an RSP', async (t) => {
  for (const [status, sense, residuals] of [
    [CHECK_CONDITION, Buffer.from([0x70, 0, 3]), NONE],
    [GOOD, undefined, { dataOut: 0, dataIn: 512 }],
  ] as const) {
    const h = host(true);
    const c = new CapsuleCommand(h.host, 9n, direct);
    const b = await c.allocate(4096);
    await c.pushDataIn(b, 0, 3584);
    await c.complete(status, sense, residuals);
    t.deepEqual(h.rma, [{ op: 'write', offset: 0, remote: [{ address: 0x2000n, key: 3n, length: 3584 }] }]);
    t.deepEqual(h.answers, [{ tag: 9n, status, sense, residuals }]);
  }
});

test('version 2: a held write that fails ends the session, with no answer', async (t) => {
  const h = host(true, true);
  const c = new CapsuleCommand(h.host, 11n, direct);
  const b = await c.allocate(4096);
  await c.pushDataIn(b, 0, 4096);
  await c.complete(GOOD, undefined, NONE);
  t.is(h.failures.length, 1);
  t.regex(h.failures[0], /RDMA WRITE for tag 11 failed/);
});

test('version 1: the write goes at once and the answer is an RSP', async (t) => {
  const h = host(false);
  const c = new CapsuleCommand(h.host, 12n, direct);
  const b = await c.allocate(4096);
  await c.pushDataIn(b, 0, 4096);
  t.is(h.rma.length, 1);
  await c.complete(GOOD, undefined, NONE);
  t.deepEqual(h.answers, [{ tag: 12n, status: GOOD, sense: undefined, residuals: NONE }]);
});
