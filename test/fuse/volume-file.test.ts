// VolumeFile without FUSE: how byte ranges become whole-block device calls.
import test from 'ava';
import { FuseError } from '../../native/fuse.js';
import { VolumeFile } from '../../initiator/fuse/volume-file.js';
import { toFuseError } from '../../initiator/fuse/errno.js';
import { MemoryDevice, pattern, randomize } from '../helpers/memory-device.js';

function setup(opts: { blockSize?: number; maxTransfer?: number; readOnly?: boolean; canDiscard?: boolean } = {}) {
  const dev = new MemoryDevice({ size: 1 << 20, ...opts });
  randomize(dev.data);
  return { dev, file: new VolumeFile(dev) };
}

test('a write inside one block reads that block once and writes it once', async (t) => {
  const { dev, file } = setup({ blockSize: 4096 });
  const before = Buffer.from(dev.data);
  t.is(await file.write(5000, Buffer.from('abc'), { sync: false }), 3);
  t.deepEqual(dev.calls, [
    { op: 'read', offset: 4096, length: 4096 },
    { op: 'write', offset: 4096, length: 4096, fua: false },
  ]);
  before.write('abc', 5000);
  t.true(dev.data.equals(before));
});

test('a write spanning blocks reads only its two edge blocks', async (t) => {
  const { dev, file } = setup({ blockSize: 512 });
  const data = pattern(2000, 3);
  const before = Buffer.from(dev.data);
  await file.write(100, data, { sync: true });
  const reads = dev.calls.filter((c) => c.op === 'read').map((c) => c.offset).sort((a, b) => a - b);
  t.deepEqual(reads, [0, 2048]);
  t.deepEqual(dev.calls.filter((c) => c.op === 'write'), [{ op: 'write', offset: 0, length: 2560, fua: true }]);
  data.copy(before, 100);
  t.true(dev.data.equals(before));
});

test('large transfers are split at maxTransfer', async (t) => {
  const { dev, file } = setup({ blockSize: 512, maxTransfer: 4096 + 100 });
  await file.write(0, pattern(10_000, 9), { sync: false });
  const writes = dev.calls.filter((c) => c.op === 'write').map((c) => [c.offset, c.length]);
  t.deepEqual(writes, [
    [0, 4096],
    [4096, 4096],
    [8192, 2048],
  ]);
  dev.calls.length = 0;
  const back = await file.read(1, 9000);
  t.true(back.equals(dev.data.subarray(1, 9001)));
  t.true(dev.calls.every((c) => c.length <= 4096));
});

test('zeroing a range inside one block rewrites just that block', async (t) => {
  const { dev, file } = setup({ blockSize: 4096 });
  const before = Buffer.from(dev.data);
  await file.fallocate({ kind: 'punchHole', offset: 10, length: 20, keepSize: true });
  t.is(dev.count('discard'), 0);
  before.fill(0, 10, 30);
  t.true(dev.data.equals(before));
});

test('errors map to errnos: block codes, read-only, beyond the end', async (t) => {
  const { file: ro } = setup({ readOnly: true });
  await t.throwsAsync(ro.write(0, Buffer.from('x'), { sync: false }), { instanceOf: FuseError, code: 'EROFS' });
  await t.throwsAsync(ro.fallocate({ kind: 'punchHole', offset: 0, length: 512, keepSize: true }), { code: 'EROFS' });
  const { dev, file } = setup();
  await t.throwsAsync(file.write(dev.size, Buffer.from('x'), { sync: false }), { code: 'ENOSPC' });
  await t.throwsAsync(file.fallocate({ kind: 'allocate', offset: dev.size - 512, length: 1024, keepSize: false }), { code: 'ENOSPC' });
  await file.fallocate({ kind: 'allocate', offset: 0, length: 4096, keepSize: false });
  t.is(dev.calls.length, 0, 'plain allocation inside the volume has nothing to do');
  t.is(toFuseError(Object.assign(new Error('x'), { code: 'NO_SPACE' })).code, 'ENOSPC');
  t.is(toFuseError(Object.assign(new Error('x'), { code: 'WRITE_PROTECTED' })).code, 'EROFS');
  t.is(toFuseError(Object.assign(new Error('x'), { code: 'CONNECTION_LOST' })).errno, new FuseError('EIO').errno);
  t.is(toFuseError(new TypeError('bug')).code, 'EIO');
  dev.failReads = { start: 0, end: 512, code: 'MEDIUM_ERROR' };
  await t.throwsAsync(file.read(0, 10), { code: 'EIO' });
  await t.throwsAsync(file.write(3, Buffer.from('x'), { sync: false }), { code: 'EIO' });
});

test('a size that is not a multiple of the block size is refused', (t) => {
  t.throws(() => new VolumeFile(new MemoryDevice({ size: 4096 + 512, blockSize: 4096 })), {
    message: 'device size 4608 is not a multiple of the block size 4096',
  });
});
