// Memory for NBD read replies and write payloads, kept per client connection
// and reused. A new Buffer per 128 KiB request (zero-filled, then garbage)
// cost the export a copy, a fill and collector pauses of tens of milliseconds
// at the 99th percentile.
//
// The memory is the export's own, never a device's: an rblk Volume's
// registered memory belongs to one fabric connection and is detached when
// that connection is lost, which can happen while a write's payload still has
// to be re-sent or while a read's reply is still being written to the socket.
// A payload read from the socket exists nowhere else, so it must live in
// memory that outlives any connection until the device has it. The Volume
// copies through its connection's I/O pool instead (docs/nbd.md "Memory").
//
// A read's buffer returns here once its reply reached the kernel (the
// socket's write callback), a write's once the device has the data.

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

export class IoBuffers {
  readonly #limitBytes: number;
  readonly #free = new Map<number, Buffer[]>();
  #cachedBytes = 0;
  #closed = false;

  /** limitBytes: at most this much memory is kept between requests. */
  constructor(limitBytes: number) {
    this.#limitBytes = limitBytes;
  }

  /** A buffer of `length` (> 0) bytes; cached memory unless it is larger than 4 MiB. */
  acquire(length: number): IoLease {
    if (!Number.isSafeInteger(length) || length <= 0) throw new RangeError(`an I/O buffer of ${length} bytes`);
    if (length > LARGEST_CACHED) return { view: Buffer.allocUnsafeSlow(length), done: () => undefined };
    const cls = sizeClass(length);
    let mem = this.#closed ? undefined : this.#free.get(cls)?.pop();
    if (mem !== undefined) this.#cachedBytes -= cls;
    // Not zero-filled: a write's payload or a read's data fills every byte
    // before anyone reads it, or the request fails and the bytes are never sent.
    mem ??= Buffer.allocUnsafeSlow(cls);
    const owned = mem;
    let returned = false;
    return {
      view: owned.subarray(0, length),
      done: () => {
        if (returned) return;
        returned = true;
        this.#put(cls, owned);
      },
    };
  }

  /** Drops what is cached; buffers still out are dropped when they come back. */
  close(): void {
    this.#closed = true;
    this.#free.clear();
    this.#cachedBytes = 0;
  }

  #put(cls: number, b: Buffer): void {
    if (this.#closed || this.#cachedBytes + cls > this.#limitBytes) return;
    let list = this.#free.get(cls);
    if (list === undefined) this.#free.set(cls, (list = []));
    list.push(b);
    this.#cachedBytes += cls;
  }
}
