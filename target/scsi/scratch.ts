// Page-aligned scratch memory for the I/O the core does with buffers of its
// own: the read in COMPARE AND WRITE and VERIFY, and WRITE SAME's repeated
// pattern. Block-device backends use O_DIRECT, which needs aligned memory, and
// Buffer.alloc gives no alignment guarantee. WebAssembly memory is mapped by
// whole pages, so slices at page multiples from its base are page-aligned.
// Slabs are made lazily and slots reused, so the pool grows only to the peak
// number of such commands in flight.

export const PAGE = 4096;
/** The largest scratch buffer the core needs: 255 x 4 KiB (COMPARE AND WRITE) fits. */
export const SLOT_BYTES = 1024 * 1024;
const WASM_PAGE = 64 * 1024;
const SLOTS_PER_SLAB = 8;

class ScratchPool {
  readonly #free: Buffer[] = [];
  readonly #slots = new WeakSet<ArrayBufferLike>();

  acquire(bytes: number): Buffer {
    if (bytes > SLOT_BYTES) return alignedMemory(bytes);
    let slot = this.#free.pop();
    if (!slot) {
      const slab = alignedMemory(SLOT_BYTES * SLOTS_PER_SLAB);
      this.#slots.add(slab.buffer);
      for (let i = 1; i < SLOTS_PER_SLAB; i++) this.#free.push(slab.subarray(i * SLOT_BYTES, (i + 1) * SLOT_BYTES));
      slot = slab.subarray(0, SLOT_BYTES);
    }
    return slot.subarray(0, bytes);
  }

  release(buf: Buffer): void {
    // Only pooled slots go back; oversized one-off buffers are left to the GC.
    if (!this.#slots.has(buf.buffer)) return;
    const start = buf.byteOffset - (buf.byteOffset % SLOT_BYTES);
    this.#free.push(Buffer.from(buf.buffer, start, SLOT_BYTES));
  }
}

function alignedMemory(bytes: number): Buffer {
  const pages = Math.max(1, Math.ceil(bytes / WASM_PAGE));
  const mem = new WebAssembly.Memory({ initial: pages, maximum: pages });
  return Buffer.from(mem.buffer, 0, bytes);
}

const pool = new ScratchPool();

/**
 * A page-aligned buffer of `bytes` from the pool for data that outlives one
 * call (an NVMe Read's data until its C2HData is written to the socket,
 * target/nvme/io.ts); release() gives it back, once (later calls do nothing).
 */
export function acquireScratch(bytes: number): { buf: Buffer; release: () => void } {
  const buf = pool.acquire(bytes);
  let held = true;
  return {
    buf,
    release: () => {
      if (!held) return;
      held = false;
      pool.release(buf);
    },
  };
}

/** Runs fn with a page-aligned buffer of `bytes`, returned to the pool afterwards. */
export async function withScratch<T>(bytes: number, fn: (buf: Buffer) => Promise<T>): Promise<T> {
  const buf = pool.acquire(bytes);
  try {
    return await fn(buf);
  } finally {
    pool.release(buf);
  }
}
