// One ublk request served on a BlockDevice (initiator/ublk/io.ts), on the
// in-memory device the NBD and FUSE exporters are tested on: bytes moved both
// ways, FUA and NOUNMAP passed down, and every refusal or device failure
// turned into the -errno a COMMIT carries, with nothing reaching the device
// for a request that is refused.
import test from 'ava';
import { constants } from 'node:os';
import { serveUblkIo, ublkResult } from '../../initiator/ublk/io.js';
import { UblkIoFlag, UblkOp, type UblkIoDesc } from '../../initiator/ublk/uapi.js';
import { MemoryDevice, pattern } from '../helpers/memory-device.js';

const E = constants.errno;
const MiB = 1 << 20;

function desc(op: number, startSector: number, nrSectors: number, flags = 0): UblkIoDesc {
  return { op, flags, nrSectors, startSector: BigInt(startSector), addr: 0n };
}

test('a write puts the tag buffer on the device, with FUA when the request has it; a read fills the buffer', async (t) => {
  const dev = new MemoryDevice({ size: 4 * MiB, blockSize: 4096 });
  const buf = Buffer.alloc(128 * 1024);
  const data = pattern(64 * 1024, 7);
  data.copy(buf);
  t.is(await serveUblkIo(dev, desc(UblkOp.WRITE, 2048, 128, UblkIoFlag.FUA), buf), 64 * 1024, 'the result is the bytes done');
  t.true(dev.data.subarray(MiB, MiB + 64 * 1024).equals(data));
  t.like(dev.calls.at(-1), { op: 'write', offset: MiB, length: 64 * 1024, fua: true });
  await serveUblkIo(dev, desc(UblkOp.WRITE, 0, 8), buf);
  t.like(dev.calls.at(-1), { op: 'write', fua: false });

  const into = Buffer.alloc(128 * 1024, 0xee);
  t.is(await serveUblkIo(dev, desc(UblkOp.READ, 2048, 128), into), 64 * 1024);
  t.true(into.subarray(0, 64 * 1024).equals(data));
  t.true(into.subarray(64 * 1024).equals(Buffer.alloc(64 * 1024, 0xee)), 'nothing past the request is touched');
});

test('flush, discard and write-zeroes complete with 0; NOUNMAP keeps the zeroes allocated', async (t) => {
  const dev = new MemoryDevice({ size: 4 * MiB, blockSize: 512 });
  dev.data.fill(9);
  const buf = Buffer.alloc(4096);
  t.is(await serveUblkIo(dev, desc(UblkOp.FLUSH, 0, 0), buf), 0);
  t.is(dev.count('flush'), 1);
  t.is(await serveUblkIo(dev, desc(UblkOp.DISCARD, 8, 8), buf), 0);
  t.like(dev.calls.at(-1), { op: 'discard', offset: 4096, length: 4096 });
  t.is(await serveUblkIo(dev, desc(UblkOp.WRITE_ZEROES, 16, 16), buf), 0);
  t.like(dev.calls.at(-1), { op: 'writeZeroes', offset: 8192, length: 8192, unmap: true });
  t.is(await serveUblkIo(dev, desc(UblkOp.WRITE_ZEROES, 16, 16, UblkIoFlag.NOUNMAP), buf), 0);
  t.like(dev.calls.at(-1), { op: 'writeZeroes', unmap: false });
  t.true(dev.data.subarray(8192, 16384).equals(Buffer.alloc(8192)));
});

test('refused before the device: misaligned, out of range, bigger than the buffer, read-only, unknown op', async (t) => {
  const dev = new MemoryDevice({ size: 4 * MiB, blockSize: 4096 });
  const buf = Buffer.alloc(64 * 1024);
  t.is(await serveUblkIo(dev, desc(UblkOp.READ, 1, 8), buf), -E.EINVAL, 'a start off the 4 KiB block');
  t.is(await serveUblkIo(dev, desc(UblkOp.READ, 0, 7), buf), -E.EINVAL, 'a length off the 4 KiB block');
  t.is(await serveUblkIo(dev, desc(UblkOp.READ, (4 * MiB) / 512, 8), buf), -E.EIO, 'past the end');
  t.is(await serveUblkIo(dev, desc(UblkOp.WRITE, (4 * MiB) / 512 - 8, 16), buf), -E.EIO, 'across the end');
  t.is(await serveUblkIo(dev, desc(UblkOp.READ, 0, 0), buf), -E.EIO, 'nothing to read');
  t.is(await serveUblkIo(dev, desc(UblkOp.READ, 0, 256), buf), -E.EINVAL, '128 KiB into a 64 KiB buffer');
  t.is(await serveUblkIo(dev, desc(UblkOp.WRITE_SAME, 0, 8), buf), -E.EOPNOTSUPP);
  t.is(await serveUblkIo(dev, desc(0x7f, 0, 8), buf), -E.EOPNOTSUPP);
  t.is(await serveUblkIo(dev, { ...desc(UblkOp.READ, 0, 8), startSector: 2n ** 60n }, buf), -E.EINVAL, 'a sector beyond what a number holds');
  const ro = new MemoryDevice({ size: MiB, blockSize: 512, readOnly: true, canDiscard: false });
  t.is(await serveUblkIo(ro, desc(UblkOp.WRITE, 0, 8), buf), -E.EIO);
  t.is(await serveUblkIo(ro, desc(UblkOp.WRITE_ZEROES, 0, 8), buf), -E.EIO);
  const thick = new MemoryDevice({ size: MiB, blockSize: 512, canDiscard: false });
  t.is(await serveUblkIo(thick, desc(UblkOp.DISCARD, 0, 8), buf), -E.EOPNOTSUPP);
  t.is(dev.calls.length + ro.calls.length + thick.calls.length, 0, 'no refused request reached a device');
});

test("the device's failures become the errno the block layer reads: medium, space, transport, anything else EIO", async (t) => {
  const dev = new MemoryDevice({ size: MiB, blockSize: 512 });
  const buf = Buffer.alloc(4096);
  dev.failWith('read', 'MEDIUM_ERROR');
  t.is(await serveUblkIo(dev, desc(UblkOp.READ, 0, 8), buf), -E.ENODATA);
  dev.failWith('write', 'NO_SPACE');
  t.is(await serveUblkIo(dev, desc(UblkOp.WRITE, 0, 8), buf), -E.ENOSPC);
  dev.failWith('flush', 'CONNECTION_LOST');
  t.is(await serveUblkIo(dev, desc(UblkOp.FLUSH, 0, 0), buf), -E.ENOLINK, 'a lost session is a transport error, which multipath may retry elsewhere');
  dev.failWithPlainError('discard', 'something else');
  t.is(await serveUblkIo(dev, desc(UblkOp.DISCARD, 0, 8), buf), -E.EIO);
  t.is(ublkResult(Object.assign(new Error('x'), { code: 'NOT_SUPPORTED' })), -E.EOPNOTSUPP);
  t.is(ublkResult('not an error'), -E.EIO);
});
