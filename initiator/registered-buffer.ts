// Zero-copy I/O memory: a region registered once on one of the session's
// connections (DESIGN.md "Memory"). A read or write whose buffer lies in such
// a region is sent with a descriptor naming it, so the target RDMA-writes or
// -reads the caller's bytes directly; nothing is copied through the I/O pool.
import type { IoBuffer, RemoteSegment } from './transport/transport.js';

/** Finds the registered buffer a Buffer view lies in (any subarray of one counts). */
const byMemory = new WeakMap<ArrayBufferLike, RegisteredBuffer>();

/**
 * Memory from `session.allocate()`. Pass `buffer` (or any subarray of it) to
 * `volume.read()` / `volume.write()` for zero-copy I/O.
 *
 * The registration belongs to one connection of the session. When that
 * connection is lost, the region is deregistered with it (on libfabric the
 * memory is unmapped and `buffer` reads as empty): `valid` turns false, and
 * I/O through it fails with CONNECTION_LOST. Allocate again after the session
 * reconnects.
 */
export class RegisteredBuffer {
  /** The registered bytes. */
  readonly buffer: Buffer;
  readonly length: number;
  #io: IoBuffer | null;
  readonly #connectionAlive: () => boolean;
  readonly #onRelease: (b: RegisteredBuffer) => void;

  /** @internal Built by Session.allocate. */
  constructor(io: IoBuffer, length: number, readonly channel: number, connectionAlive: () => boolean, onRelease: (b: RegisteredBuffer) => void) {
    this.#io = io;
    this.length = length;
    this.buffer = io.buffer.subarray(0, length);
    this.#connectionAlive = connectionAlive;
    this.#onRelease = onRelease;
    byMemory.set(this.buffer.buffer, this);
  }

  /** False once released or once its connection is gone. */
  get valid(): boolean {
    return this.#io !== null && this.#connectionAlive();
  }

  /** @internal The descriptors for [offset, offset + length) of the buffer. */
  segments(offset: number, length: number): RemoteSegment[] {
    if (this.#io === null) throw new RangeError('the registered buffer was released');
    return this.#io.segments(offset, length);
  }

  /** @internal An IoBuffer for one command over part of this region. */
  view(offset: number, length: number): IoBuffer {
    return {
      buffer: this.buffer.subarray(offset, offset + length),
      segments: (o = 0, l = length - o) => this.segments(offset + o, l),
      release: () => undefined,
    };
  }

  /** Deregisters the memory. Do not use `buffer` afterwards. */
  release(): void {
    const io = this.#io;
    if (io === null) return;
    this.#io = null;
    byMemory.delete(this.buffer.buffer);
    this.#onRelease(this);
    io.release();
  }

  /** @internal The registered buffer `b` is a view of, and b's offset in it. */
  static find(b: Buffer): { registered: RegisteredBuffer; offset: number } | undefined {
    const registered = byMemory.get(b.buffer);
    if (registered === undefined) return undefined;
    const offset = b.byteOffset - registered.buffer.byteOffset;
    if (offset < 0 || offset + b.length > registered.length) return undefined;
    return { registered, offset };
  }
}
