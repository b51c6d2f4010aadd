// What the file and block-device backends share: descriptors on the backing
// store (a second, O_DSYNC one for FUA on the thread pool), the store's lock
// (store-lock.ts; docs/backends.md "One daemon per store"), the engine that
// moves the bytes (positional-io.ts), the gate that keeps close() from racing
// I/O, and the checks every read and write passes. Each subclass adds how its
// kind of store discards, zeroes, maps extents and learns its size.
import type { FileHandle } from 'node:fs/promises';
import type { Backend, Extent, FastPathTarget, WriteOptions } from './backend.js';
import { backendError } from './backend-error.js';
import { IoGate } from './io-gate.js';
import { PositionalIo, type EngineSelection, type IoEngine, type PositionalTarget } from './positional-io.js';
import { checkAligned, checkRange } from './range-check.js';
import type { StoreLock } from './store-lock.js';

export interface DescriptorBackendState {
  /** Names the volume in messages: "file /path", "block device /dev/x". */
  what: string;
  path: string;
  readOnly: boolean;
  direct: boolean;
  logicalBlockSize: number;
  canDiscard: boolean;
  size: number;
}

export abstract class DescriptorBackend implements Backend {
  readonly readOnly: boolean;
  readonly canDiscard: boolean;
  readonly path: string;
  readonly direct: boolean;
  readonly logicalBlockSize: number;
  protected readonly fh: FileHandle;
  protected readonly gate: IoGate;
  protected readonly target: PositionalTarget;
  protected currentSize: number;
  readonly #dsync: FileHandle | null;
  readonly #io: PositionalIo;
  readonly #lock: StoreLock | null;

  protected constructor(state: DescriptorBackendState, fh: FileHandle, dsync: FileHandle | null, engine: EngineSelection, lock: StoreLock | null) {
    this.path = state.path;
    this.readOnly = state.readOnly;
    this.direct = state.direct;
    this.logicalBlockSize = state.logicalBlockSize;
    this.canDiscard = state.canDiscard;
    this.currentSize = state.size;
    this.fh = fh;
    this.#dsync = dsync;
    this.#lock = lock;
    this.gate = new IoGate(state.what);
    this.target = { what: state.what, directAlignment: state.direct ? state.logicalBlockSize : null };
    this.#io = new PositionalIo(fh, dsync, this.target, engine);
  }

  /** What open() had opened, closed when it fails midway. */
  protected static async abandon(engine: EngineSelection | null, dsync: FileHandle | null, fh: FileHandle, lock: StoreLock | null): Promise<void> {
    await engine?.ring?.close();
    if (dsync !== null) await dsync.close();
    await (lock === null ? fh.close() : lock.closeWith(fh));
  }

  get size(): number {
    return this.currentSize;
  }

  /**
   * What the native fast path needs to read and write this store itself
   * (docs/target.md "Fast path"): the descriptor, and the O_DIRECT alignment
   * (1 when buffered). Null once close() has begun.
   */
  get fastPathTarget(): FastPathTarget | null {
    if (this.gate.closed) return null;
    return { fd: this.fh.fd, align: this.direct ? this.logicalBlockSize : 1 };
  }

  /** Which engine moves this volume's bytes (io_uring, or the thread pool). */
  get ioEngine(): IoEngine {
    return this.#io.engine;
  }

  /** Why io_engine "auto" fell back to the thread pool, or null. */
  get ioEngineFallback(): string | null {
    return this.#io.fallbackReason;
  }

  read(buf: Buffer, offset: number): Promise<void> {
    return this.gate.run(async () => {
      this.checkIo('read', offset, buf.length);
      await this.#io.read(buf, offset);
    });
  }

  write(buf: Buffer, offset: number, opts?: WriteOptions): Promise<void> {
    return this.gate.run(async () => {
      this.checkWritable('write');
      this.checkIo('write', offset, buf.length);
      await this.#io.write(buf, offset, opts?.fua === true);
    });
  }

  /**
   * fdatasync: every completed write is durable (SBC-4 5.26 SYNCHRONIZE
   * CACHE); on a block device it also issues a cache flush.
   */
  flush(): Promise<void> {
    return this.gate.run(() => this.fh.datasync());
  }

  abstract discard(offset: number, length: number): Promise<void>;
  abstract writeZeroes(offset: number, length: number, unmap: boolean): Promise<void>;
  abstract extent(offset: number): Promise<Extent>;
  abstract refreshSize(): Promise<number>;

  async close(): Promise<void> {
    if (!(await this.gate.close())) return;
    try {
      await this.#io.close();
    } finally {
      try {
        if (this.#dsync !== null) await this.#dsync.close();
      } finally {
        await (this.#lock === null ? this.fh.close() : this.#lock.closeWith(this.fh));
      }
    }
  }

  protected checkWritable(op: string): void {
    if (this.readOnly) throw backendError('EROFS', `${this.target.what}: ${op} refused: the volume is read-only`);
  }

  protected checkIo(op: string, offset: number, length: number): void {
    checkRange(this.target.what, op, offset, length, this.currentSize);
    if (this.direct) checkAligned(this.target.what, `O_DIRECT ${op}`, offset, length, this.logicalBlockSize);
  }
}
