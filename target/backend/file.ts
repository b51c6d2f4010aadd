// A volume in a regular file, after nvmet's io-cmd-file.c and tgt's bs_rdwr.c:
// pread/pwrite through io_uring or the libuv pool with the caller's
// (registered) Buffer (positional-io.ts),
// fdatasync for SYNCHRONIZE CACHE, fallocate for UNMAP and WRITE SAME, and
// SEEK_DATA/SEEK_HOLE for GET LBA STATUS.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { addon } from '../../native/binding.js';
import type { Extent } from './backend.js';
import { backendError, hasCode, isUnsupported } from './backend-error.js';
import { DescriptorBackend, type DescriptorBackendState } from './descriptor-backend.js';
import { PositionalIo, type EngineSelection, type IoEngineChoice } from './positional-io.js';
import { checkBlockSize, checkRange } from './range-check.js';
import { StoreLock } from './store-lock.js';

export interface FileBackendOptions {
  path: string;
  /**
   * Bytes. A missing file is created sparse at this size; a smaller file is
   * grown (sparse) to it. A larger file is never shrunk: the volume keeps the
   * file's size, which `size` then reports (compare it with this to warn).
   */
  size?: number;
  readOnly?: boolean;
  /** O_DIRECT: bypass the page cache. Offsets, lengths and buffer addresses must then be block-aligned. */
  direct?: boolean;
  /** The volume's logical block size, which O_DIRECT alignment is checked against; 512 unless given. */
  logicalBlockSize?: number;
  /** io_uring, the libuv thread pool, or "auto" (io_uring when a ring opens; the default). */
  ioEngine?: IoEngineChoice;
  /**
   * A store several gateways serve (the config has `alua`): no lock. Otherwise the file is
   * locked, exclusively unless read-only (docs/backends.md "One daemon per store").
   */
  shared?: boolean;
}

const SEEK_DATA = 3;
const SEEK_HOLE = 4;
const ZERO_CHUNK = 1 << 20;
let zeroes: Buffer | null = null;

export class FileBackend extends DescriptorBackend {
  private constructor(state: DescriptorBackendState, fh: FileHandle, dsync: FileHandle | null, engine: EngineSelection, lock: StoreLock | null) {
    super(state, fh, dsync, engine, lock);
  }

  static async open(opts: FileBackendOptions): Promise<FileBackend> {
    const { path } = opts;
    const readOnly = opts.readOnly ?? false;
    const direct = opts.direct ?? false;
    const logicalBlockSize = opts.logicalBlockSize ?? 512;
    checkBlockSize(`file ${path}`, logicalBlockSize);
    if (opts.size !== undefined && (!Number.isSafeInteger(opts.size) || opts.size < 0)) {
      throw backendError('EINVAL', `file ${path}: size ${opts.size} must be a non-negative integer`);
    }
    const directFlag = direct ? constants.O_DIRECT : 0;

    let fh: FileHandle;
    try {
      fh = await open(path, (readOnly ? constants.O_RDONLY : constants.O_RDWR) | directFlag);
    } catch (err) {
      if (!hasCode(err, 'ENOENT') || opts.size === undefined || readOnly) throw err;
      fh = await open(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | directFlag, 0o600);
    }
    let dsync: FileHandle | null = null;
    let engine: EngineSelection | null = null;
    let lock: StoreLock | null = null;
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw backendError('EINVAL', `file ${path}: not a regular file`);
      // Before anything is written to it (the truncate below).
      if (opts.shared !== true) lock = await StoreLock.take(fh, `file ${path}`, { shared: readOnly });
      let size = st.size;
      if (opts.size !== undefined && size < opts.size) {
        if (readOnly) {
          throw backendError('EROFS', `file ${path}: ${size} bytes, smaller than the configured ${opts.size}, and it cannot be grown read-only`);
        }
        // ftruncate allocates nothing: the new tail is a hole.
        await fh.truncate(opts.size);
        size = opts.size;
      }
      // FUA is nvmet's per-request IOCB_DSYNC: RWF_DSYNC on the write with
      // io_uring; on the thread pool, a second descriptor opened O_DSYNC.
      // Either way it is one pwrite that returns only
      // once its own range is durable (generic_write_sync syncs just that
      // range), where write-then-fdatasync would add a second pool round trip
      // and flush every dirty page of the file, queueing FUA behind unrelated
      // buffered writes (SBC-4 5.40, FUA).
      engine = PositionalIo.engine(opts.ioEngine ?? 'auto', `file ${path}`);
      if (!readOnly && engine.ring === null) dsync = await open(path, constants.O_WRONLY | constants.O_DSYNC | directFlag);
      const canDiscard = !readOnly && (await probePunchHole(fh.fd, size));
      return new FileBackend({ what: `file ${path}`, path, readOnly, direct, logicalBlockSize, canDiscard, size }, fh, dsync, engine, lock);
    } catch (err) {
      await DescriptorBackend.abandon(engine, dsync, fh, lock);
      throw err;
    }
  }

  discard(offset: number, length: number): Promise<void> {
    return this.gate.run(async () => {
      this.checkWritable('discard');
      checkRange(this.target.what, 'discard', offset, length, this.currentSize);
      if (!this.canDiscard) throw backendError('EOPNOTSUPP', `${this.target.what}: the filesystem cannot punch holes`);
      if (length === 0) return;
      await this.#punch(offset, length);
    });
  }

  writeZeroes(offset: number, length: number, unmap: boolean): Promise<void> {
    return this.gate.run(async () => {
      this.checkWritable('write zeroes');
      checkRange(this.target.what, 'write zeroes', offset, length, this.currentSize);
      if (length === 0) return;
      const { KEEP_SIZE, ZERO_RANGE } = addon().fallocateModes;
      try {
        // A punched hole reads as zeroes and frees the space (SBC-4 5.48, WRITE SAME with UNMAP).
        if (unmap && this.canDiscard) return await this.#punch(offset, length);
        return await addon().fallocate(this.fh.fd, ZERO_RANGE | KEEP_SIZE, offset, length);
      } catch (err) {
        if (!isUnsupported(err)) throw err;
      }
      await this.#writeZeroBuffers(offset, length);
    });
  }

  extent(offset: number): Promise<Extent> {
    return this.gate.run(async () => {
      const size = this.currentSize;
      if (!Number.isSafeInteger(offset) || offset < 0 || offset >= size) {
        throw backendError('EINVAL', `${this.target.what}: extent offset ${offset} is outside the volume (${size} bytes)`);
      }
      const data = await addon().seek(this.fh.fd, offset, SEEK_DATA);
      if (data === -1 || data >= size) return { offset, length: size - offset, mapped: false };
      if (data > offset) return { offset, length: data - offset, mapped: false };
      const hole = await addon().seek(this.fh.fd, offset, SEEK_HOLE);
      const end = hole === -1 ? size : Math.min(hole, size);
      return { offset, length: end - offset, mapped: true };
    });
  }

  /** The file's current size; it may have grown (or shrunk) underneath the volume. */
  refreshSize(): Promise<number> {
    return this.gate.run(async () => {
      this.currentSize = (await this.fh.stat()).size;
      return this.currentSize;
    });
  }

  #punch(offset: number, length: number): Promise<void> {
    const { KEEP_SIZE, PUNCH_HOLE } = addon().fallocateModes;
    return addon().fallocate(this.fh.fd, PUNCH_HOLE | KEEP_SIZE, offset, length);
  }

  // The last resort when the filesystem has no FALLOC_FL_ZERO_RANGE (tmpfs,
  // NFS before 4.2). Under O_DIRECT the zero buffer may not be aligned, so the
  // zeroes go through a buffered descriptor, made durable before returning so
  // that later direct reads, which go to the disk, see them.
  async #writeZeroBuffers(offset: number, length: number): Promise<void> {
    zeroes ??= Buffer.alloc(ZERO_CHUNK);
    const fh = this.direct ? await open(this.path, constants.O_WRONLY) : this.fh;
    const io = new PositionalIo(fh, null, { what: this.target.what, directAlignment: null }, PositionalIo.engine('threads', this.path));
    try {
      for (let done = 0; done < length; done += ZERO_CHUNK) {
        await io.write(zeroes.subarray(0, Math.min(ZERO_CHUNK, length - done)), offset + done);
      }
      if (this.direct) await fh.datasync();
    } finally {
      if (fh !== this.fh) await fh.close();
    }
  }
}

// Whether the filesystem can punch holes, asked once at open so VPD B2 and
// READ CAPACITY(16) report thin provisioning truthfully (SBC-4 4.7.3). The
// probe punches past end of file with KEEP_SIZE, which changes nothing.
async function probePunchHole(fd: number, size: number): Promise<boolean> {
  const { KEEP_SIZE, PUNCH_HOLE } = addon().fallocateModes;
  const past = Math.ceil(size / 4096) * 4096;
  try {
    await addon().fallocate(fd, PUNCH_HOLE | KEEP_SIZE, past, 4096);
    return true;
  } catch (err) {
    if (isUnsupported(err)) return false;
    throw err;
  }
}
