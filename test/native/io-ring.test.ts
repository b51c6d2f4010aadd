// The addon's io_uring against real files: bytes written and read back, the
// kernel's errors as codes, more I/O in flight than the ring has slots, close
// waiting for in-flight reads, and an idle ring not keeping a process alive.
import test from 'ava';
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { IoRing, IoRingError } from '../../native/io-ring.js';
import { pattern } from '../backend/helpers.js';

const run = promisify(execFile);

async function tempFile(t: { teardown(fn: () => Promise<void>): void }, size: number) {
  const dir = await mkdtemp(join(tmpdir(), 'rblk-ring-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'data');
  const fh = await open(path, constants.O_RDWR | constants.O_CREAT, 0o600);
  await fh.truncate(size);
  t.teardown(() => fh.close());
  return { path, fh };
}

test('write, fdatasync and read back through the ring', async (t) => {
  const { fh } = await tempFile(t, 1 << 20);
  const ring = IoRing.open(16);
  t.teardown(() => ring.close());
  const data = pattern(64 << 10, 1);
  t.is(await ring.write(fh.fd, data, 4096), data.length);
  t.is(await ring.write(fh.fd, pattern(4096, 2), 0, true), 4096);
  await ring.fsync(fh.fd);
  const back = Buffer.alloc(data.length);
  t.is(await ring.read(fh.fd, back, 4096), back.length);
  t.true(back.equals(data));
  // What the ring wrote, the thread pool reads: same file, same bytes.
  const viaFs = Buffer.alloc(4096);
  await fh.read(viaFs, 0, 4096, 0);
  t.true(viaFs.equals(pattern(4096, 2)));
  // pread semantics at end of file: a short count, then 0.
  t.is(await ring.read(fh.fd, Buffer.alloc(8192), (1 << 20) - 4096), 4096);
  t.is(await ring.read(fh.fd, Buffer.alloc(512), 1 << 20), 0);
});

test('the kernel\'s errors arrive as codes (EBADF, EISDIR) and the ring stays usable', async (t) => {
  const { path } = await tempFile(t, 1 << 20);
  const ring = IoRing.open(8);
  t.teardown(() => ring.close());
  const e = await t.throwsAsync(ring.read(1_000_000, Buffer.alloc(512), 0), { instanceOf: IoRingError });
  t.is(e?.code, 'EBADF');
  t.is(e?.errno, 9);
  t.regex(e?.op ?? '', /io_uring read/);
  const ro = await open(path, constants.O_RDONLY);
  t.teardown(() => ro.close());
  const notWritable = await t.throwsAsync(ring.write(ro.fd, Buffer.alloc(512), 0));
  t.is((notWritable as IoRingError).code, 'EBADF');
  const dir = await open(tmpdir(), constants.O_RDONLY | constants.O_DIRECTORY);
  t.teardown(() => dir.close());
  const isDir = await t.throwsAsync(ring.read(dir.fd, Buffer.alloc(512), 0));
  t.is((isDir as IoRingError).code, 'EISDIR');
  // A failed I/O leaves the ring usable.
  t.is(await ring.read(ro.fd, Buffer.alloc(4096), 4096), 4096);
});

test('more I/O in flight than the ring has slots: every one completes with its own bytes', async (t) => {
  const { fh } = await tempFile(t, 4 << 20);
  const ring = IoRing.open(4);
  t.teardown(() => ring.close());
  const blocks = 512;
  await Promise.all(Array.from({ length: blocks }, (_, i) => ring.write(fh.fd, pattern(4096, i + 10), i * 4096)));
  const bufs = Array.from({ length: blocks }, () => Buffer.alloc(4096));
  const counts = await Promise.all(bufs.map((b, i) => ring.read(fh.fd, b, i * 4096)));
  t.true(counts.every((n) => n === 4096));
  const wrong = bufs.findIndex((b, i) => !b.equals(pattern(4096, i + 10)));
  t.is(wrong, -1, `block ${wrong} read back other bytes`);
  t.is(ring.inFlight, 0);
});

test('close waits for in-flight I/O, then refuses more with EBADF', async (t) => {
  const { fh } = await tempFile(t, 1 << 20);
  const ring = IoRing.open(8);
  const data = pattern(4096, 3);
  const pending = [ring.write(fh.fd, data, 0), ring.read(fh.fd, Buffer.alloc(4096), 8192)];
  await ring.close();
  t.deepEqual(await Promise.all(pending), [4096, 4096]);
  const e = await t.throwsAsync(ring.read(fh.fd, Buffer.alloc(512), 0));
  t.is((e as IoRingError).code, 'EBADF');
  await ring.close(); // twice is fine
});

test('an idle ring does not keep the process alive; one with I/O in flight does until it completes', async (t) => {
  const { path } = await tempFile(t, 1 << 20);
  const ringModule = new URL('../../native/io-ring.js', import.meta.url).href;
  // The child never closes its ring: it must still exit once its read has completed.
  const script = `
    import { IoRing } from ${JSON.stringify(ringModule)};
    import { openSync } from 'node:fs';
    const ring = IoRing.open(4);
    const fd = openSync(${JSON.stringify(path)}, 'r');
    ring.read(fd, Buffer.alloc(4096), 0).then((n) => console.log('read ' + n));
  `;
  const { stdout } = await run(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], { timeout: 20_000 });
  t.is(stdout.trim(), 'read 4096');
});

test('probe says whether this process may use io_uring', (t) => {
  const p = IoRing.probe();
  if (!p.ok) t.log(`io_uring unavailable here: ${p.reason}`);
  t.true(p.ok || p.reason.length > 0);
  if (p.ok) t.true(IoRing.open(1).features.entries >= 1);
});
