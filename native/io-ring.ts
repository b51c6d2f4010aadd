// Promise API over the addon's io_uring (native/src/uring/io-ring.cc), for the file
// and block-device backends. One promise per I/O; the ring submits an I/O on
// an idle ring at once and, under load, everything queued in a turn of the
// event loop with one io_uring_enter, and delivers completions in batches. Each buffer stays referenced here until its
// completion, so the kernel never writes into memory that JS has let go.
//
// A ring may be refused where io_uring is (a seccomp profile, such as
// Docker's default since 2023, or kernel.io_uring_disabled=2): open() throws
// then, and callers fall back to the thread pool (PositionalIo.engine in
// target/backend/positional-io.ts).
import { getSystemErrorName } from 'node:util';
import { uringAddon, type NativeIoRing } from './binding.js';

/** An I/O the kernel failed, with the errno it gave. */
export class IoRingError extends Error {
  readonly code: string;
  readonly errno: number;
  readonly op: string;
  constructor(errno: number, op: string) {
    let code: string;
    try {
      code = getSystemErrorName(-errno);
    } catch {
      code = `E${errno}`;
    }
    super(`${op}: ${code} (errno ${errno})`);
    this.name = 'IoRingError';
    this.code = code;
    this.errno = errno;
    this.op = op;
  }
}

interface Pending {
  resolve: (n: number) => void;
  reject: (e: Error) => void;
  op: string;
  /** Held so the memory outlives the I/O. */
  buffer: Uint8Array | null;
}

const DEFAULT_ENTRIES = 256;

export class IoRing {
  readonly #ring: NativeIoRing;
  readonly #pending: (Pending | undefined)[] = [];
  readonly #free: number[] = [];
  #closed = false;
  #idle: (() => void) | null = null;
  #count = 0;

  private constructor(entries: number) {
    this.#ring = new (uringAddon().IoRing)(entries, (n) => this.#complete(n));
  }

  /** Opens a ring with `entries` submission slots (more may be queued: a full ring submits at once). */
  static open(entries = DEFAULT_ENTRIES): IoRing {
    return new IoRing(entries);
  }

  /** Whether this process may use io_uring at all (a ring opens), and if not, why. */
  static probe(): { ok: true } | { ok: false; reason: string } {
    try {
      // close() settles at once with nothing in flight; a ring that opened is
      // the answer, so a failure to close it is not, and must not escape.
      IoRing.open(1)
        .close()
        .catch(() => undefined);
      return { ok: true };
    } catch (e) {
      return { ok: false, reason: (e as Error).message };
    }
  }

  get features(): NativeIoRing['features'] {
    return this.#ring.features;
  }

  /** I/Os queued or in the kernel. */
  get inFlight(): number {
    return this.#count;
  }

  /** pread: resolves with the bytes read (fewer at end of file, as pread). */
  read(fd: number, buffer: Uint8Array, offset: number): Promise<number> {
    return this.#start('read', buffer, (t) => this.#ring.read(fd, buffer, offset, t));
  }

  /** pwrite; dsync makes this one write durable before it completes (RWF_DSYNC). */
  write(fd: number, buffer: Uint8Array, offset: number, dsync = false): Promise<number> {
    return this.#start('write', buffer, (t) => this.#ring.write(fd, buffer, offset, t, dsync));
  }

  fsync(fd: number, datasync = true): Promise<void> {
    return this.#start(datasync ? 'fdatasync' : 'fsync', null, (t) => this.#ring.fsync(fd, t, datasync)).then(() => undefined);
  }

  /** Waits for every I/O in flight, then frees the ring. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#count > 0) await new Promise<void>((resolve) => (this.#idle = resolve));
    this.#ring.close();
  }

  #start(op: string, buffer: Uint8Array | null, post: (token: number) => void): Promise<number> {
    if (this.#closed) return Promise.reject(new IoRingError(9 /* EBADF */, `io_uring ${op}`));
    const token = this.#free.length > 0 ? this.#free.pop()! : this.#pending.length;
    return new Promise<number>((resolve, reject) => {
      try {
        post(token);
      } catch (e) {
        this.#free.push(token);
        reject(e);
        return;
      }
      this.#pending[token] = { resolve, reject, op, buffer };
      this.#count++;
    });
  }

  #complete(n: number): void {
    const c = this.#ring.completions;
    for (let i = 0; i < n; i++) {
      const token = c[2 * i];
      const res = c[2 * i + 1];
      const p = this.#pending[token];
      if (p === undefined) continue;
      this.#pending[token] = undefined;
      this.#free.push(token);
      this.#count--;
      if (res < 0) p.reject(new IoRingError(-res, `io_uring ${p.op}`));
      else p.resolve(res);
    }
    if (this.#count === 0 && this.#idle !== null) {
      const idle = this.#idle;
      this.#idle = null;
      idle();
    }
  }
}
