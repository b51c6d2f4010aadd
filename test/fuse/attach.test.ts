// attachFuse over a real FUSE mount: the file's size and mode, byte-exact
// I/O at odd offsets checked against the device's memory, fsync and
// fallocate reaching the device, read-only volumes, and device errors.
import test, { type ExecutionContext } from 'ava';
import { constants as fsConstants } from 'node:fs';
import { open, readdir, stat, truncate } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { attachFuse, readAttachmentRecords, type FuseAttachment } from '../../initiator/fuse/index.js';
import { listMounts } from '../../native/fuse.js';
import { MemoryDevice, pattern, randomize, type MemoryDeviceOptions } from '../helpers/memory-device.js';
import { tempDir } from './helpers/fuse-fixture.js';

const run = promisify(execFile);
const MiB = 1 << 20;

async function attached(
  t: ExecutionContext,
  opts: Partial<MemoryDeviceOptions> = {},
  fileName?: string,
): Promise<{ dev: MemoryDevice; att: FuseAttachment }> {
  const dev = new MemoryDevice({ size: 8 * MiB, ...opts });
  // Non-zero contents: a read-modify-write that loses neighbouring bytes shows.
  randomize(dev.data);
  const dir = await tempDir(t, 'fuse');
  const att = await attachFuse(dev, dir, { fileName });
  t.teardown(() => att.close());
  return { dev, att };
}

test('the file has the device size, a regular mode and is the only entry', async (t) => {
  const { att } = await attached(t, { size: 64 * MiB }, 'vol0');
  const st = await stat(att.path);
  t.true(st.isFile());
  t.is(st.size, 64 * MiB);
  t.is(st.mode & 0o777, 0o644);
  t.deepEqual(await readdir(att.dir), ['vol0']);
  const m = (await listMounts()).find((e) => e.mountpoint === att.dir);
  t.is(m?.fsType, 'fuse.rblk');
});

test('writes at odd offsets and lengths land byte-exact on the device', async (t) => {
  const { dev, att } = await attached(t, { size: 64 * MiB, blockSize: 4096, maxTransfer: 64 * 1024 });
  const expected = Buffer.from(dev.data);
  const writes: Array<[number, number]> = [
    [1, 7],
    [4095, 2],
    [8191, 1],
    [12345, 100_000], // spans blocks and more than maxTransfer
    [5 * MiB + 3, 3 * 4096],
    [64 * MiB - 5, 5], // the last bytes
    [20 * MiB, 256 * 1024], // aligned, split into maxTransfer pieces
  ];
  const fh = await open(att.path, 'r+');
  try {
    for (const [i, [off, len]] of writes.entries()) {
      const data = pattern(len, 100 + i);
      const { bytesWritten } = await fh.write(data, 0, len, off);
      t.is(bytesWritten, len);
      data.copy(expected, off);
    }
    t.true(dev.data.equals(expected), 'device bytes equal the expected image');
    for (const [off, len] of [...writes, [3, 1] as [number, number], [4097, 9000] as [number, number]]) {
      const back = Buffer.alloc(len);
      const { bytesRead } = await fh.read(back, 0, len, off);
      t.is(bytesRead, len);
      t.true(back.equals(expected.subarray(off, off + len)), `read back ${off}+${len}`);
    }
  } finally {
    await fh.close();
  }
  t.true(dev.calls.every((c) => c.length <= 64 * 1024 || c.op === 'flush'), 'no transfer above maxTransfer');
});

test('concurrent partial writes to one block all survive', async (t) => {
  const { dev, att } = await attached(t, { blockSize: 4096 });
  const fhs = await Promise.all(Array.from({ length: 8 }, () => open(att.path, 'r+')));
  try {
    // 8 descriptors, 32 one-byte writes into the same 4 KiB block, all in flight at once.
    await Promise.all(
      Array.from({ length: 32 }, (_, i) => fhs[i % fhs.length].write(Buffer.from([0xa0 + i]), 0, 1, 8192 + i * 3)),
    );
  } finally {
    await Promise.all(fhs.map((f) => f.close()));
  }
  for (let i = 0; i < 32; i++) t.is(dev.data[8192 + i * 3], 0xa0 + i, `byte ${i}`);
});

test('reads stop at the end; writes past it fail with ENOSPC; truncate fails with EPERM', async (t) => {
  const { dev, att } = await attached(t);
  const fh = await open(att.path, 'r+');
  try {
    const buf = Buffer.alloc(100);
    t.is((await fh.read(buf, 0, 100, dev.size - 10)).bytesRead, 10);
    t.true(buf.subarray(0, 10).equals(dev.data.subarray(dev.size - 10)));
    t.is((await fh.read(buf, 0, 100, dev.size)).bytesRead, 0);
    await t.throwsAsync(fh.write(Buffer.from('x'), 0, 1, dev.size), { code: 'ENOSPC' });
  } finally {
    await fh.close();
  }
  await t.throwsAsync(truncate(att.path, 4096), { code: 'EPERM' });
  await t.throwsAsync(open(att.path, 'w'), { code: 'EPERM' });
  t.is((await stat(att.path)).size, dev.size);
});

test('fsync and fdatasync reach device.flush; O_DSYNC writes are FUA', async (t) => {
  const { dev, att } = await attached(t);
  const fh = await open(att.path, 'r+');
  try {
    await fh.write(Buffer.from('hello'), 0, 5, 1000);
    t.is(dev.count('flush'), 0, 'a plain write does not flush');
    t.false(dev.calls.some((c) => c.op === 'write' && c.fua === true));
    await fh.sync();
    t.is(dev.count('flush'), 1);
    await fh.datasync();
    t.is(dev.count('flush'), 2);
  } finally {
    await fh.close();
  }
  t.is(dev.count('flush'), 2, 'close does not flush');
  const sync = await open(att.path, fsConstants.O_RDWR | fsConstants.O_DSYNC);
  try {
    await sync.write(Buffer.alloc(512, 1), 0, 512, 4096);
  } finally {
    await sync.close();
  }
  const last = dev.calls.filter((c) => c.op === 'write').at(-1);
  t.deepEqual(last, { op: 'write', offset: 4096, length: 512, fua: true });
});

test('fallocate --punch-hole discards whole blocks and zeroes the partial ones', async (t) => {
  const { dev, att } = await attached(t, { blockSize: 4096 });
  const before = Buffer.from(dev.data);
  // 1000 .. 3*4096+10: partial head block, two whole blocks, partial tail block.
  const off = 1000;
  const len = 3 * 4096 + 10 - off;
  await run('fallocate', ['--punch-hole', '--offset', String(off), '--length', String(len), att.path]);
  t.deepEqual(
    dev.calls.filter((c) => c.op === 'discard'),
    [{ op: 'discard', offset: 4096, length: 2 * 4096 }],
  );
  t.true(dev.data.subarray(off, off + len).equals(Buffer.alloc(len)), 'the range reads as zeroes');
  t.true(dev.data.subarray(0, off).equals(before.subarray(0, off)), 'bytes before are intact');
  t.true(dev.data.subarray(off + len, 5 * 4096).equals(before.subarray(off + len, 5 * 4096)), 'bytes after are intact');
  const fh = await open(att.path, 'r');
  try {
    const back = Buffer.alloc(len, 0xff);
    t.is((await fh.read(back, 0, len, off)).bytesRead, len);
    t.true(back.equals(Buffer.alloc(len)), 'and reads back as zeroes through the file');
  } finally {
    await fh.close();
  }
});

test('fallocate --zero-range uses writeZeroes; a device without discard gets writeZeroes for punch too', async (t) => {
  const { dev, att } = await attached(t, { canDiscard: false });
  await run('fallocate', ['--zero-range', '--keep-size', '--offset', '512', '--length', '4096', att.path]);
  t.deepEqual(dev.calls.filter((c) => c.op === 'writeZeroes'), [{ op: 'writeZeroes', offset: 512, length: 4096, unmap: false }]);
  await run('fallocate', ['--punch-hole', '--offset', '8192', '--length', '1024', att.path]);
  t.is(dev.count('discard'), 0);
  t.deepEqual(dev.calls.filter((c) => c.op === 'writeZeroes').at(-1), { op: 'writeZeroes', offset: 8192, length: 1024, unmap: true });
  t.true(dev.data.subarray(512, 512 + 4096).equals(Buffer.alloc(4096)));
  t.true(dev.data.subarray(8192, 9216).equals(Buffer.alloc(1024)));
  const err = await t.throwsAsync(run('fallocate', ['--offset', String(dev.size - 512), '--length', '4096', att.path]));
  t.regex(String((err as { stderr?: string }).stderr), /No space left on device/);
});

test('a read-only device gives a read-only file', async (t) => {
  const { dev, att } = await attached(t, { readOnly: true });
  const st = await stat(att.path);
  t.is(st.mode & 0o777, 0o444);
  const err = await t.throwsAsync(open(att.path, 'r+'));
  t.true(['EROFS', 'EACCES'].includes((err as NodeJS.ErrnoException).code ?? ''), String(err));
  const fh = await open(att.path, 'r');
  try {
    const buf = Buffer.alloc(1000);
    await fh.read(buf, 0, 1000, 333);
    t.true(buf.equals(dev.data.subarray(333, 1333)));
  } finally {
    await fh.close();
  }
  await t.throwsAsync(run('fallocate', ['--punch-hole', '--offset', '0', '--length', '4096', att.path]));
  t.is(dev.calls.filter((c) => c.op !== 'read').length, 0, 'nothing but reads reached the device');
});

test('a device error reaches the reader as EIO', async (t) => {
  const { dev, att } = await attached(t);
  dev.failReads = { start: 1 * MiB, end: 1 * MiB + 512, code: 'MEDIUM_ERROR' };
  const fh = await open(att.path, 'r');
  try {
    await t.throwsAsync(fh.read(Buffer.alloc(4096), 0, 4096, 1 * MiB - 100), { code: 'EIO' });
    const ok = Buffer.alloc(100);
    await fh.read(ok, 0, 100, 2 * MiB);
    t.true(ok.equals(dev.data.subarray(2 * MiB, 2 * MiB + 100)), 'the rest still reads');
  } finally {
    await fh.close();
  }
});

test('close() unmounts; a second close() is a no-op', async (t) => {
  const dev = new MemoryDevice({ size: 4 * MiB });
  const dir = await tempDir(t, 'fuse');
  const att = await attachFuse(dev, dir);
  t.true((await listMounts()).some((m) => m.mountpoint === att.dir));
  t.true(att.active);
  await att.close();
  await att.close();
  t.false(att.active);
  t.false((await listMounts()).some((m) => m.mountpoint === att.dir));
  t.deepEqual(await readdir(dir), []);
});

test('mounting on a missing directory fails with the addon error', async (t) => {
  const dir = await tempDir(t, 'fuse');
  const err = await t.throwsAsync(attachFuse(new MemoryDevice({ size: MiB }), `${dir}/missing`));
  t.is((err as NodeJS.ErrnoException).code, 'ENOENT');
});

test('an unmount from outside ends the attachment; close() still cleans up the record', async (t) => {
  const dir = await tempDir(t, 'fuse');
  const stateDir = await tempDir(t, 'state');
  let ended: (errno: number) => void = () => undefined;
  const end = new Promise<number>((resolve) => (ended = resolve));
  const att = await attachFuse(new MemoryDevice({ size: MiB }), dir, { stateDir, label: 'vol9', onEnd: (e) => ended(e) });
  t.teardown(() => att.close());
  t.like(att.record, { kind: 'fuse', label: 'vol9', file: att.path, loopDevice: null });
  t.deepEqual((await readAttachmentRecords(stateDir)).records, [att.record]);
  t.is((await listMounts()).find((m) => m.mountpoint === att.dir)?.source, 'rblk:vol9');
  await run('umount', [att.dir]);
  t.is(await end, 0);
  t.false(att.active);
  await att.close();
  t.deepEqual((await readAttachmentRecords(stateDir)).records, []);
});
