// The one BlockDevice in memory for the tests of what sits on a BlockDevice (the NBD
// export, the FUSE attach): strict where a real volume is (alignment, bounds, maxTransfer,
// read-only), asynchronous as a real one is, and observable: it records every call, counts
// what runs at once, can fail an operation or a range of reads, can hold operations so
// requests pile up, and tracks which 64 KiB chunks hold data, as a thin volume would.
import { randomFillSync } from 'node:crypto';
import type { BlockDevice, BlockError, BlockErrorCode } from '../../initiator/block-device.js';
import { pattern } from '../../bench/kit/pattern.js';

const CHUNK = 64 * 1024;

export type DeviceOp = 'read' | 'write' | 'flush' | 'discard' | 'writeZeroes';

export interface DeviceCall {
  op: DeviceOp;
  offset: number;
  length: number;
  fua?: boolean;
  unmap?: boolean;
}

export interface MemoryDeviceOptions {
  size: number;
  blockSize?: number;
  readOnly?: boolean;
  canDiscard?: boolean;
  maxTransfer?: number;
}

export function blockError(code: BlockErrorCode, message: string): BlockError {
  return Object.assign(new Error(message), { code });
}

export class MemoryDevice implements BlockDevice {
  readonly size: number;
  readonly blockSize: number;
  readonly readOnly: boolean;
  readonly canDiscard: boolean;
  readonly maxTransfer: number;
  /** The device's bytes, holes as zeroes; tests may read and fill it directly. */
  readonly data: Buffer;
  readonly calls: DeviceCall[] = [];
  /** Operations running now, and the most that ever ran at once. */
  active = 0;
  maxActive = 0;
  /** Reads that touch [start, end) fail with this code. */
  failReads: { start: number; end: number; code: BlockErrorCode } | null = null;
  readonly #allocated = new Set<number>();
  readonly #failures = new Map<DeviceOp, Error>();
  #gate: { ops: readonly DeviceOp[] | null; open: Promise<void> } | null = null;

  constructor(opts: MemoryDeviceOptions) {
    this.size = opts.size;
    this.blockSize = opts.blockSize ?? 512;
    this.readOnly = opts.readOnly ?? false;
    this.canDiscard = opts.canDiscard ?? true;
    this.maxTransfer = opts.maxTransfer ?? 1024 * 1024;
    this.data = Buffer.alloc(this.size);
  }

  /** How many calls of `op` reached the device. */
  count(op: DeviceOp): number {
    return this.calls.filter((c) => c.op === op).length;
  }

  /** Makes every later call of `op` reject with a BlockError carrying `code`. */
  failWith(op: DeviceOp, code: BlockErrorCode, message = `injected ${code}`): void {
    this.#failures.set(op, blockError(code, message));
  }

  /** Makes `op` reject with a plain Error that has no BlockErrorCode. */
  failWithPlainError(op: DeviceOp, message: string): void {
    this.#failures.set(op, new Error(message));
  }

  clearFailures(): void {
    this.#failures.clear();
  }

  /** Parks operations (all, or only the listed kinds) that start from now on until the returned function is called. */
  hold(...ops: DeviceOp[]): () => void {
    let release = (): void => {};
    const open = new Promise<void>((resolve) => {
      release = () => {
        this.#gate = null;
        resolve();
      };
    });
    this.#gate = { ops: ops.length > 0 ? ops : null, open };
    return release;
  }

  /** 64 KiB chunks holding data: written and not wholly discarded since. */
  get allocatedChunks(): number {
    return this.#allocated.size;
  }

  /** The whole image, holes as zeroes (a copy). */
  contents(): Buffer {
    return Buffer.from(this.data);
  }

  /** Stores bytes directly, bypassing calls, failures and the gate. */
  load(offset: number, bytes: Buffer): void {
    bytes.copy(this.data, offset);
    this.#allocate(offset, bytes.length);
  }

  async read(offset: number, length: number): Promise<Buffer> {
    return this.#run({ op: 'read', offset, length }, () => {
      const f = this.failReads;
      if (f !== null && offset < f.end && f.start < offset + length) throw blockError(f.code, 'injected read failure');
      return Buffer.from(this.data.subarray(offset, offset + length));
    });
  }

  async write(offset: number, buf: Buffer, opts?: { fua?: boolean }): Promise<void> {
    await this.#run({ op: 'write', offset, length: buf.length, fua: opts?.fua ?? false }, () => {
      this.#writable();
      this.load(offset, buf);
    });
  }

  async flush(): Promise<void> {
    await this.#run({ op: 'flush', offset: 0, length: 0 }, () => {});
  }

  async discard(offset: number, length: number): Promise<void> {
    await this.#run({ op: 'discard', offset, length }, () => {
      this.#writable();
      this.#zero(offset, length, true);
    });
  }

  async writeZeroes(offset: number, length: number, opts?: { unmap?: boolean }): Promise<void> {
    const unmap = opts?.unmap ?? false;
    await this.#run({ op: 'writeZeroes', offset, length, unmap }, () => {
      this.#writable();
      this.#zero(offset, length, unmap);
    });
  }

  async #run<T>(call: DeviceCall, body: () => T): Promise<T> {
    this.calls.push(call);
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    try {
      const gate = this.#gate;
      if (gate !== null && (gate.ops === null || gate.ops.includes(call.op))) await gate.open;
      // Real devices answer asynchronously; so does this one.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const failure = this.#failures.get(call.op);
      if (failure !== undefined) throw failure;
      if (call.op !== 'flush') this.#checkRange(call.offset, call.length);
      return body();
    } finally {
      this.active--;
    }
  }

  #writable(): void {
    if (this.readOnly) throw blockError('WRITE_PROTECTED', 'the device is read-only');
  }

  #checkRange(offset: number, length: number): void {
    if (offset % this.blockSize !== 0 || length % this.blockSize !== 0) throw blockError('INVALID', `${offset}+${length} is not block-aligned`);
    if (offset + length > this.size) throw blockError('LBA_OUT_OF_RANGE', `${offset}+${length} is beyond ${this.size}`);
    if (length > this.maxTransfer) throw blockError('INVALID', `${length} bytes exceed the ${this.maxTransfer}-byte max transfer`);
  }

  #allocate(offset: number, length: number): void {
    for (let c = Math.floor(offset / CHUNK); c * CHUNK < offset + length; c++) this.#allocated.add(c);
  }

  /** Zeroes the range; with deallocate, chunks it covers wholly become holes, as a thin volume's would. */
  #zero(offset: number, length: number, deallocate: boolean): void {
    this.data.fill(0, offset, offset + length);
    if (!deallocate) return this.#allocate(offset, length);
    for (let c = Math.ceil(offset / CHUNK); (c + 1) * CHUNK <= offset + length; c++) this.#allocated.delete(c);
  }
}

export { pattern };

/** Fills buf with random bytes (fast for a whole device image). */
export function randomize(buf: Buffer): Buffer {
  return randomFillSync(buf);
}
