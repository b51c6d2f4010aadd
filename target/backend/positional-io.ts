// Positional reads and writes for the file and block-device backends, through
// one of two engines:
//  - io_uring (native/io-ring.ts): an SQE per I/O, submitted in batches once
//    per event-loop turn, completed from the block layer with no thread of
//    ours (fio's and SPDK's uring engines work the same way);
//  - threads: FileHandle.read/write on the libuv pool, one pool thread per
//    I/O in flight (UV_THREADPOOL_SIZE of them), as tgt's bs_rdwr does with
//    its own pthreads.
// Both use the caller's Buffer in place, so registered memory goes to the
// disk without a copy. "auto" takes io_uring when this process may open a
// ring, and says why not when it falls back (docs/operations.md).
import type { FileHandle } from 'node:fs/promises';
import { IoRing } from '../../native/io-ring.js';
import { backendError, hasCode } from './backend-error.js';

export type IoEngine = 'io_uring' | 'threads';
export type IoEngineChoice = IoEngine | 'auto';

export interface PositionalTarget {
  /** Names the volume in error messages. */
  what: string;
  /** Set for O_DIRECT descriptors: the memory alignment that a bare EINVAL means was missed. */
  directAlignment: number | null;
}

// With offset and length already checked, an EINVAL from O_DIRECT I/O means the
// buffer's address is misaligned; say so rather than pass on a bare EINVAL.
function explain(err: unknown, target: PositionalTarget, op: string, length: number, offset: number): unknown {
  if (target.directAlignment === null || !hasCode(err, 'EINVAL')) return err;
  return backendError(
    'EINVAL',
    `${target.what}: O_DIRECT ${op} of ${length} bytes at offset ${offset} was refused (EINVAL): ` +
      `the buffer's memory address must be aligned to ${target.directAlignment} bytes`,
  );
}

/** The engine a volume got (PositionalIo.engine): a ring, or the thread pool and why. */
export interface EngineSelection {
  ring: IoRing | null;
  fallbackReason: string | null;
}

/** One pread/pwrite: resolves with the bytes moved. */
type Transfer = (buf: Buffer, position: number) => Promise<number>;

/**
 * The descriptors of one volume and the engine that moves their bytes. `fh`
 * takes every I/O; on the thread pool, `dsync` (opened O_DSYNC) takes FUA
 * writes, where io_uring sets RWF_DSYNC on the write itself instead (the same
 * per-write O_DSYNC: IOCB_DSYNC, REQ_FUA on a block device).
 */
export class PositionalIo {
  readonly engine: IoEngine;
  /** Why "auto" fell back to threads, for the log; null otherwise. */
  readonly fallbackReason: string | null;
  readonly #ring: IoRing | null;
  readonly #read: Transfer;
  readonly #write: Transfer;
  readonly #writeFua: Transfer;

  /**
   * The engine a volume gets: a ring when `choice` allows and one opens. An
   * explicit io_uring that cannot open is an error; "auto" falls back to the
   * thread pool and keeps the reason. Call before opening the descriptors: a
   * ring needs no O_DSYNC descriptor.
   */
  static engine(choice: IoEngineChoice, what: string): EngineSelection {
    if (choice === 'threads') return { ring: null, fallbackReason: null };
    try {
      return { ring: IoRing.open(), fallbackReason: null };
    } catch (e) {
      if (choice === 'io_uring') throw backendError(hasCode(e, 'EPERM') ? 'EPERM' : 'EOPNOTSUPP', `${what}: io_engine io_uring: ${(e as Error).message}`);
      return { ring: null, fallbackReason: (e as Error).message };
    }
  }

  constructor(
    fh: FileHandle,
    dsync: FileHandle | null,
    readonly target: PositionalTarget,
    engine: EngineSelection,
  ) {
    const ring = engine.ring;
    this.#ring = ring;
    this.fallbackReason = engine.fallbackReason;
    if (ring !== null) {
      const fd = fh.fd;
      this.engine = 'io_uring';
      this.#read = (buf, pos) => ring.read(fd, buf, pos);
      this.#write = (buf, pos) => ring.write(fd, buf, pos, false);
      this.#writeFua = (buf, pos) => ring.write(fd, buf, pos, true);
    } else {
      this.engine = 'threads';
      this.#read = (buf, pos) => fh.read(buf, 0, buf.length, pos).then((r) => r.bytesRead);
      this.#write = (buf, pos) => fh.write(buf, 0, buf.length, pos).then((r) => r.bytesWritten);
      const d = dsync ?? fh;
      this.#writeFua = (buf, pos) => d.write(buf, 0, buf.length, pos).then((r) => r.bytesWritten);
    }
  }

  /**
   * Fills buf from offset. A read that reaches end of file fails with EIO rather
   * than returning zeroes: the file shrank underneath the volume, so data that
   * was acknowledged is gone, and a medium error (SBC-4 4.18, 03 11/00) is the
   * honest answer (tgt's bs_rdwr.c and nvmet's io-cmd-file.c fail short reads too).
   */
  read(buf: Buffer, offset: number): Promise<void> {
    return this.#all('read', this.#read, buf, offset, (at) =>
      `end of file at byte ${at} while reading ${buf.length} bytes at offset ${offset} (the backing store shrank)`,
    );
  }

  /** Writes all of buf at offset; fua: durable before it resolves (SBC-4 5.40). */
  write(buf: Buffer, offset: number, fua = false): Promise<void> {
    return this.#all('write', fua ? this.#writeFua : this.#write, buf, offset, (at) =>
      `write of ${buf.length} bytes at offset ${offset} made no progress at byte ${at}`,
    );
  }

  /** Repeats `transfer` until all of buf has moved; a transfer of 0 bytes is EIO with `stalled`'s words. */
  async #all(op: 'read' | 'write', transfer: Transfer, buf: Buffer, offset: number, stalled: (at: number) => string): Promise<void> {
    let done = 0;
    while (done < buf.length) {
      let n: number;
      try {
        n = await transfer(done === 0 ? buf : buf.subarray(done), offset + done);
      } catch (err) {
        throw explain(err, this.target, op, buf.length, offset);
      }
      if (n === 0) throw backendError('EIO', `${this.target.what}: ${stalled(offset + done)}`);
      done += n;
    }
  }

  /** Frees the ring, after its I/O in flight; the descriptors stay the backend's to close. */
  async close(): Promise<void> {
    await this.#ring?.close();
  }
}
