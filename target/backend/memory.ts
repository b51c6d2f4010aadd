// A RAM-backed volume for tests and demos: a sparse map of fixed-size chunks.
// Chunks that were never written, or were discarded whole, read as zeroes and
// report as unmapped, so thin-provisioning paths (UNMAP, GET LBA STATUS) behave
// as they do on a sparse file.
import type { Backend, Extent, WriteOptions } from './backend.js';
import { backendError } from './backend-error.js';
import { IoGate } from './io-gate.js';
import { checkRange } from './range-check.js';

export interface MemoryBackendOptions {
  /** Bytes. */
  size: number;
  readOnly?: boolean;
  /** Allocation and extent granularity in bytes; 4096 unless given. */
  chunkSize?: number;
  /** Names the volume in error messages. */
  name?: string;
}

export class MemoryBackend implements Backend {
  readonly readOnly: boolean;
  readonly canDiscard = true;
  readonly chunkSize: number;
  readonly #what: string;
  readonly #gate: IoGate;
  readonly #chunks = new Map<number, Buffer>();
  #size: number;
  // The size the "medium" has now; size only follows it on refreshSize(), as a
  // file or device that grows underneath a volume is only seen on a rescan.
  #capacity: number;

  constructor(opts: MemoryBackendOptions) {
    this.#what = `memory volume ${opts.name ?? ''}`.trimEnd();
    if (!Number.isSafeInteger(opts.size) || opts.size < 0) {
      throw backendError('EINVAL', `${this.#what}: size ${opts.size} must be a non-negative integer`);
    }
    const chunkSize = opts.chunkSize ?? 4096;
    if (!Number.isSafeInteger(chunkSize) || chunkSize <= 0) {
      throw backendError('EINVAL', `${this.#what}: chunk size ${chunkSize} must be a positive integer`);
    }
    this.chunkSize = chunkSize;
    this.readOnly = opts.readOnly ?? false;
    this.#size = opts.size;
    this.#capacity = opts.size;
    this.#gate = new IoGate(this.#what);
  }

  get size(): number {
    return this.#size;
  }

  /** Bytes held in chunks (what a sparse file's st_blocks would show). */
  get allocatedBytes(): number {
    return this.#chunks.size * this.chunkSize;
  }

  /** Changes the medium's size; the volume reports it after refreshSize(). */
  resize(bytes: number): void {
    if (!Number.isSafeInteger(bytes) || bytes < 0) {
      throw backendError('EINVAL', `${this.#what}: size ${bytes} must be a non-negative integer`);
    }
    this.#capacity = bytes;
  }

  read(buf: Buffer, offset: number): Promise<void> {
    return this.#gate.run(async () => {
      checkRange(this.#what, 'read', offset, buf.length, this.#size);
      this.#forEachPiece(offset, buf.length, (index, start, end, at) => {
        const chunk = this.#chunks.get(index);
        if (chunk === undefined) buf.fill(0, at, at + end - start);
        else chunk.copy(buf, at, start, end);
      });
    });
  }

  write(buf: Buffer, offset: number, _opts?: WriteOptions): Promise<void> {
    return this.#gate.run(async () => {
      this.#checkWritable('write');
      checkRange(this.#what, 'write', offset, buf.length, this.#size);
      this.#forEachPiece(offset, buf.length, (index, start, end, at) => {
        let chunk = this.#chunks.get(index);
        if (chunk === undefined) {
          chunk = Buffer.alloc(this.chunkSize);
          this.#chunks.set(index, chunk);
        }
        buf.copy(chunk, start, at, at + end - start);
      });
    });
  }

  /** Memory is as durable as it gets: FUA and SYNCHRONIZE CACHE have nothing to do. */
  flush(): Promise<void> {
    return this.#gate.run(async () => undefined);
  }

  discard(offset: number, length: number): Promise<void> {
    return this.#gate.run(async () => {
      this.#checkWritable('discard');
      checkRange(this.#what, 'discard', offset, length, this.#size);
      this.#deallocate(offset, length);
    });
  }

  writeZeroes(offset: number, length: number, unmap: boolean): Promise<void> {
    return this.#gate.run(async () => {
      this.#checkWritable('write zeroes');
      checkRange(this.#what, 'write zeroes', offset, length, this.#size);
      if (unmap) {
        this.#deallocate(offset, length);
        return;
      }
      // Without unmap the allocated chunks stay allocated, as with
      // FALLOC_FL_ZERO_RANGE; holes already read as zeroes.
      this.#forEachAllocatedPiece(offset, length, (chunk, start, end) => chunk.fill(0, start, end));
    });
  }

  extent(offset: number): Promise<Extent> {
    return this.#gate.run(async () => {
      if (!Number.isSafeInteger(offset) || offset < 0 || offset >= this.#size) {
        throw backendError('EINVAL', `${this.#what}: extent offset ${offset} is outside the volume (${this.#size} bytes)`);
      }
      const first = Math.floor(offset / this.chunkSize);
      const mapped = this.#chunks.has(first);
      let end: number;
      if (mapped) {
        end = first + 1;
        while (this.#chunks.has(end)) end++;
      } else {
        // A hole runs to the next allocated chunk; search the allocated chunks
        // rather than step through a possibly huge hole.
        end = Infinity;
        for (const index of this.#chunks.keys()) if (index > first && index < end) end = index;
      }
      return { offset, length: Math.min(end * this.chunkSize, this.#size) - offset, mapped };
    });
  }

  refreshSize(): Promise<number> {
    return this.#gate.run(async () => {
      if (this.#capacity < this.#size) this.#deallocate(this.#capacity, this.#size - this.#capacity);
      this.#size = this.#capacity;
      return this.#size;
    });
  }

  async close(): Promise<void> {
    if (await this.#gate.close()) this.#chunks.clear();
  }

  #checkWritable(op: string): void {
    if (this.readOnly) throw backendError('EROFS', `${this.#what}: ${op} refused: the volume is read-only`);
  }

  // Whole chunks are dropped; the partial chunks at either end are zeroed and
  // stay allocated, as a filesystem does with the partial blocks of a punched hole.
  #deallocate(offset: number, length: number): void {
    this.#forEachAllocatedPiece(offset, length, (chunk, start, end, index) => {
      if (start === 0 && end === this.chunkSize) this.#chunks.delete(index);
      else chunk.fill(0, start, end);
    });
  }

  // Like #forEachPiece but only over allocated chunks, walking whichever is
  // shorter, the range or the map: a whole-volume UNMAP of a large, mostly
  // empty volume (mkfs does one) must not step through every chunk.
  #forEachAllocatedPiece(offset: number, length: number, fn: (chunk: Buffer, start: number, end: number, index: number) => void): void {
    if (length === 0) return;
    const first = Math.floor(offset / this.chunkSize);
    const last = Math.floor((offset + length - 1) / this.chunkSize);
    const visit = (index: number): void => {
      const chunk = this.#chunks.get(index);
      if (chunk === undefined) return;
      const start = index === first ? offset - index * this.chunkSize : 0;
      const end = index === last ? offset + length - index * this.chunkSize : this.chunkSize;
      fn(chunk, start, end, index);
    };
    if (last - first + 1 <= this.#chunks.size) {
      for (let index = first; index <= last; index++) visit(index);
    } else {
      for (const index of [...this.#chunks.keys()]) if (index >= first && index <= last) visit(index);
    }
  }

  /** Calls fn for each chunk the byte range touches: chunk index, range within it, position in the range. */
  #forEachPiece(offset: number, length: number, fn: (index: number, start: number, end: number, at: number) => void): void {
    let at = 0;
    while (at < length) {
      const pos = offset + at;
      const index = Math.floor(pos / this.chunkSize);
      const start = pos - index * this.chunkSize;
      const end = Math.min(this.chunkSize, start + (length - at));
      fn(index, start, end, at);
      at += end - start;
    }
  }
}
