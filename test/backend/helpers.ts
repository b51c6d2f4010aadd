// Shared by the backend tests: deterministic data, page-aligned memory for
// O_DIRECT, temp directories, and the behaviour every Backend must show.
import avaTest, { type ExecutionContext } from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Backend } from '../../target/backend/backend.js';
import { pattern } from '../../bench/kit/pattern.js';

export { pattern };

const ARENA = 16 << 20;
let arena: Buffer | null = null;
let used = 0;

/**
 * Page-aligned memory for O_DIRECT. Buffer.alloc is not aligned (glibc puts
 * large blocks 16 bytes into a mapping), but a WebAssembly.Memory is a fresh
 * mapping, so its byte 0 is page-aligned. Slices are carved in whole pages and
 * never freed; a new arena starts when one runs out.
 */
export function alignedBuffer(length: number): Buffer {
  const pages = Math.ceil(length / 4096);
  if (arena === null || used + pages * 4096 > arena.length) {
    const size = Math.max(ARENA, pages * 4096);
    arena = Buffer.from(new WebAssembly.Memory({ initial: Math.ceil(size / 65536) }).buffer);
    used = 0;
  }
  const buf = arena.subarray(used, used + length);
  used += pages * 4096;
  return buf;
}

export function alignedCopy(data: Buffer): Buffer {
  const buf = alignedBuffer(data.length);
  data.copy(buf);
  return buf;
}

/** A fresh directory under os.tmpdir(), removed when the test ends. */
export async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rblk-backend-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export async function expectCode(t: ExecutionContext, promise: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
  const err = await t.throwsAsync(promise);
  t.is((err as Error & { code?: string } | undefined)?.code, code, err?.message);
  if (message !== undefined) t.regex(err?.message ?? '', message);
}

export interface Subject {
  backend: Backend;
  /** Grows the medium underneath the backend (truncate, losetup -c, resize). */
  grow(bytes: number): Promise<void>;
  /** Bytes the medium holds allocated (st_blocks * 512 of the file behind it). */
  allocatedBytes(): Promise<number>;
}

export interface ConformanceOptions {
  /** Size every subject is opened with. */
  size: number;
  /** True when extent() reports holes (files, memory); a block device is all mapped. */
  reportsHoles: boolean;
  /** Why the suite cannot run here: its tests are then registered as skips (never passes). */
  skip?: string | null;
}

const MiB = 1 << 20;

/** Registers the tests every backend must pass; open() makes a fresh subject and registers its teardown. */
export function conformance(name: string, opts: ConformanceOptions, open: (t: ExecutionContext) => Promise<Subject>): void {
  const { size } = opts;
  const test = opts.skip ? avaTest.skip : avaTest;

  test(`${name}: write/read round trip at several offsets and sizes`, async (t) => {
    const { backend } = await open(t);
    t.is(backend.size, size);
    const cases: Array<[number, number]> = [
      [0, 4096],
      [8192, 8192],
      [60 * 1024, 8192],
      [MiB + 4096, 128 * 1024],
      [3 * MiB, MiB],
      [size - 8192, 8192],
    ];
    for (const [i, [offset, length]] of cases.entries()) await backend.write(alignedCopy(pattern(length, i + 1)), offset);
    for (const [i, [offset, length]] of cases.entries()) {
      const got = alignedBuffer(length);
      await backend.read(got, offset);
      t.true(got.equals(pattern(length, i + 1)), `bytes at ${offset}+${length}`);
    }
    // Reads that straddle two writes see both, in place.
    const straddle = alignedBuffer(8192);
    await backend.read(straddle, 4096);
    t.true(straddle.subarray(0, 4096).equals(Buffer.alloc(4096)));
    t.true(straddle.subarray(4096).equals(pattern(8192, 2).subarray(0, 4096)));
  });

  test(`${name}: never-written space reads as zeroes`, async (t) => {
    const { backend } = await open(t);
    await backend.write(alignedCopy(pattern(4096, 9)), 0);
    const got = alignedBuffer(64 * 1024);
    got.fill(0xa5);
    await backend.read(got, 2 * MiB);
    t.true(got.equals(Buffer.alloc(64 * 1024)));
  });

  test(`${name}: FUA write and flush`, async (t) => {
    const { backend } = await open(t);
    const data = pattern(16384, 11);
    await backend.write(alignedCopy(data), MiB, { fua: true });
    await backend.flush();
    const got = alignedBuffer(16384);
    await backend.read(got, MiB);
    t.true(got.equals(data));
  });

  test(`${name}: discard reads back zeroes and deallocates`, async (t) => {
    const subject = await open(t);
    const { backend } = subject;
    t.true(backend.canDiscard);
    const data = pattern(2 * MiB, 12);
    await backend.write(alignedCopy(data), MiB);
    await backend.flush();
    const before = await subject.allocatedBytes();
    t.true(before >= 2 * MiB, `allocated ${before}`);
    await backend.discard(MiB + 512 * 1024, MiB);
    const after = await subject.allocatedBytes();
    t.true(before - after >= MiB, `allocated ${before} → ${after}`);
    const got = alignedBuffer(2 * MiB);
    await backend.read(got, MiB);
    t.true(got.subarray(0, 512 * 1024).equals(data.subarray(0, 512 * 1024)));
    t.true(got.subarray(512 * 1024, 1536 * 1024).equals(Buffer.alloc(MiB)));
    t.true(got.subarray(1536 * 1024).equals(data.subarray(1536 * 1024)));
    if (opts.reportsHoles) {
      t.deepEqual(await backend.extent(MiB + 512 * 1024), { offset: MiB + 512 * 1024, length: MiB, mapped: false });
    }
  });

  test(`${name}: writeZeroes with and without unmap`, async (t) => {
    const { backend } = await open(t);
    const data = pattern(MiB, 13);
    await backend.write(alignedCopy(data), 0);
    await backend.writeZeroes(64 * 1024, 64 * 1024, false);
    await backend.writeZeroes(256 * 1024, 128 * 1024, true);
    const got = alignedBuffer(MiB);
    await backend.read(got, 0);
    const expected = Buffer.from(data);
    expected.fill(0, 64 * 1024, 128 * 1024);
    expected.fill(0, 256 * 1024, 384 * 1024);
    t.true(got.equals(expected));
    if (opts.reportsHoles) t.false((await backend.extent(256 * 1024)).mapped);
  });

  test(`${name}: extent over holes and data`, async (t) => {
    const { backend } = await open(t);
    await backend.write(alignedCopy(pattern(64 * 1024, 14)), MiB);
    await backend.write(alignedCopy(pattern(4096, 15)), size - 4096);
    if (!opts.reportsHoles) {
      t.deepEqual(await backend.extent(0), { offset: 0, length: size, mapped: true });
      t.deepEqual(await backend.extent(MiB + 4096), { offset: MiB + 4096, length: size - MiB - 4096, mapped: true });
      return;
    }
    t.deepEqual(await backend.extent(0), { offset: 0, length: MiB, mapped: false });
    t.deepEqual(await backend.extent(4096), { offset: 4096, length: MiB - 4096, mapped: false });
    t.deepEqual(await backend.extent(MiB), { offset: MiB, length: 64 * 1024, mapped: true });
    t.deepEqual(await backend.extent(MiB + 4096), { offset: MiB + 4096, length: 60 * 1024, mapped: true });
    t.deepEqual(await backend.extent(MiB + 64 * 1024), { offset: MiB + 64 * 1024, length: size - 4096 - MiB - 64 * 1024, mapped: false });
    t.deepEqual(await backend.extent(size - 4096), { offset: size - 4096, length: 4096, mapped: true });
    await expectCode(t, backend.extent(size), 'EINVAL', /outside the volume/);
  });

  test(`${name}: refreshSize after the medium grows`, async (t) => {
    const subject = await open(t);
    const { backend } = subject;
    await subject.grow(size + 2 * MiB);
    t.is(backend.size, size, 'the size changes only on refreshSize');
    await expectCode(t, backend.read(alignedBuffer(4096), size), 'EINVAL', /past the end of the volume/);
    t.is(await backend.refreshSize(), size + 2 * MiB);
    t.is(backend.size, size + 2 * MiB);
    await backend.write(alignedCopy(pattern(4096, 16)), size + MiB);
    const got = alignedBuffer(4096);
    await backend.read(got, size + MiB);
    t.true(got.equals(pattern(4096, 16)));
  });

  test(`${name}: I/O past the end is refused`, async (t) => {
    const { backend } = await open(t);
    await expectCode(t, backend.write(alignedBuffer(8192), size - 4096), 'EINVAL', /past the end of the volume/);
    await expectCode(t, backend.discard(size - 4096, 8192), 'EINVAL', /past the end of the volume/);
    await expectCode(t, backend.writeZeroes(size, 4096, false), 'EINVAL', /past the end of the volume/);
  });

  test(`${name}: close, then every call fails cleanly`, async (t) => {
    const { backend } = await open(t);
    const pending = backend.write(alignedCopy(pattern(MiB, 17)), 0);
    await backend.close();
    await t.notThrowsAsync(pending, 'I/O in flight at close completes');
    await backend.close();
    await expectCode(t, backend.read(alignedBuffer(4096), 0), 'EBADF', /is closed/);
    await expectCode(t, backend.write(alignedBuffer(4096), 0), 'EBADF', /is closed/);
    await expectCode(t, backend.flush(), 'EBADF', /is closed/);
    await expectCode(t, backend.discard(0, 4096), 'EBADF', /is closed/);
    await expectCode(t, backend.writeZeroes(0, 4096, true), 'EBADF', /is closed/);
    await expectCode(t, backend.extent(0), 'EBADF', /is closed/);
    await expectCode(t, backend.refreshSize(), 'EBADF', /is closed/);
  });
}
