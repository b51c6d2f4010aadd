import test, { type ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, readdir, readlink, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { addon } from '../../native/binding.js';
import { FileBackend } from '../../target/backend/file.js';
import type { IoEngineChoice } from '../../target/backend/positional-io.js';
import { IoRing } from '../../native/io-ring.js';
import { alignedBuffer, alignedCopy, conformance, expectCode, pattern, tempDir } from './helpers.js';

const run = promisify(execFile);
const MiB = 1 << 20;
const SIZE = 8 * MiB;

async function openFile(t: ExecutionContext, direct: boolean, ioEngine: IoEngineChoice = 'auto') {
  const path = join(await tempDir(t), 'volume.img');
  const backend = await FileBackend.open({ path, size: SIZE, direct, logicalBlockSize: direct ? 4096 : 512, ioEngine });
  t.teardown(() => backend.close());
  return {
    backend,
    grow: (bytes: number) => truncate(path, bytes),
    allocatedBytes: async () => (await stat(path)).blocks * 512,
  };
}

// Whether os.tmpdir() takes O_DIRECT at all (tmpfs before Linux 6.6 does not).
async function tmpdirTakesDirect(): Promise<string | null> {
  const path = join(tmpdir(), `rblk-direct-probe-${process.pid}`);
  try {
    await (await open(path, constants.O_RDWR | constants.O_CREAT | constants.O_DIRECT, 0o600)).close();
    return null;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await rm(path, { force: true });
  }
}

const directRefused = await tmpdirTakesDirect();
const tmpfsSkip = await probeTmpfs();

const ring = IoRing.probe();
conformance('file', { size: SIZE, reportsHoles: true }, (t) => openFile(t, false));
conformance('file (threads)', { size: SIZE, reportsHoles: true }, (t) => openFile(t, false, 'threads'));
// Where os.tmpdir() refuses O_DIRECT the suite is registered as skips, never passes.
const directSkip = directRefused === null ? null : `${tmpdir()} refuses O_DIRECT (${directRefused})`;
conformance('file O_DIRECT', { size: SIZE, reportsHoles: true, skip: directSkip }, (t) => openFile(t, true));
conformance('file O_DIRECT (threads)', { size: SIZE, reportsHoles: true, skip: directSkip }, (t) => openFile(t, true, 'threads'));

// The open(2) flags that tell the backend's descriptors apart.
const SHOWN = 3 | constants.O_DSYNC | constants.O_DIRECT;

/** The open descriptors of this process that name path, with their access mode, O_DSYNC and O_DIRECT flags. */
async function descriptorsOf(path: string): Promise<number[]> {
  const flags: number[] = [];
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (target !== path) continue;
    const info = await readFile(`/proc/self/fdinfo/${fd}`, 'utf8');
    flags.push(Number.parseInt(/^flags:\s*([0-7]+)$/m.exec(info)?.[1] ?? '', 8) & SHOWN);
  }
  return flags.sort((a, b) => a - b);
}

/** What a read-write backend holds open: the main descriptor and the O_DSYNC one for FUA. */
function mainAndDsync(direct: number): number[] {
  return [constants.O_RDWR | direct, constants.O_WRONLY | constants.O_DSYNC | direct].sort((a, b) => a - b);
}

test('file: a missing file is created sparse at the configured size', async (t) => {
  const path = join(await tempDir(t), 'new.img');
  const backend = await FileBackend.open({ path, size: 64 * MiB });
  t.teardown(() => backend.close());
  const st = await stat(path);
  t.is(st.size, 64 * MiB);
  t.is(backend.size, 64 * MiB);
  t.true(st.blocks * 512 < 64 * 1024, `allocated ${st.blocks * 512} bytes`);
  t.is(st.mode & 0o777, 0o600);
});

test('file: a missing file without a size is an error', async (t) => {
  const path = join(await tempDir(t), 'absent.img');
  await expectCode(t, FileBackend.open({ path }), 'ENOENT');
  await expectCode(t, FileBackend.open({ path, size: MiB, readOnly: true }), 'ENOENT');
});

test('file: a smaller file is grown, keeping its data', async (t) => {
  const path = join(await tempDir(t), 'small.img');
  await writeFile(path, pattern(5000, 1));
  const backend = await FileBackend.open({ path, size: 4 * MiB });
  t.teardown(() => backend.close());
  t.is(backend.size, 4 * MiB);
  t.is((await stat(path)).size, 4 * MiB);
  const got = Buffer.alloc(8192, 0xff);
  await backend.read(got, 0);
  t.true(got.subarray(0, 5000).equals(pattern(5000, 1)));
  t.true(got.subarray(5000).equals(Buffer.alloc(8192 - 5000)));
});

test('file: a larger file is never shrunk; the volume keeps its size', async (t) => {
  const path = join(await tempDir(t), 'large.img');
  await writeFile(path, Buffer.alloc(0));
  await truncate(path, 3 * MiB);
  const fh = await open(path, 'r+');
  await fh.write(pattern(4096, 2), 0, 4096, 3 * MiB - 4096);
  await fh.close();
  const backend = await FileBackend.open({ path, size: MiB });
  t.teardown(() => backend.close());
  t.is(backend.size, 3 * MiB);
  t.is((await stat(path)).size, 3 * MiB);
  const got = Buffer.alloc(4096);
  await backend.read(got, 3 * MiB - 4096);
  t.true(got.equals(pattern(4096, 2)));
});

test('file: read-only refuses changes with EROFS and still reads', async (t) => {
  const path = join(await tempDir(t), 'ro.img');
  await writeFile(path, pattern(MiB, 3));
  const backend = await FileBackend.open({ path, readOnly: true });
  t.teardown(() => backend.close());
  t.true(backend.readOnly);
  t.false(backend.canDiscard);
  await expectCode(t, backend.write(Buffer.alloc(512), 0), 'EROFS', new RegExp(`^file ${path}: write refused: the volume is read-only$`));
  await expectCode(t, backend.write(Buffer.alloc(512), 0, { fua: true }), 'EROFS', /read-only/);
  await expectCode(t, backend.discard(0, 512), 'EROFS', /discard refused/);
  await expectCode(t, backend.writeZeroes(0, 512, true), 'EROFS', /write zeroes refused/);
  const got = Buffer.alloc(MiB);
  await backend.read(got, 0);
  t.true(got.equals(pattern(MiB, 3)));
  await backend.flush();
  t.deepEqual(await descriptorsOf(path), [constants.O_RDONLY], 'one read-only descriptor');
});

test('file: read-only cannot grow a smaller file', async (t) => {
  const path = join(await tempDir(t), 'ro-small.img');
  await writeFile(path, Buffer.alloc(4096));
  await expectCode(t, FileBackend.open({ path, size: MiB, readOnly: true }), 'EROFS', /4096 bytes, smaller than the configured 1048576, and it cannot be grown read-only/);
  t.is((await stat(path)).size, 4096);
  t.deepEqual(await descriptorsOf(path), [], 'the failed open closed its descriptor');
});

for (const ioEngine of ['threads', 'io_uring'] as const) {
  const fuaPath = ioEngine === 'threads' ? 'an O_DSYNC descriptor' : 'RWF_DSYNC on the one descriptor';
  (ioEngine === 'io_uring' && !ring.ok ? test.skip : test)(`file (${ioEngine}): FUA writes go through ${fuaPath}, and close releases every descriptor`, async (t) => {
    const path = join(await tempDir(t), 'fds.img');
    const backend = await FileBackend.open({ path, size: MiB, direct: directRefused === null, logicalBlockSize: 4096, ioEngine });
    t.is(backend.ioEngine, ioEngine);
    const direct = directRefused === null ? constants.O_DIRECT : 0;
    t.deepEqual(await descriptorsOf(path), ioEngine === 'threads' ? mainAndDsync(direct) : [constants.O_RDWR | direct]);
    await backend.write(alignedCopy(pattern(4096, 4)), 4096, { fua: true });
    const got = alignedBuffer(4096);
    await backend.read(got, 4096);
    t.true(got.equals(pattern(4096, 4)));
    await backend.close();
    t.deepEqual(await descriptorsOf(path), []);
  });
}

test('file: io_engine auto takes io_uring where a ring opens, and says why not where it falls back', async (t) => {
  const path = join(await tempDir(t), 'auto.img');
  const backend = await FileBackend.open({ path, size: MiB });
  t.teardown(() => backend.close());
  if (ring.ok) {
    t.is(backend.ioEngine, 'io_uring');
    t.is(backend.ioEngineFallback, null);
  } else {
    t.is(backend.ioEngine, 'threads');
    t.is(backend.ioEngineFallback, ring.reason);
  }
});

(directRefused === null ? test : test.skip)('file: O_DIRECT checks alignment and explains a misaligned buffer', async (t) => {
  const path = join(await tempDir(t), 'direct.img');
  const backend = await FileBackend.open({ path, size: MiB, direct: true, logicalBlockSize: 4096 });
  t.teardown(() => backend.close());
  await expectCode(t, backend.write(alignedBuffer(4096), 512), 'EINVAL', /O_DIRECT write of 4096 bytes at offset 512 is not aligned to the 4096-byte logical block size/);
  await expectCode(t, backend.read(alignedBuffer(1024), 0), 'EINVAL', /O_DIRECT read of 1024 bytes at offset 0 is not aligned/);
  const misaligned = alignedBuffer(8192).subarray(1, 4097);
  await expectCode(t, backend.write(misaligned, 0), 'EINVAL', /O_DIRECT write of 4096 bytes at offset 0 was refused \(EINVAL\): the buffer's memory address must be aligned to 4096 bytes/);
  // Reads of a hole are zero-filled without touching the disk, and so without
  // the alignment check: read back data that is on disk.
  await backend.write(alignedCopy(pattern(4096, 8)), 0);
  await expectCode(t, backend.read(misaligned, 0), 'EINVAL', /O_DIRECT read of 4096 bytes at offset 0 was refused \(EINVAL\): the buffer's memory address/);
});

test('file: a file that shrank underneath fails reads with EIO', async (t) => {
  const path = join(await tempDir(t), 'shrunk.img');
  const backend = await FileBackend.open({ path, size: MiB });
  t.teardown(() => backend.close());
  await backend.write(pattern(MiB, 5), 0);
  await truncate(path, 512 * 1024);
  await expectCode(t, backend.read(Buffer.alloc(4096), 512 * 1024 - 2048), 'EIO', new RegExp(`^file ${path}: end of file at byte 524288 while reading 4096 bytes at offset 522240 \\(the backing store shrank\\)$`));
  await expectCode(t, backend.read(Buffer.alloc(512), 768 * 1024), 'EIO', /end of file at byte 786432/);
  t.deepEqual(await backend.extent(768 * 1024), { offset: 768 * 1024, length: 256 * 1024, mapped: false });
  t.is(await backend.refreshSize(), 512 * 1024);
});

test('file: a path that is not a regular file is refused', async (t) => {
  await expectCode(t, FileBackend.open({ path: '/dev/null' }), 'EINVAL', /^file \/dev\/null: not a regular file$/);
  await expectCode(t, FileBackend.open({ path: join(await tempDir(t), 'x'), size: -5 }), 'EINVAL', /size -5 must be a non-negative integer/);
  await expectCode(t, FileBackend.open({ path: '/dev/null', logicalBlockSize: 1000 }), 'EINVAL', /logical block size 1000 must be a power of two/);
});

/** A small tmpfs under os.tmpdir(): no FALLOC_FL_ZERO_RANGE, and a size limit to hit. */
async function tmpfs(t: ExecutionContext, size: string): Promise<string> {
  const dir = join(await tempDir(t), 'tmpfs');
  await mkdir(dir);
  await run('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'rblk-test', dir]);
  t.teardown(() => run('umount', [dir]).then(() => undefined));
  return dir;
}

/**
 * Decided once, at load, so that the tests below are skips where they cannot
 * run, never passes: whether a tmpfs mounts here (root), and whether it takes
 * O_DIRECT (tmpfs does from Linux 6.6).
 */
async function probeTmpfs(): Promise<{ mount: string | null; direct: string | null }> {
  const dir = await mkdtemp(join(tmpdir(), 'rblk-tmpfs-probe-'));
  try {
    await run('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'rblk-probe', dir]);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    const why = `cannot mount a tmpfs (${(err as Error).message.trim()})`;
    return { mount: why, direct: why };
  }
  try {
    await (await open(join(dir, 'probe'), constants.O_RDWR | constants.O_CREAT | constants.O_DIRECT, 0o600)).close();
    return { mount: null, direct: null };
  } catch (err) {
    return { mount: null, direct: `tmpfs refuses O_DIRECT (${(err as Error).message})` };
  } finally {
    await run('umount', [dir]);
    await rm(dir, { recursive: true, force: true });
  }
}

for (const direct of [false, true]) {
  ((direct ? tmpfsSkip.direct : tmpfsSkip.mount) === null ? test : test.skip)(`file: writeZeroes falls back to writing zeroes without ZERO_RANGE${direct ? ' (O_DIRECT)' : ''}`, async (t) => {
    const dir = await tmpfs(t, '16m');
    const path = join(dir, 'volume.img');
    const backend = await FileBackend.open({ path, size: 4 * MiB, direct, logicalBlockSize: 4096 });
    t.teardown(() => backend.close());
    // The precondition that makes this test mean something: tmpfs has no ZERO_RANGE.
    const probe = await open(path, 'r+');
    const { ZERO_RANGE, KEEP_SIZE } = addon().fallocateModes;
    await expectCode(t, addon().fallocate(probe.fd, ZERO_RANGE | KEEP_SIZE, 0, 4096), 'EOPNOTSUPP');
    await probe.close();
    t.true(backend.canDiscard, 'tmpfs punches holes');
    const data = pattern(3 * MiB, 6);
    await backend.write(alignedCopy(data), 0);
    await backend.writeZeroes(4096, 2 * MiB + 8192, false);
    const got = alignedBuffer(3 * MiB);
    await backend.read(got, 0);
    const expected = Buffer.from(data);
    expected.fill(0, 4096, 4096 + 2 * MiB + 8192);
    t.true(got.equals(expected));
    t.deepEqual(await descriptorsOf(path), backend.ioEngine === 'threads' ? mainAndDsync(direct ? constants.O_DIRECT : 0) : [constants.O_RDWR | (direct ? constants.O_DIRECT : 0)], 'the fallback closed its buffered descriptor');
  });
}

(tmpfsSkip.mount === null ? test : test.skip)('file: ENOSPC from the filesystem propagates with its code', async (t) => {
  const dir = await tmpfs(t, '1m');
  const backend = await FileBackend.open({ path: join(dir, 'thin.img'), size: 8 * MiB });
  t.teardown(() => backend.close());
  await expectCode(t, backend.write(pattern(2 * MiB, 7), 0), 'ENOSPC');
});
