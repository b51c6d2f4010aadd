import test from 'ava';
import { MemoryBackend } from '../../target/backend/memory.js';
import { conformance, expectCode, pattern } from './helpers.js';

const MiB = 1 << 20;
const SIZE = 8 * MiB;

conformance('memory', { size: SIZE, reportsHoles: true }, async (t) => {
  const backend = new MemoryBackend({ size: SIZE });
  t.teardown(() => backend.close());
  return {
    backend,
    grow: async (bytes) => backend.resize(bytes),
    allocatedBytes: async () => backend.allocatedBytes,
  };
});

test('memory: a partial-chunk discard zeroes but keeps the chunk', async (t) => {
  const backend = new MemoryBackend({ size: MiB, chunkSize: 4096 });
  await backend.write(pattern(8192, 1), 0);
  await backend.discard(1024, 2048);
  t.is(backend.allocatedBytes, 8192);
  const got = Buffer.alloc(8192);
  await backend.read(got, 0);
  const expected = pattern(8192, 1);
  expected.fill(0, 1024, 3072);
  t.true(got.equals(expected));
  t.deepEqual(await backend.extent(0), { offset: 0, length: 8192, mapped: true });
  await backend.discard(0, 4096);
  t.is(backend.allocatedBytes, 4096);
  t.deepEqual(await backend.extent(100), { offset: 100, length: 3996, mapped: false });
});

test('memory: a huge sparse volume answers extent and whole-volume discard without walking it', async (t) => {
  const size = 2 ** 40;
  const backend = new MemoryBackend({ size });
  await backend.write(pattern(4096, 2), size / 2);
  t.deepEqual(await backend.extent(0), { offset: 0, length: size / 2, mapped: false });
  t.deepEqual(await backend.extent(size / 2), { offset: size / 2, length: 4096, mapped: true });
  t.deepEqual(await backend.extent(size / 2 + 4096), { offset: size / 2 + 4096, length: size / 2 - 4096, mapped: false });
  await backend.writeZeroes(0, size, false);
  t.is(backend.allocatedBytes, 4096);
  await backend.discard(0, size);
  t.is(backend.allocatedBytes, 0);
  t.deepEqual(await backend.extent(0), { offset: 0, length: size, mapped: false });
});

test('memory: an extent ends at a size that is not a whole chunk', async (t) => {
  const backend = new MemoryBackend({ size: 10000, chunkSize: 4096 });
  await backend.write(pattern(1000, 3), 9000);
  t.deepEqual(await backend.extent(8192), { offset: 8192, length: 1808, mapped: true });
  t.deepEqual(await backend.extent(0), { offset: 0, length: 8192, mapped: false });
});

test('memory: shrinking drops the data past the new end', async (t) => {
  const backend = new MemoryBackend({ size: MiB });
  await backend.write(pattern(MiB, 4), 0);
  backend.resize(6000);
  t.is(await backend.refreshSize(), 6000);
  t.is(backend.allocatedBytes, 8192);
  backend.resize(MiB);
  await backend.refreshSize();
  const got = Buffer.alloc(8192);
  await backend.read(got, 0);
  const expected = pattern(8192, 4);
  expected.fill(0, 6000);
  t.true(got.equals(expected));
});

test('memory: read-only refuses every change with EROFS', async (t) => {
  const backend = new MemoryBackend({ size: MiB, readOnly: true, name: 'ro' });
  t.true(backend.readOnly);
  await expectCode(t, backend.write(Buffer.alloc(512), 0), 'EROFS', /^memory volume ro: write refused: the volume is read-only$/);
  await expectCode(t, backend.discard(0, 512), 'EROFS', /read-only/);
  await expectCode(t, backend.writeZeroes(0, 512, false), 'EROFS', /read-only/);
  const got = Buffer.alloc(512, 1);
  await backend.read(got, 0);
  t.true(got.equals(Buffer.alloc(512)));
  await backend.flush();
});

test('memory: bad sizes and ranges are refused', async (t) => {
  t.throws(() => new MemoryBackend({ size: -1 }), { code: 'EINVAL', message: /size -1 must be a non-negative integer/ });
  t.throws(() => new MemoryBackend({ size: 1.5 }), { message: /must be a non-negative integer/ });
  const backend = new MemoryBackend({ size: MiB });
  await expectCode(t, backend.read(Buffer.alloc(512), -512), 'EINVAL', /non-negative integers/);
  await expectCode(t, backend.read(Buffer.alloc(512), 0.5), 'EINVAL', /non-negative integers/);
  await expectCode(t, backend.extent(MiB), 'EINVAL', /outside the volume/);
});
