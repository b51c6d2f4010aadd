// Serves the FUSE file from a BlockDevice. The kernel hands us byte ranges as
// the caller wrote them; the device takes whole logical blocks and at most
// maxTransfer bytes at a time. So reads widen to blocks and trim, writes of
// partial blocks read-modify-write the edge blocks under a range lock, and
// everything larger than maxTransfer is split.
import { FuseError, type FallocateRequest, type FuseFileHandler } from '../../native/fuse.js';
import type { BlockDevice } from '../block-device.js';
import { toFuseError } from './errno.js';
import { silentLogger, type FuseLogger } from './logger.js';
import { RangeLock } from './range-lock.js';

export class VolumeFile implements FuseFileHandler {
  private readonly device: BlockDevice;
  private readonly log: FuseLogger;
  private readonly bs: number;
  private readonly chunk: number;
  private readonly lock = new RangeLock();

  constructor(device: BlockDevice, log: FuseLogger = silentLogger) {
    const bs = device.blockSize;
    if (!Number.isInteger(bs) || bs < 512 || (bs & (bs - 1)) !== 0) throw new Error(`block size ${bs} is not a power of two of at least 512`);
    if (!Number.isSafeInteger(device.size) || device.size % bs !== 0) throw new Error(`device size ${device.size} is not a multiple of the block size ${bs}`);
    this.device = device;
    this.log = log;
    this.bs = bs;
    this.chunk = Math.max(bs, Math.floor(device.maxTransfer / bs) * bs);
  }

  async read(offset: number, length: number): Promise<Buffer> {
    const end = Math.min(offset + length, this.device.size);
    if (offset >= end) return Buffer.alloc(0);
    const a = this.down(offset);
    const b = this.up(end);
    try {
      const buf = await this.readBlocks(a, b - a);
      return buf.subarray(offset - a, end - a);
    } catch (err) {
      throw this.failed('read', err, offset, length);
    }
  }

  async write(offset: number, data: Buffer, opts: { sync: boolean }): Promise<number> {
    if (this.device.readOnly) throw new FuseError('EROFS');
    if (data.length === 0) return 0;
    // Like a block device: no growing; a write that starts at the end has no room.
    if (offset >= this.device.size) throw new FuseError('ENOSPC');
    const end = Math.min(offset + data.length, this.device.size);
    const a = this.down(offset);
    const b = this.up(end);
    const release = await this.lock.acquire(a, b);
    try {
      let buf: Buffer;
      if (a === offset && b === end) {
        buf = data.subarray(0, end - offset);
      } else {
        buf = Buffer.allocUnsafe(b - a);
        await this.loadEdges(buf, a, b, offset, end);
        data.copy(buf, offset - a, 0, end - offset);
      }
      await this.writeBlocks(a, buf, opts.sync);
      return end - offset;
    } catch (err) {
      throw this.failed('write', err, offset, data.length);
    } finally {
      release();
    }
  }

  /** fsync and fdatasync alike: SBC-4 SYNCHRONIZE CACHE covers every completed write. */
  async fsync(): Promise<void> {
    // Nothing of ours can be unwritten on a volume we cannot write.
    if (this.device.readOnly) return;
    try {
      await this.device.flush();
    } catch (err) {
      throw this.failed('fsync', err, 0, 0);
    }
  }

  async fallocate(req: FallocateRequest): Promise<void> {
    if (this.device.readOnly) throw new FuseError('EROFS');
    const size = this.device.size;
    let end = req.offset + req.length;
    // The size is fixed: a request that would grow the file cannot be met.
    if (end > size && !req.keepSize) throw new FuseError('ENOSPC');
    // Every byte of a volume already exists, so plain allocation has nothing to do.
    if (req.kind === 'allocate') return;
    end = Math.min(end, size);
    if (req.offset >= end) return;
    try {
      await this.zero(req.offset, end, req.kind === 'punchHole');
    } catch (err) {
      throw this.failed(req.kind, err, req.offset, req.length);
    }
  }

  // [offset, end) reads as zeroes afterwards. Whole blocks are discarded
  // (punch hole) or zeroed with WRITE ZEROES; partial edge blocks are
  // rewritten with their bytes in range cleared.
  private async zero(offset: number, end: number, deallocate: boolean): Promise<void> {
    const a = this.down(offset);
    const b = this.up(end);
    const release = await this.lock.acquire(a, b);
    try {
      const innerStart = this.up(offset);
      const innerEnd = this.down(end);
      const jobs: Array<Promise<void>> = [];
      if (innerStart < innerEnd) {
        const len = innerEnd - innerStart;
        jobs.push(
          deallocate && this.device.canDiscard
            ? this.device.discard(innerStart, len)
            : this.device.writeZeroes(innerStart, len, { unmap: deallocate }),
        );
      }
      if (innerStart > innerEnd) {
        jobs.push(this.zeroWithin(a, offset, end));
      } else {
        if (offset < innerStart) jobs.push(this.zeroWithin(a, offset, innerStart));
        if (innerEnd < end) jobs.push(this.zeroWithin(innerEnd, innerEnd, end));
      }
      await Promise.all(jobs);
    } finally {
      release();
    }
  }

  // Read-modify-write of the block at blockStart, clearing [from, to).
  private async zeroWithin(blockStart: number, from: number, to: number): Promise<void> {
    const block = Buffer.from(await this.device.read(blockStart, this.bs));
    block.fill(0, from - blockStart, to - blockStart);
    await this.device.write(blockStart, block);
  }

  // Fills the partial first and last blocks of buf (which covers [a, b)) from the device.
  private async loadEdges(buf: Buffer, a: number, b: number, offset: number, end: number): Promise<void> {
    const jobs: Array<Promise<void>> = [];
    const head = offset !== a;
    if (head) jobs.push(this.device.read(a, this.bs).then((blk) => void blk.copy(buf, 0)));
    const tailStart = b - this.bs;
    if (end !== b && !(head && tailStart === a)) {
      jobs.push(this.device.read(tailStart, this.bs).then((blk) => void blk.copy(buf, tailStart - a)));
    }
    await Promise.all(jobs);
  }

  private async readBlocks(offset: number, length: number): Promise<Buffer> {
    if (length <= this.chunk) return this.device.read(offset, length);
    const parts: Array<Promise<Buffer>> = [];
    for (let o = offset; o < offset + length; o += this.chunk) {
      parts.push(this.device.read(o, Math.min(this.chunk, offset + length - o)));
    }
    return Buffer.concat(await Promise.all(parts));
  }

  private async writeBlocks(offset: number, buf: Buffer, fua: boolean): Promise<void> {
    const jobs: Array<Promise<void>> = [];
    for (let o = 0; o < buf.length; o += this.chunk) {
      jobs.push(this.device.write(offset + o, buf.subarray(o, Math.min(o + this.chunk, buf.length)), { fua }));
    }
    await Promise.all(jobs);
  }

  private failed(op: string, err: unknown, offset: number, length: number): FuseError {
    const fe = toFuseError(err);
    if (!(err instanceof FuseError)) {
      this.log.warn(`FUSE ${op} failed`, { offset, length, code: (err as { code?: unknown } | null)?.code, errno: fe.code, message: fe.message });
    }
    return fe;
  }

  private down(n: number): number {
    return n - (n % this.bs);
  }

  private up(n: number): number {
    return this.down(n + this.bs - 1);
  }
}
