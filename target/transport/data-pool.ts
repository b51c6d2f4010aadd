// The target's data memory: registered once per port, local access only, and
// sliced per command from two size classes, so a 4 KiB I/O does not pin a
// max_io-sized chunk. When a class is empty, commands wait their turn (FIFO):
// never an allocation per I/O, never a spurious failure (docs/architecture.md "Memory").
import type { Domain, Pool, Slice } from '../../native/fabric.js';
import { Pool as FabricPool } from '../../native/fabric.js';
import type { DataBuffer, PoolUse } from './transport.js';

const SMALL_CHUNK = 64 * 1024;

export interface PooledBuffer extends DataBuffer {
  readonly slice: Slice;
  /** Operations still using the memory; release() waits for them. */
  readonly busy: Promise<unknown>[];
}

export class DataPool {
  private readonly small: Pool;
  private readonly large: Pool | null;
  readonly maxIo: number;

  constructor(domain: Domain, opts: { maxIo: number; dataBuffers: number }) {
    this.maxIo = opts.maxIo;
    this.small = new FabricPool(domain, { chunkSize: Math.min(SMALL_CHUNK, opts.maxIo), count: Math.max(64, opts.dataBuffers * 4) });
    this.large = opts.maxIo > SMALL_CHUNK ? new FabricPool(domain, { chunkSize: opts.maxIo, count: opts.dataBuffers }) : null;
  }

  /**
   * A slice of exactly `length` bytes (page-aligned start), or waits for one.
   * The transport may attach operations still using it (`busy`): release()
   * then returns the chunk to the pool only once they have settled.
   */
  async allocate(length: number): Promise<PooledBuffer> {
    if (!Number.isSafeInteger(length) || length < 0 || length > this.maxIo)
      throw new RangeError(`data length ${length} is outside 0..${this.maxIo}`);
    const pool = length <= this.small.chunkSize || !this.large ? this.small : this.large;
    const chunk = await pool.acquire();
    const slice = chunk.mr.slice(chunk.offset, length);
    let released = false;
    const busy: Promise<unknown>[] = [];
    return {
      buffer: slice.buffer,
      slice,
      busy,
      release: () => {
        if (released) return;
        released = true;
        if (busy.length === 0) pool.release(chunk);
        else void Promise.allSettled(busy).then(() => pool.release(chunk));
      },
    };
  }

  /** Chunks in use per size class, for `rblkd ctl status` and the pool metrics. */
  use(): PoolUse[] {
    const of = (p: Pool): PoolUse => ({ chunkSize: p.chunkSize, chunks: p.count, inUse: p.count - p.available });
    return this.large ? [of(this.small), of(this.large)] : [of(this.small)];
  }

  async close(): Promise<void> {
    await this.small.close();
    await this.large?.close();
  }
}
