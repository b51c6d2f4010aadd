// CapsuleCommand, the rblk CMD capsule as a front end of the request core:
// which bytes it copies from immediate data, which remote regions it asks the
// transport to RDMA-read or write for a piece of the transfer, and what it
// reports to its session.
import test from 'ava';
import { DataDirection, DataFormat, type CommandData, type DataDescriptor } from '../../protocol/wire/index.js';
import type { Residuals } from '../../target/scsi/index.js';
import { CapsuleCommand, offerOf, type CommandHost } from '../../target/session/command.js';
import type { DataBuffer, TargetConnection } from '../../target/transport/transport.js';

interface Rma {
  op: 'read' | 'write';
  offset: number;
  remote: readonly DataDescriptor[];
}

function host(): { host: CommandHost<DataBuffer>; rma: Rma[]; answers: unknown[]; failures: string[] } {
  const rma: Rma[] = [];
  const answers: unknown[] = [];
  const failures: string[] = [];
  const conn: Pick<TargetConnection, 'allocate' | 'read' | 'write'> = {
    allocate: async (length) => ({ buffer: Buffer.alloc(length), release: () => undefined }),
    read: async (_into, offset, remote) => void rma.push({ op: 'read', offset, remote }),
    write: async (_from, offset, remote) => void rma.push({ op: 'write', offset, remote }),
  };
  return {
    host: {
      conn,
      respond: async (tag: bigint, status: number, sense: Buffer | undefined, residuals: Residuals) => void answers.push({ tag, status, sense, residuals }),
      fail: (why) => void failures.push(why),
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
