// Page-aligned data buffers for one iSCSI connection. A volume opened with
// O_DIRECT needs the buffer's address aligned too (open(2), "O_DIRECT"; the
// volume's `direct`, docs/operations.md "The configuration file"),
// and a plain Buffer's is not; rblk's own front end gets aligned memory from
// its registered pool, this is the iSCSI portal's equivalent. Buffers are kept
// by power-of-two size class and reused, so a steady load allocates nothing;
// how much a connection may hold at once is its budget's business
// (connection.ts), not this cache's.
import { pageAligned } from '../../native/loop-fabric.js';

const PAGE = 4096;
/** Classes up to this size are cut from shared slabs; larger ones get their own mapping. */
const SLAB_CLASS_MAX = 64 * 1024;
const SLAB = 1024 * 1024;
/** Free buffers kept per class beyond what is in use (the rest go back to the GC). */
const KEEP_PER_CLASS = 64;

function classOf(length: number): number {
  let s = PAGE;
  while (s < length) s *= 2;
  return s;
}

export class AlignedBuffers {
  readonly #free = new Map<number, Buffer[]>();

  /** A page-aligned buffer of exactly `length` bytes (a view of its size class). */
  take(length: number): Buffer {
    const size = classOf(Math.max(1, length));
    const list = this.#free.get(size);
    const whole = list?.pop() ?? this.#fresh(size);
    return whole.subarray(0, length);
  }

  /** Back to its class; the buffer must not be used afterwards. */
  give(buffer: Buffer): void {
    const size = classOf(Math.max(1, buffer.length));
    const whole = Buffer.from(buffer.buffer, buffer.byteOffset, size);
    const list = this.#free.get(size) ?? [];
    if (list.length < KEEP_PER_CLASS) list.push(whole);
    this.#free.set(size, list);
  }

  #fresh(size: number): Buffer {
    if (size > SLAB_CLASS_MAX) return pageAligned(size);
    // One slab, cut into buffers of this class: all but the first wait in the free list.
    const slab = pageAligned(SLAB);
    const list = this.#free.get(size) ?? [];
    for (let at = size; at + size <= SLAB; at += size) list.push(slab.subarray(at, at + size));
    this.#free.set(size, list);
    return slab.subarray(0, size);
  }
}
