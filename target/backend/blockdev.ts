// A volume on a block device, after nvmet's io-cmd-bdev.c and LIO's iblock:
// size and logical block size come from the kernel (BLKGETSIZE64, BLKSSZGET),
// I/O is O_DIRECT unless asked otherwise, and UNMAP and WRITE SAME become
// BLKDISCARD and BLKZEROOUT.
import { constants } from 'node:fs';
import { open, readFile, type FileHandle } from 'node:fs/promises';
import { addon } from '../../native/binding.js';
import type { Extent } from './backend.js';
import { backendError, hasCode, isUnsupported } from './backend-error.js';
import { DescriptorBackend, type DescriptorBackendState } from './descriptor-backend.js';
import { PositionalIo, type EngineSelection, type IoEngineChoice } from './positional-io.js';
import { checkAligned, checkRange } from './range-check.js';
import { lockHolderOf, StoreLock } from './store-lock.js';

export interface BlockDeviceBackendOptions {
  path: string;
  readOnly?: boolean;
  /** O_DIRECT, true unless given: a block volume must not sit in the target's page cache. */
  direct?: boolean;
  /** io_uring, the libuv thread pool, or "auto" (io_uring when a ring opens; the default). */
  ioEngine?: IoEngineChoice;
  /**
   * A store several gateways serve (the config has `alua`): no lock. Otherwise the device is
   * locked, exclusively unless read-only (docs/backends.md "One daemon per store").
   */
  shared?: boolean;
}

export class BlockDeviceBackend extends DescriptorBackend {
  private constructor(state: DescriptorBackendState, fh: FileHandle, dsync: FileHandle | null, engine: EngineSelection, lock: StoreLock | null) {
    super(state, fh, dsync, engine, lock);
  }

  static async open(opts: BlockDeviceBackendOptions): Promise<BlockDeviceBackend> {
    const { path } = opts;
    const readOnly = opts.readOnly ?? false;
    const direct = opts.direct ?? true;
    const directFlag = direct ? constants.O_DIRECT : 0;
    let fh: FileHandle;
    try {
      // O_EXCL on a block device claims it, so a mounted or otherwise claimed
      // device fails with EBUSY instead of being corrupted by a second writer. A
      // read-only export may share the device.
      fh = await open(path, (readOnly ? constants.O_RDONLY : constants.O_RDWR | constants.O_EXCL) | directFlag);
    } catch (err) {
      // Another rblkd's claim: say whose, where /proc/locks tells (store-lock.ts).
      if (hasCode(err, 'EBUSY')) throw (await lockHolderOf(path, `block device ${path}`)) ?? err;
      throw err;
    }
    let dsync: FileHandle | null = null;
    let engine: EngineSelection | null = null;
    let lock: StoreLock | null = null;
    try {
      const st = await fh.stat({ bigint: true });
      if (!st.isBlockDevice()) throw backendError('EINVAL', `block device ${path}: not a block device`);
      // O_EXCL claims a writable device in this kernel only; the lock covers read-only exports
      // too (taken shared) and names its holder (docs/backends.md "One daemon per store").
      if (opts.shared !== true) lock = await StoreLock.take(fh, `block device ${path}`, { shared: readOnly });
      const info = addon().blockDeviceInfo(fh.fd);
      // O_DSYNC on a block device turns each write into a FUA write
      // (blkdev_direct_IO sets REQ_FUA), exactly SBC-4 5.40's FUA. No O_EXCL:
      // the claim above already covers this process.
      engine = PositionalIo.engine(opts.ioEngine ?? 'auto', `block device ${path}`);
      if (!readOnly && engine.ring === null) dsync = await open(path, constants.O_WRONLY | constants.O_DSYNC | directFlag);
      const canDiscard = !readOnly && (await discardSupported(st.rdev));
      return new BlockDeviceBackend(
        { what: `block device ${path}`, path, readOnly, direct, logicalBlockSize: info.logicalBlockSize, canDiscard, size: info.size },
        fh,
        dsync,
        engine,
        lock,
      );
    } catch (err) {
      await DescriptorBackend.abandon(engine, dsync, fh, lock);
      throw err;
    }
  }

  /**
   * BLKDISCARD. Whether a discarded range then reads as zeroes is up to the
   * device (loop devices and most SSDs do, some arrays do not); writeZeroes
   * with unmap is the call that guarantees zeroes.
   */
  discard(offset: number, length: number): Promise<void> {
    return this.gate.run(async () => {
      this.#checkRangeOp('discard', offset, length);
      if (!this.canDiscard) throw backendError('EOPNOTSUPP', `${this.target.what}: the device does not support discard`);
      if (length === 0) return;
      await addon().blockDeviceRange(this.fh.fd, 'discard', offset, length);
    });
  }

  writeZeroes(offset: number, length: number, unmap: boolean): Promise<void> {
    return this.gate.run(async () => {
      this.#checkRangeOp('write zeroes', offset, length);
      if (length === 0) return;
      if (unmap) {
        // fallocate(PUNCH_HOLE) on a block device is a write-zeroes that may
        // deallocate and never falls back to writing (blkdev_fallocate with
        // BLKDEV_ZERO_NOFALLBACK): zeroes are guaranteed, unlike after
        // BLKDISCARD. BLKZEROOUT is the fallback (SBC-4 5.48, WRITE SAME).
        const { KEEP_SIZE, PUNCH_HOLE } = addon().fallocateModes;
        try {
          return await addon().fallocate(this.fh.fd, PUNCH_HOLE | KEEP_SIZE, offset, length);
        } catch (err) {
          if (!isUnsupported(err)) throw err;
        }
      }
      await addon().blockDeviceRange(this.fh.fd, 'zeroout', offset, length);
    });
  }

  /** A block device has no holes that the host can see: everything is mapped. */
  extent(offset: number): Promise<Extent> {
    return this.gate.run(async () => {
      if (!Number.isSafeInteger(offset) || offset < 0 || offset >= this.currentSize) {
        throw backendError('EINVAL', `${this.target.what}: extent offset ${offset} is outside the volume (${this.currentSize} bytes)`);
      }
      return { offset, length: this.currentSize - offset, mapped: true };
    });
  }

  /** BLKGETSIZE64 again, after the device was resized (e.g. `losetup -c`, lvextend). */
  refreshSize(): Promise<number> {
    return this.gate.run(async () => {
      this.currentSize = addon().blockDeviceInfo(this.fh.fd).size;
      return this.currentSize;
    });
  }

  // The range ioctls work in whole logical blocks whatever the open mode.
  #checkRangeOp(op: string, offset: number, length: number): void {
    this.checkWritable(op);
    checkRange(this.target.what, op, offset, length, this.currentSize);
    checkAligned(this.target.what, op, offset, length, this.logicalBlockSize);
  }
}

// glibc's dev_t encoding (major/minor in <sys/sysmacros.h>).
function deviceNumber(rdev: bigint): string {
  const major = ((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & ~0xfffn);
  const minor = (rdev & 0xffn) | ((rdev >> 12n) & ~0xffn);
  return `${major}:${minor}`;
}

// The queue's discard_max_bytes is 0 when the device cannot discard. A
// partition has no queue directory of its own: its disk's is one level up
// (the kernel resolves the `..` after following the sysfs symlink).
async function discardSupported(rdev: bigint): Promise<boolean> {
  const dir = `/sys/dev/block/${deviceNumber(rdev)}`;
  for (const file of [`${dir}/queue/discard_max_bytes`, `${dir}/../queue/discard_max_bytes`]) {
    try {
      return BigInt((await readFile(file, 'utf8')).trim()) > 0n;
    } catch {
      continue;
    }
  }
  return false;
}
