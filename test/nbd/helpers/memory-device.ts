// A BlockDevice in memory for the NBD tests: a sparse map of 64 KiB chunks,
// optionally read-only, that records every call, can be told to fail an
// operation with a BlockErrorCode, and can be held so requests pile up.
import type { BlockDevice, BlockError, BlockErrorCode } from '../../../initiator/block-device.js';

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
  readonly calls: DeviceCall[] = [];
  /** Operations running now, and the most that ever ran at once. */
  active = 0;
  maxActive = 0;
  readonly #chunks = new Map<number, Buffer>();
  readonly #failures = new Map<DeviceOp, Error>();
  #gate: { ops: readonly DeviceOp[] | null; open: Promise<void> } | null = null;

  constructor(opts: MemoryDeviceOptions) {
    this.size = opts.size;
    this.blockSize = opts.blockSize ?? 512;
    this.readOnly = opts.readOnly ?? false;
    this.canDiscard = opts.canDiscard ?? true;
    this.maxTransfer = opts.maxTransfer ?? 1024 * 1024;
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

  /**
   * Parks operations (all, or only the listed kinds) that start from now on
   * until the returned function is called.
   */
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

  /** Chunks holding data (never written or wholly discarded chunks are absent). */
  get allocatedChunks(): number {
    return this.#chunks.size;
  }

  /** The whole image, holes as zeroes. */
  contents(): Buffer {
    return this.#copyOut(0, this.size);
  }

  /** Stores bytes directly, bypassing calls, failures and the gate. */
  load(offset: number, data: Buffer): void {
    this.#copyIn(offset, data);
  }

  async read(offset: number, length: number): Promise<Buffer> {
    return this.#run({ op: 'read', offset, length }, () => this.#copyOut(offset, length));
  }

  async write(offset: number, buf: Buffer, opts?: { fua?: boolean }): Promise<void> {
    const call: DeviceCall = { op: 'write', offset, length: buf.length, fua: opts?.fua ?? false };
    await this.#run(call, () => {
      this.#writable();
      this.#copyIn(offset, buf);
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
    const call: DeviceCall = { op: 'writeZeroes', offset, length, unmap: opts?.unmap ?? false };
    await this.#run(call, () => {
      this.#writable();
      this.#zero(offset, length, call.unmap === true);
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
    if (offset % this.blockSize !== 0 || length % this.blockSize !== 0) {
      throw blockError('INVALID', `${offset}+${length} is not block-aligned`);
    }
    if (offset + length > this.size) {
      throw blockError('LBA_OUT_OF_RANGE', `${offset}+${length} is beyond ${this.size}`);
    }
    if (length > this.maxTransfer) {
      throw blockError('INVALID', `${length} bytes exceed the ${this.maxTransfer}-byte max transfer`);
    }
  }

  #copyOut(offset: number, length: number): Buffer {
    const out = Buffer.alloc(length);
    for (let done = 0; done < length; ) {
      const at = offset + done;
      const index = Math.floor(at / CHUNK);
      const within = at % CHUNK;
      const count = Math.min(CHUNK - within, length - done);
      this.#chunks.get(index)?.copy(out, done, within, within + count);
      done += count;
    }
    return out;
  }

  #copyIn(offset: number, data: Buffer): void {
    for (let done = 0; done < data.length; ) {
      const at = offset + done;
      const index = Math.floor(at / CHUNK);
      const within = at % CHUNK;
      const count = Math.min(CHUNK - within, data.length - done);
      let chunk = this.#chunks.get(index);
      if (chunk === undefined) {
        chunk = Buffer.alloc(CHUNK);
        this.#chunks.set(index, chunk);
      }
      data.copy(chunk, within, done, done + count);
      done += count;
    }
  }

  #zero(offset: number, length: number, deallocate: boolean): void {
    for (let done = 0; done < length; ) {
      const at = offset + done;
      const index = Math.floor(at / CHUNK);
      const within = at % CHUNK;
      const count = Math.min(CHUNK - within, length - done);
      const chunk = this.#chunks.get(index);
      if (deallocate && count === CHUNK) this.#chunks.delete(index);
      else chunk?.fill(0, within, within + count);
      if (!deallocate && chunk === undefined) this.#copyIn(at, Buffer.alloc(count));
      done += count;
    }
  }
}
