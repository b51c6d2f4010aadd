// Memory for NBD read replies and write payloads, kept per client connection
// and reused. A new Buffer per 128 KiB request (zero-filled, then garbage)
// cost the export a copy, a fill and collector pauses of tens of milliseconds
// at the 99th percentile.
//
// The memory is the export's own for as long as it holds it: a payload read
// from the socket exists nowhere else until the device has it (and is sent
// again if an rblk connection is lost meanwhile), and a read's data until its
// reply reached the kernel. Where the device lends memory (BlockDevice.allocate:
// an rblk Volume's session.allocate(), registered on each connection that
// carries its I/O and kept across reconnects), the buffers are that memory, so
// the target RDMA-reads and -writes them directly and each request takes the
// library's common read and write, several to a message (docs/nbd.md
// "Memory"). Otherwise they are plain Buffers, which the device copies.
//
// A read's buffer returns here once its reply reached the kernel (the
// socket's write callback), a write's once the device has the data.
import type { DeviceMemory } from '../block-device.js';

/** Requests larger than this get memory of their own rather than a cached buffer. */
const LARGEST_CACHED = 4 * 1024 * 1024;
const SMALLEST_CLASS = 4096;

export interface IoLease {
  /** Exactly the bytes asked for. */
  readonly view: Buffer;
  /** Gives the memory back (after the reply is written, or the write is done, or either failed). */
  done(): void;
}

/** Where buffers come from: the device's memory, or plain Buffers. */
export type IoAllocator = (length: number) => DeviceMemory;

function plain(length: number): DeviceMemory {
  // Not zero-filled: a write's payload or a read's data fills every byte
  // before anyone reads it, or the request fails and the bytes are never sent.
  return { buffer: Buffer.allocUnsafeSlow(length), release: () => undefined };
}

function sizeClass(length: number): number {
  let c = SMALLEST_CLASS;
  while (c < length) c *= 2;
  return c;
}

export class IoBuffers {
  readonly #limitBytes: number;
  readonly #allocate: IoAllocator;
  readonly #free = new Map<number, DeviceMemory[]>();
  #cachedBytes = 0;
  #closed = false;

  /** limitBytes: at most this much memory is kept between requests. */
  constructor(limitBytes: number, allocate: IoAllocator = plain) {
    this.#limitBytes = limitBytes;
    this.#allocate = allocate;
  }

  /** A buffer of `length` (> 0) bytes; cached memory unless it is larger than 4 MiB. */
  acquire(length: number): IoLease {
    if (!Number.isSafeInteger(length) || length <= 0) throw new RangeError(`an I/O buffer of ${length} bytes`);
    if (length > LARGEST_CACHED) {
      const own = this.#memory(length);
      return { view: own.buffer.subarray(0, length), done: once(() => own.release()) };
    }
    const cls = sizeClass(length);
    let mem = this.#closed ? undefined : this.#free.get(cls)?.pop();
    if (mem !== undefined) this.#cachedBytes -= cls;
    mem ??= this.#memory(cls);
    const owned = mem;
    return { view: owned.buffer.subarray(0, length), done: once(() => this.#put(cls, owned)) };
  }

  /** Gives back what is cached; buffers still out are given back when they come back. */
  close(): void {
    this.#closed = true;
    for (const list of this.#free.values()) for (const m of list) m.release();
    this.#free.clear();
    this.#cachedBytes = 0;
  }

  /** The device's memory where it lends some (a closed session lends none: then plain memory). */
  #memory(length: number): DeviceMemory {
    try {
      return this.#allocate(length);
    } catch {
      return plain(length);
    }
  }

  #put(cls: number, m: DeviceMemory): void {
    if (this.#closed || this.#cachedBytes + cls > this.#limitBytes) {
      m.release();
      return;
    }
    let list = this.#free.get(cls);
    if (list === undefined) this.#free.set(cls, (list = []));
    list.push(m);
    this.#cachedBytes += cls;
  }
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
