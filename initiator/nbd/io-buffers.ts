// Memory for NBD read replies and write payloads, kept per client connection
// and reused. A new Buffer per 128 KiB request (zero-filled, then garbage)
// cost the export a copy, a fill and collector pauses of tens of milliseconds
// at the 99th percentile. A device that offers allocate() (an rblk Volume:
// registered memory) is filled by the target's RDMA WRITE directly and the
// reply goes from that memory to the socket; a write payload is read from the
// socket into it and the target RDMA-READs it from there. A read's buffer
// returns here once its reply reached the kernel (the socket's write
// callback), a write's once the device has the data.
import type { BlockDevice, DeviceBuffer } from '../block-device.js';

/** Requests larger than this get memory of their own rather than a cached buffer. */
const LARGEST_CACHED = 4 * 1024 * 1024;
const SMALLEST_CLASS = 4096;

export interface IoLease {
  /** Exactly the bytes asked for. */
  readonly view: Buffer;
  /** Gives the memory back (after the reply is written, or the write is done, or either failed). */
  done(): void;
}

function sizeClass(length: number): number {
  let c = SMALLEST_CLASS;
  while (c < length) c *= 2;
  return c;
}

function heapBuffer(length: number): DeviceBuffer {
  return { buffer: Buffer.allocUnsafeSlow(length), valid: true, release: () => undefined };
}

export class IoBuffers {
  readonly #device: BlockDevice;
  readonly #limitBytes: number;
  readonly #free = new Map<number, DeviceBuffer[]>();
  #cachedBytes = 0;
  #closed = false;

  /** limitBytes: at most this much memory is kept between reads. */
  constructor(device: BlockDevice, limitBytes: number) {
    this.#device = device;
    this.#limitBytes = limitBytes;
  }

  /** A buffer of `length` bytes, or null (closed, or too large to cache). */
  acquire(length: number): IoLease | null {
    if (this.#closed || length <= 0 || length > LARGEST_CACHED) return null;
    const cls = sizeClass(length);
    const list = this.#free.get(cls);
    let b: DeviceBuffer | undefined;
    while ((b = list?.pop()) !== undefined) {
      this.#cachedBytes -= cls;
      if (b.valid) break;
      // Its connection was lost: registered memory from a new one replaces it.
      b.release();
    }
    if (b === undefined) b = this.#allocate(cls);
    const mem = b;
    let returned = false;
    return {
      view: mem.buffer.subarray(0, length),
      done: () => {
        if (returned) return;
        returned = true;
        this.#put(cls, mem);
      },
    };
  }

  /** Releases what is cached; buffers still out are released when they come back. */
  close(): void {
    this.#closed = true;
    for (const list of this.#free.values()) for (const b of list) b.release();
    this.#free.clear();
    this.#cachedBytes = 0;
  }

  #allocate(cls: number): DeviceBuffer {
    if (this.#device.allocate === undefined) return heapBuffer(cls);
    try {
      return this.#device.allocate(cls);
    } catch {
      // No connection up right now: plain memory still works (through a copy).
      return heapBuffer(cls);
    }
  }

  #put(cls: number, b: DeviceBuffer): void {
    if (this.#closed || !b.valid || this.#cachedBytes + cls > this.#limitBytes) {
      b.release();
      return;
    }
    let list = this.#free.get(cls);
    if (list === undefined) this.#free.set(cls, (list = []));
    list.push(b);
    this.#cachedBytes += cls;
  }
}
