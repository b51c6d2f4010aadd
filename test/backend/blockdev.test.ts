import test, { type ExecutionContext } from 'ava';
import { stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BlockDeviceBackend } from '../../target/backend/blockdev.js';
import { openBackend } from '../../target/backend/open.js';
import { alignedBuffer, alignedCopy, conformance, expectCode, pattern, tempDir } from './helpers.js';
import { attachLoop, run } from './loop-device.js';

const MiB = 1 << 20;
const SIZE = 64 * MiB;

/** A sparse 64 MiB file on a fresh loop device. */
async function loopDevice(t: ExecutionContext, ...args: string[]): Promise<{ file: string; device: string }> {
  const file = join(await tempDir(t), 'disk.img');
  await writeFile(file, Buffer.alloc(0));
  await truncate(file, SIZE);
  return { file, device: await attachLoop(t, file, ...args) };
}

conformance('blockdev', { size: SIZE, reportsHoles: false }, async (t) => {
  const { file, device } = await loopDevice(t);
  const backend = await BlockDeviceBackend.open({ path: device });
  t.teardown(() => backend.close());
  return {
    backend,
    grow: async (bytes) => {
      await truncate(file, bytes);
      await run('losetup', ['--set-capacity', device]);
    },
    // The loop driver turns a discard into a hole punched in its backing file.
    allocatedBytes: async () => (await stat(file)).blocks * 512,
  };
});

test('blockdev: size and logical block size come from the kernel', async (t) => {
  const { device } = await loopDevice(t, '--sector-size', '4096');
  const backend = await BlockDeviceBackend.open({ path: device });
  t.teardown(() => backend.close());
  t.is(backend.size, SIZE);
  t.is(backend.logicalBlockSize, 4096);
  t.true(backend.direct);
  t.true(backend.canDiscard);
  await expectCode(t, backend.read(alignedBuffer(512), 0), 'EINVAL', new RegExp(`^block device ${device}: O_DIRECT read of 512 bytes at offset 0 is not aligned to the 4096-byte logical block size$`));
  await expectCode(t, backend.discard(512, 4096), 'EINVAL', /discard of 4096 bytes at offset 512 is not aligned to the 4096-byte/);
  await expectCode(t, backend.writeZeroes(0, 2048, false), 'EINVAL', /write zeroes of 2048 bytes at offset 0 is not aligned/);
});

test('blockdev: a misaligned buffer is explained', async (t) => {
  const { device } = await loopDevice(t);
  const backend = await BlockDeviceBackend.open({ path: device });
  t.teardown(() => backend.close());
  const misaligned = alignedBuffer(8192).subarray(1, 4097);
  await expectCode(t, backend.write(misaligned, 0), 'EINVAL', /O_DIRECT write of 4096 bytes at offset 0 was refused \(EINVAL\): the buffer's memory address must be aligned to 512 bytes/);
  await expectCode(t, backend.read(misaligned, 0), 'EINVAL', /O_DIRECT read of 4096 bytes at offset 0 was refused/);
});

test('blockdev: buffered mode takes any buffer and offset', async (t) => {
  const { device } = await loopDevice(t);
  const backend = await BlockDeviceBackend.open({ path: device, direct: false });
  t.teardown(() => backend.close());
  const data = pattern(3000, 1);
  await backend.write(data, 1000, { fua: true });
  const got = Buffer.alloc(3000);
  await backend.read(got, 1000);
  t.true(got.equals(data));
});

test('blockdev: a read-write open claims the device', async (t) => {
  const { device } = await loopDevice(t);
  const backend = await BlockDeviceBackend.open({ path: device });
  t.teardown(() => backend.close());
  await expectCode(t, BlockDeviceBackend.open({ path: device }), 'EBUSY');
  const reader = await BlockDeviceBackend.open({ path: device, readOnly: true });
  t.teardown(() => reader.close());
  await backend.write(alignedCopy(pattern(4096, 2)), 8192);
  const got = alignedBuffer(4096);
  await reader.read(got, 8192);
  t.true(got.equals(pattern(4096, 2)));
});

test('blockdev: read-only refuses changes with EROFS', async (t) => {
  const { device } = await loopDevice(t);
  const backend = await BlockDeviceBackend.open({ path: device, readOnly: true });
  t.teardown(() => backend.close());
  t.false(backend.canDiscard);
  await expectCode(t, backend.write(alignedBuffer(4096), 0), 'EROFS', new RegExp(`^block device ${device}: write refused: the volume is read-only$`));
  await expectCode(t, backend.discard(0, 4096), 'EROFS', /read-only/);
  await expectCode(t, backend.writeZeroes(0, 4096, true), 'EROFS', /read-only/);
});

test('blockdev: writeZeroes with unmap deallocates; without, it does not', async (t) => {
  const { file, device } = await loopDevice(t);
  const backend = await BlockDeviceBackend.open({ path: device });
  t.teardown(() => backend.close());
  await backend.write(alignedCopy(pattern(4 * MiB, 3)), 0);
  await backend.flush();
  const full = (await stat(file)).blocks * 512;
  await backend.writeZeroes(0, 2 * MiB, true);
  const unmapped = (await stat(file)).blocks * 512;
  t.true(full - unmapped >= 2 * MiB, `allocated ${full} → ${unmapped}`);
  await backend.writeZeroes(2 * MiB, 2 * MiB, false);
  const zeroed = (await stat(file)).blocks * 512;
  t.true(zeroed >= unmapped && zeroed - unmapped < MiB, `allocated ${unmapped} → ${zeroed}`);
  const got = alignedBuffer(4 * MiB);
  await backend.read(got, 0);
  t.true(got.equals(Buffer.alloc(4 * MiB)));
});

test('blockdev: openBackend picks the block device and checks a configured size', async (t) => {
  const { device } = await loopDevice(t);
  const backend = await openBackend({ path: device });
  t.teardown(() => backend.close());
  t.true(backend instanceof BlockDeviceBackend);
  t.is(backend.size, SIZE);
  await expectCode(t, openBackend({ path: device }), 'EBUSY');
  const reader = await openBackend({ path: device, size: SIZE, readOnly: true });
  t.teardown(() => reader.close());
  t.true(reader.readOnly);
});

test('blockdev: a configured size that differs from the device is refused', async (t) => {
  const { device } = await loopDevice(t);
  await expectCode(t, openBackend({ path: device, size: SIZE / 2 }), 'EINVAL', new RegExp(`^${device}: the configured size ${SIZE / 2} differs from the device's ${SIZE} bytes`));
  // The refused open released its claim.
  const backend = await openBackend({ path: device, size: SIZE });
  await backend.close();
  t.pass();
});

test('blockdev: a regular file is refused', async (t) => {
  const path = join(await tempDir(t), 'plain.img');
  await writeFile(path, Buffer.alloc(4096));
  await expectCode(t, BlockDeviceBackend.open({ path, direct: false }), 'EINVAL', new RegExp(`^block device ${path}: not a block device$`));
});
