// Transmission-phase commands against the memory device, checked with the raw
// test client: data, flags reaching the device, and exact error values.
import test, { type ExecutionContext } from 'ava';
import type { BlockErrorCode } from '../../initiator/block-device.js';
import { serve } from './helpers/harness.js';
import { MemoryDevice } from '../helpers/memory-device.js';
import { CMD, CMD_FLAG, E, RawClient } from './helpers/raw-client.js';

const MiB = 1024 * 1024;

function fill(length: number, seed: number): Buffer {
  const buf = Buffer.alloc(length);
  for (let i = 0; i < length; i++) buf[i] = (i * 31 + seed * 7 + (i >> 9)) & 0xff;
  return buf;
}

async function setup(
  t: ExecutionContext,
  device: MemoryDevice,
  structured = false,
): Promise<{ client: RawClient; logs: Array<{ level: string; msg: string }> }> {
  const { address, logs } = await serve(t, new Map([['disk', device]]));
  const client = await RawClient.open(address, 'disk', { structured });
  t.teardown(() => client.destroy());
  return { client, logs };
}

for (const structured of [false, true]) {
  const mode = structured ? 'structured' : 'simple';

  test(`${mode}: written data reads back, at the right offset`, async (t) => {
    const device = new MemoryDevice({ size: 4 * MiB });
    const { client } = await setup(t, device, structured);
    const data = fill(128 * 1024, 1);
    t.is((await client.write(MiB + 4096, data)).error, 0);
    t.true(device.contents().subarray(MiB + 4096, MiB + 4096 + data.length).equals(data));
    const reply = await client.read(MiB, 256 * 1024);
    t.is(reply.error, 0);
    t.is(reply.structured, structured);
    const expected = Buffer.concat([Buffer.alloc(4096), data, Buffer.alloc(256 * 1024 - 4096 - data.length)]);
    t.true(reply.data.equals(expected));
    if (structured) {
      // One OFFSET_DATA chunk, flagged DONE, at the requested offset.
      t.deepEqual(reply.chunkTypes, [1]);
      t.is(reply.dataOffset, BigInt(MiB));
    }
  });

  test(`${mode}: reads beyond the end are EINVAL, writes beyond it ENOSPC`, async (t) => {
    const device = new MemoryDevice({ size: MiB });
    const { client } = await setup(t, device, structured);
    const read = await client.read(MiB - 512, 1024);
    t.is(read.error, E.EINVAL);
    t.is(read.data.length, 0);
    t.is((await client.read(2 ** 62, 512)).error, E.EINVAL);
    t.is((await client.write(MiB, Buffer.alloc(512))).error, E.ENOSPC);
    t.is((await client.request({ type: CMD.WRITE_ZEROES, offset: MiB - 512, length: 1024 })).error, E.ENOSPC);
    t.is((await client.request({ type: CMD.TRIM, offset: MiB - 512, length: 1024 })).error, E.EINVAL);
    t.is((await client.request({ type: CMD.CACHE, offset: MiB, length: 512 })).error, E.EINVAL);
    if (structured) {
      t.is(read.message, 'NBD_CMD_READ at 1048064+1024 goes beyond the 1048576-byte export');
    }
    t.is(device.calls.length, 0, 'nothing out of range reaches the device');
    t.is((await client.read(MiB - 512, 512)).error, 0, 'the last block is in range');
  });
}

test('a zero-length structured read is answered with a NONE chunk', async (t) => {
  const { client } = await setup(t, new MemoryDevice({ size: MiB }), true);
  const reply = await client.read(0, 0);
  t.is(reply.error, 0);
  t.deepEqual(reply.chunkTypes, [0]);
});

test('FUA reaches the device on writes; FLUSH calls flush; TRIM and WRITE_ZEROES with FUA flush after', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { client } = await setup(t, device);
  await client.write(0, fill(4096, 2), CMD_FLAG.FUA);
  await client.write(4096, fill(4096, 3));
  t.is((await client.request({ type: CMD.FLUSH })).error, 0);
  await client.request({ type: CMD.TRIM, offset: 0, length: 4096, flags: CMD_FLAG.FUA });
  await client.request({ type: CMD.WRITE_ZEROES, offset: 8192, length: 4096, flags: CMD_FLAG.FUA });
  t.deepEqual(
    device.calls.map((c) => [c.op, c.offset, c.length, c.fua]),
    [
      ['write', 0, 4096, true],
      ['write', 4096, 4096, false],
      ['flush', 0, 0, undefined],
      ['discard', 0, 4096, undefined],
      ['flush', 0, 0, undefined],
      ['writeZeroes', 8192, 4096, undefined],
      ['flush', 0, 0, undefined],
    ],
  );
});

test('TRIM deallocates, and is split into maxTransfer steps', async (t) => {
  const device = new MemoryDevice({ size: 4 * MiB, maxTransfer: MiB });
  device.load(0, fill(4 * MiB, 4));
  const { client } = await setup(t, device);
  t.is((await client.request({ type: CMD.TRIM, offset: 512 * 1024, length: 3 * MiB })).error, 0);
  t.deepEqual(
    device.calls.map((c) => [c.op, c.offset, c.length]),
    [
      ['discard', 512 * 1024, MiB],
      ['discard', 512 * 1024 + MiB, MiB],
      ['discard', 512 * 1024 + 2 * MiB, MiB],
    ],
  );
  const image = device.contents();
  t.true(image.subarray(512 * 1024, 512 * 1024 + 3 * MiB).equals(Buffer.alloc(3 * MiB)));
  t.true(image.subarray(0, 512 * 1024).equals(fill(4 * MiB, 4).subarray(0, 512 * 1024)));
});

test('WRITE_ZEROES unmaps unless NO_HOLE; FAST_ZERO fails at once with ENOTSUP', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  device.load(0, fill(MiB, 5));
  const { client } = await setup(t, device, true);
  t.is((await client.request({ type: CMD.WRITE_ZEROES, offset: 0, length: 65536 })).error, 0);
  t.is(
    (await client.request({ type: CMD.WRITE_ZEROES, offset: 65536, length: 4096, flags: CMD_FLAG.NO_HOLE })).error,
    0,
  );
  t.deepEqual(
    device.calls.map((c) => [c.op, c.unmap]),
    [
      ['writeZeroes', true],
      ['writeZeroes', false],
    ],
  );
  const fast = await client.request({
    type: CMD.WRITE_ZEROES,
    offset: 131072,
    length: 4096,
    flags: CMD_FLAG.FAST_ZERO,
  });
  t.is(fast.error, E.ENOTSUP);
  t.is(device.calls.length, 2, 'a refused fast zero never reaches the device');
  const image = device.contents();
  t.true(image.subarray(0, 65536 + 4096).equals(Buffer.alloc(65536 + 4096)));
  t.true(image.subarray(131072).equals(fill(MiB, 5).subarray(131072)), 'FAST_ZERO left the data alone');
});

test('CACHE succeeds without touching the device', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { client } = await setup(t, device);
  t.is((await client.request({ type: CMD.CACHE, offset: 0, length: 65536 })).error, 0);
  t.is(device.calls.length, 0);
});

test('a read-only export refuses WRITE, TRIM and WRITE_ZEROES with EPERM and still reads', async (t) => {
  const device = new MemoryDevice({ size: MiB, readOnly: true });
  device.load(0, fill(4096, 6));
  const { client } = await setup(t, device, true);
  const write = await client.write(0, Buffer.alloc(4096, 1));
  t.is(write.error, E.EPERM);
  t.is(write.message, 'NBD_CMD_WRITE on a read-only export');
  t.is((await client.request({ type: CMD.TRIM, offset: 0, length: 4096 })).error, E.EPERM);
  t.is((await client.request({ type: CMD.WRITE_ZEROES, offset: 0, length: 4096 })).error, E.EPERM);
  const read = await client.read(0, 4096);
  t.is(read.error, 0);
  t.true(read.data.equals(fill(4096, 6)));
  t.deepEqual(
    device.calls.map((c) => c.op),
    ['read'],
  );
});

test('unaligned requests are EINVAL, and a refused write payload is skipped in step', async (t) => {
  const device = new MemoryDevice({ size: MiB, blockSize: 4096 });
  const { client } = await setup(t, device);
  t.is((await client.read(512, 4096)).error, E.EINVAL);
  t.is((await client.read(0, 1000)).error, E.EINVAL);
  t.is((await client.write(4096, Buffer.alloc(1000, 9))).error, E.EINVAL);
  const data = fill(4096, 7);
  t.is((await client.write(8192, data)).error, 0);
  t.true((await client.read(8192, 4096)).data.equals(data));
});

test('payloads over the maximum: writes EINVAL (payload skipped), reads EINVAL simple, EOVERFLOW structured', async (t) => {
  const device = new MemoryDevice({ size: 4 * MiB, maxTransfer: 65536 });
  const { address } = await serve(t, new Map([['disk', device]]));
  const simple = await RawClient.open(address, 'disk');
  t.teardown(() => simple.destroy());
  t.is((await simple.write(0, Buffer.alloc(131072, 1))).error, E.EINVAL);
  t.is((await simple.read(0, 131072)).error, E.EINVAL);
  t.is((await simple.read(0, 65536)).error, 0, 'the stream is still in step');
  const structured = await RawClient.open(address, 'disk', { structured: true });
  t.teardown(() => structured.destroy());
  const big = await structured.read(0, 131072);
  t.is(big.error, E.EOVERFLOW);
  t.is(big.message, 'NBD_CMD_READ of 131072 bytes exceeds the 65536-byte maximum payload');
  // TRIM and WRITE_ZEROES carry no payload, so they may be longer.
  t.is((await structured.request({ type: CMD.WRITE_ZEROES, offset: 0, length: 4 * MiB })).error, 0);
  t.is(device.calls.filter((c) => c.op === 'writeZeroes').length, 64);
  t.false(device.calls.some((c) => c.op === 'write'), 'no oversized write reached the device');
});

test('unknown commands, bad flags, BLOCK_STATUS and a non-empty FLUSH are EINVAL; the connection carries on', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { client } = await setup(t, device, true);
  const unknown = await client.request({ type: 42, offset: 0, length: 512 });
  t.is(unknown.error, E.EINVAL);
  t.is(unknown.message, 'unknown command 42');
  t.is((await client.request({ type: CMD.BLOCK_STATUS, offset: 0, length: 512 })).error, E.EINVAL);
  t.is((await client.read(0, 512, CMD_FLAG.NO_HOLE)).error, E.EINVAL);
  t.is((await client.read(0, 512, 0x100)).error, E.EINVAL);
  t.is((await client.request({ type: CMD.FLUSH, length: 512 })).error, E.EINVAL);
  // FUA is accepted on any command once advertised, and DF on reads.
  t.is((await client.read(0, 512, CMD_FLAG.FUA | CMD_FLAG.DF)).error, 0);
});

const MAPPING: Array<[BlockErrorCode, number, number]> = [
  // code, errno for a read, errno for a write
  ['LBA_OUT_OF_RANGE', E.EINVAL, E.ENOSPC],
  ['WRITE_PROTECTED', E.EPERM, E.EPERM],
  ['NO_SPACE', E.ENOSPC, E.ENOSPC],
  ['NOT_SUPPORTED', E.ENOTSUP, E.ENOTSUP],
  ['MEDIUM_ERROR', E.EIO, E.EIO],
  ['IO_ERROR', E.EIO, E.EIO],
  ['CONNECTION_LOST', E.EIO, E.EIO],
  ['INVALID', E.EINVAL, E.EINVAL],
];

for (const structured of [false, true]) {
  test(`device errors map to NBD errno values (${structured ? 'structured' : 'simple'})`, async (t) => {
    const device = new MemoryDevice({ size: MiB });
    const { client } = await setup(t, device, structured);
    for (const [code, readErrno, writeErrno] of MAPPING) {
      device.clearFailures();
      device.failWith('read', code, `device says ${code}`);
      device.failWith('write', code);
      device.failWith('flush', code);
      const read = await client.read(0, 512);
      t.is(read.error, readErrno, `read ${code}`);
      t.is(read.data.length, 0);
      if (structured) t.is(read.message, `NBD_CMD_READ at 0+512: device says ${code}`);
      t.is((await client.write(0, Buffer.alloc(512))).error, writeErrno, `write ${code}`);
      t.is((await client.request({ type: CMD.FLUSH })).error, readErrno, `flush ${code}`);
    }
    device.clearFailures();
    t.is((await client.read(0, 512)).error, 0);
  });
}

test('an error without a BlockErrorCode is EIO and logged as an error', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { client, logs } = await setup(t, device);
  device.failWithPlainError('read', 'something broke');
  t.is((await client.read(0, 512)).error, E.EIO);
  t.true(logs.some((l) => l.level === 'error' && l.msg.endsWith('NBD_CMD_READ at 0+512: something broke')));
});
