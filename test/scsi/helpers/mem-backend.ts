// An in-memory Backend for the SCSI core's tests: it tracks which 4 KiB
// granules are allocated (for GET LBA STATUS and UNMAP), records every call,
// can be told to fail the next calls of an operation with an errno code, and
// can hold an operation at a gate so tests can interleave commands.
import type { Backend, BackendError, Extent, WriteOptions } from '../../../target/backend/backend.js';

export type Op = 'read' | 'write' | 'flush' | 'discard' | 'writeZeroes' | 'extent' | 'refreshSize' | 'close';

export interface Call {
  op: Op;
  offset?: number;
  length?: number;
  fua?: boolean;
  unmap?: boolean;
}

const GRANULE = 4096;

export function errnoError(code: string): BackendError {
  const e = new Error(`${code}: injected failure`) as BackendError;
  e.code = code;
  return e;
}

export class MemBackend implements Backend {
  readOnly: boolean;
  canDiscard: boolean;
  readonly calls: Call[] = [];
  #data: Buffer;
  #mapped: Uint8Array;
  #pendingSize: number | undefined;
  readonly #failures: { op: Op; code: string; times: number }[] = [];
  readonly #gates = new Map<Op, () => Promise<void>>();

  constructor(size: number, o: { readOnly?: boolean; canDiscard?: boolean } = {}) {
    this.#data = Buffer.alloc(size);
    this.#mapped = new Uint8Array(Math.ceil(size / GRANULE));
    this.readOnly = o.readOnly ?? false;
    this.canDiscard = o.canDiscard ?? true;
  }

  get size(): number {
    return this.#data.length;
  }

  /** The raw medium, for asserting what was written. */
  get bytes(): Buffer {
    return this.#data;
  }

  failNext(op: Op, code: string, times = 1): void {
    this.#failures.push({ op, code, times });
  }

  /** Holds every `op` until the returned function is called. */
  gate(op: Op): () => void {
    let open!: () => void;
    const opened = new Promise<void>((r) => (open = r));
    this.#gates.set(op, () => opened);
    return () => {
      this.#gates.delete(op);
      open();
    };
  }

  /** The size refreshSize() will find (a resize behind the core's back). */
  resizeOnRefresh(size: number): void {
    this.#pendingSize = size;
  }

  isMapped(offset: number): boolean {
    return this.#mapped[Math.floor(offset / GRANULE)] === 1;
  }

  async #enter(call: Call): Promise<void> {
    this.calls.push(call);
    const gate = this.#gates.get(call.op);
    if (gate) await gate();
    // Yield once so concurrent commands really interleave.
    await new Promise<void>((r) => setImmediate(r));
    const f = this.#failures.find((x) => x.op === call.op);
    if (f) {
      if (--f.times === 0) this.#failures.splice(this.#failures.indexOf(f), 1);
      throw errnoError(f.code);
    }
  }

  #check(offset: number, length: number): void {
    if (offset < 0 || offset + length > this.#data.length) throw errnoError('EOVERFLOW');
  }

  #setMapped(offset: number, length: number, mapped: boolean): void {
    if (length === 0) return;
    if (mapped) {
      for (let g = Math.floor(offset / GRANULE); g <= Math.floor((offset + length - 1) / GRANULE); g++) this.#mapped[g] = 1;
      return;
    }
    // Only whole granules become holes; edges are zeroed but stay allocated.
    for (let g = Math.ceil(offset / GRANULE); (g + 1) * GRANULE <= offset + length; g++) this.#mapped[g] = 0;
  }

  async read(buf: Buffer, offset: number): Promise<void> {
    await this.#enter({ op: 'read', offset, length: buf.length });
    this.#check(offset, buf.length);
    this.#data.copy(buf, 0, offset, offset + buf.length);
  }

  async write(buf: Buffer, offset: number, opts?: WriteOptions): Promise<void> {
    await this.#enter({ op: 'write', offset, length: buf.length, fua: opts?.fua === true });
    this.#check(offset, buf.length);
    buf.copy(this.#data, offset);
    this.#setMapped(offset, buf.length, true);
  }

  async flush(): Promise<void> {
    await this.#enter({ op: 'flush' });
  }

  async discard(offset: number, length: number): Promise<void> {
    await this.#enter({ op: 'discard', offset, length });
    this.#check(offset, length);
    this.#data.fill(0, offset, offset + length);
    this.#setMapped(offset, length, false);
  }

  async writeZeroes(offset: number, length: number, unmap: boolean): Promise<void> {
    await this.#enter({ op: 'writeZeroes', offset, length, unmap });
    this.#check(offset, length);
    this.#data.fill(0, offset, offset + length);
    this.#setMapped(offset, length, !(unmap && this.canDiscard));
  }

  async extent(offset: number): Promise<Extent> {
    await this.#enter({ op: 'extent', offset });
    const g0 = Math.floor(offset / GRANULE);
    const mapped = this.#mapped[g0] === 1;
    let g = g0;
    while (g < this.#mapped.length && (this.#mapped[g] === 1) === mapped) g++;
    return { offset, length: Math.min(g * GRANULE, this.#data.length) - offset, mapped };
  }

  async refreshSize(): Promise<number> {
    await this.#enter({ op: 'refreshSize' });
    if (this.#pendingSize !== undefined) {
      const next = Buffer.alloc(this.#pendingSize);
      this.#data.copy(next, 0, 0, Math.min(next.length, this.#data.length));
      const mapped = new Uint8Array(Math.ceil(this.#pendingSize / GRANULE));
      mapped.set(this.#mapped.subarray(0, mapped.length));
      this.#data = next;
      this.#mapped = mapped;
      this.#pendingSize = undefined;
    }
    return this.#data.length;
  }

  async close(): Promise<void> {
    await this.#enter({ op: 'close' });
  }
}
