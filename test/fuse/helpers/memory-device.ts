// A BlockDevice in memory for the FUSE tests. It is strict where a real
// volume is (alignment, bounds, maxTransfer, read-only) so that a caller that
// sends it a partial block fails loudly, and it counts what reaches it.
import { randomFillSync } from 'node:crypto';
import type { BlockDevice, BlockError, BlockErrorCode } from '../../../initiator/block-device.js';
import { pattern } from '../../../bench/kit/pattern.js';

export interface MemoryDeviceOptions {
  size: number;
  blockSize?: number;
  readOnly?: boolean;
  canDiscard?: boolean;
  maxTransfer?: number;
}

export interface Call {
  op: 'read' | 'write' | 'flush' | 'discard' | 'writeZeroes';
  offset: number;
  length: number;
  fua?: boolean;
  unmap?: boolean;
}

function blockError(code: BlockErrorCode, message: string): BlockError {
  return Object.assign(new Error(message), { code });
}

export class MemoryDevice implements BlockDevice {
  readonly size: number;
  readonly blockSize: number;
  readonly readOnly: boolean;
  readonly canDiscard: boolean;
  readonly maxTransfer: number;
  readonly data: Buffer;
  readonly calls: Call[] = [];
  /** Reads that touch [start, end) fail with this code. */
  failReads: { start: number; end: number; code: BlockErrorCode } | null = null;

  constructor(opts: MemoryDeviceOptions) {
    this.size = opts.size;
    this.blockSize = opts.blockSize ?? 512;
    this.readOnly = opts.readOnly ?? false;
    this.canDiscard = opts.canDiscard ?? true;
    this.maxTransfer = opts.maxTransfer ?? 1 << 20;
    this.data = Buffer.alloc(this.size);
  }

  count(op: Call['op']): number {
    return this.calls.filter((c) => c.op === op).length;
  }

  private check(offset: number, length: number, transfer: boolean): void {
    if (offset % this.blockSize !== 0 || length % this.blockSize !== 0) {
      throw blockError('INVALID', `unaligned: offset ${offset} length ${length}`);
    }
    if (offset + length > this.size) throw blockError('LBA_OUT_OF_RANGE', `beyond the end: ${offset}+${length}`);
    if (transfer && length > this.maxTransfer) throw blockError('INVALID', `transfer of ${length} > ${this.maxTransfer}`);
  }

  async read(offset: number, length: number): Promise<Buffer> {
    await Promise.resolve();
    this.check(offset, length, true);
    this.calls.push({ op: 'read', offset, length });
    const f = this.failReads;
    if (f !== null && offset < f.end && f.start < offset + length) throw blockError(f.code, 'injected read failure');
    return Buffer.from(this.data.subarray(offset, offset + length));
  }

  async write(offset: number, buf: Buffer, opts: { fua?: boolean } = {}): Promise<void> {
    await Promise.resolve();
    if (this.readOnly) throw blockError('WRITE_PROTECTED', 'read-only');
    this.check(offset, buf.length, true);
    this.calls.push({ op: 'write', offset, length: buf.length, fua: opts.fua ?? false });
    buf.copy(this.data, offset);
  }

  async flush(): Promise<void> {
    await Promise.resolve();
    this.calls.push({ op: 'flush', offset: 0, length: 0 });
  }

  async discard(offset: number, length: number): Promise<void> {
    await Promise.resolve();
    if (this.readOnly) throw blockError('WRITE_PROTECTED', 'read-only');
    this.check(offset, length, false);
    this.calls.push({ op: 'discard', offset, length });
    this.data.fill(0, offset, offset + length);
  }

  async writeZeroes(offset: number, length: number, opts: { unmap?: boolean } = {}): Promise<void> {
    await Promise.resolve();
    if (this.readOnly) throw blockError('WRITE_PROTECTED', 'read-only');
    this.check(offset, length, false);
    this.calls.push({ op: 'writeZeroes', offset, length, unmap: opts.unmap ?? false });
    this.data.fill(0, offset, offset + length);
  }
}

export { pattern };

/** Fills buf with random bytes (fast for a whole device image). */
export function randomize(buf: Buffer): Buffer {
  return randomFillSync(buf);
}
