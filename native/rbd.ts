// Promise API over the addon's RBD image (native/src/rbd-image.cc), for the rbd
// backend (target/backend/rbd/). One promise per call, the open and close
// included; each buffer stays referenced here until its completion, so librbd
// never reads or writes memory that JS has let go. Errors carry .code, .errno
// and .op like every native error; a miscompare carries .mismatchOffset.
import { getSystemErrorName } from 'node:util';
import { rbdAddon, type NativeRbdImage, type NativeRbdOpenOptions } from './binding.js';

export type RbdOpenOptions = NativeRbdOpenOptions;

/** A librados or librbd call that failed, with the errno it returned. */
export class RbdError extends Error {
  readonly code: string;
  readonly errno: number;
  readonly op: string;
  /** COMPARE AND WRITE (EILSEQ): the first byte that differed, from the start of the request. */
  mismatchOffset?: number;
  constructor(errno: number, op: string, detail?: string) {
    let code: string;
    try {
      code = getSystemErrorName(-errno);
    } catch {
      code = `E${errno}`;
    }
    super(`${op}: ${code} (errno ${errno})${detail === undefined ? '' : `: ${detail}`}`);
    this.name = 'RbdError';
    this.code = code;
    this.errno = errno;
    this.op = op;
  }
}

interface Pending {
  resolve: (r: { result: number; offset: number }) => void;
  reject: (e: Error) => void;
  op: string;
  /** Held so the memory outlives the call. */
  buffers: Uint8Array[];
}

export class RbdImage {
  readonly #image: NativeRbdImage;
  readonly #watchToken: number;
  readonly #pending = new Map<number, Pending>();
  #next = 1;
  #onChange: (() => void) | null = null;

  private constructor() {
    const { RbdImage: Ctor } = rbdAddon();
    this.#watchToken = Ctor.WATCH_TOKEN;
    this.#image = new Ctor((n) => this.#complete(n));
  }

  /**
   * Connects to the cluster and opens the image; fails with the step that failed
   * (rados_connect ETIMEDOUT when no monitor answers within the timeout).
   */
  static async open(options: RbdOpenOptions): Promise<RbdImage> {
    const image = new RbdImage();
    await image.#call('rbd open', [], (t) => image.#image.open(options, t)).catch((e: unknown) => {
      if (e instanceof RbdError) {
        const step = image.#image.failedStep;
        throw new RbdError(e.errno, step === '' ? 'rbd open' : step, `${options.pool}/${options.namespace ? `${options.namespace}/` : ''}${options.image}`);
      }
      throw e;
    });
    return image;
  }

  /** Called when librbd sees the image's header change (rbd_update_watch): a resize, say. */
  onChange(fn: (() => void) | null): void {
    this.#onChange = fn;
  }

  get inFlight(): number {
    return this.#pending.size;
  }

  size(): number {
    return this.#image.size();
  }

  /** `<cluster fsid>/<pool id>/<image id>`: the same from every host, for the image's life. */
  id(): string {
    return this.#image.id();
  }

  async read(buf: Uint8Array, offset: number): Promise<void> {
    await this.#call('rbd_aio_read', [buf], (t) => this.#image.read(buf, offset, t));
  }

  async write(buf: Uint8Array, offset: number): Promise<void> {
    await this.#call('rbd_aio_write', [buf], (t) => this.#image.write(buf, offset, t));
  }

  async flush(): Promise<void> {
    await this.#call('rbd_aio_flush', [], (t) => this.#image.flush(t));
  }

  /** Deallocates the objects the range covers whole and zeroes the rest. */
  async writeZeroes(offset: number, length: number): Promise<void> {
    await this.#call('rbd_aio_write_zeroes', [], (t) => this.#image.writeZeroes(offset, length, t));
  }

  async writeSame(pattern: Uint8Array, offset: number, length: number): Promise<void> {
    await this.#call('rbd_aio_writesame', [pattern], (t) => this.#image.writeSame(pattern, offset, length, t));
  }

  /** Atomic on the OSD; a miscompare rejects with EILSEQ and mismatchOffset. */
  async compareAndWrite(compare: Uint8Array, data: Uint8Array, offset: number): Promise<void> {
    await this.#call('rbd_aio_compare_and_write', [compare, data], (t) => this.#image.compareAndWrite(compare, data, offset, t));
  }

  /** Waits for nothing: the caller has let every I/O complete. Disconnects from the cluster. */
  async close(): Promise<void> {
    this.#onChange = null;
    await this.#call('rbd_close', [], (t) => this.#image.close(t));
  }

  #call(op: string, buffers: Uint8Array[], submit: (token: number) => void): Promise<{ result: number; offset: number }> {
    const token = this.#next;
    this.#next = this.#next >= 0x7fffffff ? 1 : this.#next + 1;
    return new Promise((resolve, reject) => {
      submit(token);
      this.#pending.set(token, { resolve, reject, op, buffers });
    });
  }

  #complete(count: number): void {
    const c = this.#image.completions;
    let changed = false;
    for (let i = 0; i < count; i++) {
      const token = c[3 * i];
      const result = c[3 * i + 1];
      const offset = c[3 * i + 2];
      if (token === this.#watchToken) {
        changed = true;
        continue;
      }
      const p = this.#pending.get(token);
      if (p === undefined) continue;
      this.#pending.delete(token);
      if (result < 0) {
        const e = new RbdError(-result, p.op);
        if (e.code === 'EILSEQ') e.mismatchOffset = offset;
        p.reject(e);
      } else p.resolve({ result, offset });
    }
    if (changed) this.#onChange?.();
  }
}
