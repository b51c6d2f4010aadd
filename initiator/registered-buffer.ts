// Zero-copy I/O memory: a region registered once on one of the session's
// connections (docs/architecture.md "Memory"). A read or write whose buffer lies in such
// a region is sent with a descriptor naming it, so the target RDMA-writes or
// -reads the caller's bytes directly; nothing is copied through the I/O pool.
import type { DataDescriptor } from '../protocol/wire/index.js';
import { TransportError, type QueueAddressWords } from './connection.js';
import type { IoBuffer } from './transport/transport.js';

/**
 * Finds the registered buffer a Buffer view lies in (any subarray of one
 * counts). Entries stay after release: a view of released memory must still
 * be recognised, because it reads as empty and would otherwise pass for a
 * valid zero-length Buffer.
 */
const byMemory = new WeakMap<ArrayBufferLike, RegisteredBuffer>();

/**
 * Copies `length` bytes between a Buffer and registered memory (a pool chunk
 * or a RegisteredBuffer), or throws a TransportError when either side has
 * fewer: registered memory is detached when its region is closed, which on
 * libfabric happens with its connection (native/src/memory-region.cc,
 * MemoryRegion::Close), and every view of it then reads as empty. One check
 * right before the copy is enough: the detach runs on this thread, so
 * nothing can release the memory between the check and the copy. The caller
 * gets a lost connection (the command is reissued, or fails CONNECTION_LOST)
 * instead of a TypeError from the copy or a silently short one.
 */
export function copyLive(from: Buffer, to: Buffer, length: number, what: string): void {
  if (from.length < length || to.length < length) {
    throw new MemoryReleased(`${what}: the connection's registered memory was released before its ${length} bytes were copied`);
  }
  from.copy(to, 0, 0, length);
}

/**
 * The connection's registered memory is gone (its region was closed), even if
 * the connection has not noticed its loss yet: it can carry no more data.
 */
export class MemoryReleased extends TransportError {
  constructor(message: string) {
    super(message);
    this.name = 'MemoryReleased';
  }
}

/** The target's view of buffer[0] of one-region memory (IoBuffer.base) as the native queue's address words, or null. */
export function queueAddressOf(io: IoBuffer): QueueAddressWords | null {
  const b = io.base;
  if (b === undefined) return null;
  return { addressHi: Number(b.address >> 32n), addressLo: Number(b.address & 0xffffffffn), keyHi: Number(b.key >> 32n), keyLo: Number(b.key & 0xffffffffn) };
}

/**
 * Memory from `session.allocate()`. Pass `buffer` (or any subarray of it) to
 * `volume.read()` / `volume.write()` for zero-copy I/O.
 *
 * The registration belongs to one connection of the session. When that
 * connection is lost, the region is deregistered with it (on libfabric the
 * memory is unmapped and `buffer` reads as empty): `valid` turns false, and
 * I/O through it, or through any view of it, fails with CONNECTION_LOST
 * (never a zero-length success). Data read into it is only as lasting as the
 * connection: copy out what must outlive it. Allocate again after the session
 * reconnects.
 */
export class RegisteredBuffer {
  /** The registered bytes. */
  readonly buffer: Buffer;
  readonly length: number;
  #io: IoBuffer | null;
  /** buffer[0]'s remote address and key as u32 halves, for the native queue (null: not one region). */
  readonly #remote: QueueAddressWords | null;
  readonly #connectionAlive: () => boolean;
  readonly #onRelease: (b: RegisteredBuffer) => void;

  /** @internal Built by Session.allocate. */
  constructor(io: IoBuffer, length: number, readonly channel: number, connectionAlive: () => boolean, onRelease: (b: RegisteredBuffer) => void) {
    this.#io = io;
    this.length = length;
    this.buffer = io.buffer.subarray(0, length);
    this.#connectionAlive = connectionAlive;
    this.#onRelease = onRelease;
    this.#remote = queueAddressOf(io);
    byMemory.set(this.buffer.buffer, this);
  }

  /**
   * @internal The remote address of buffer[offset] and the key, as u32 halves
   * (the native queue's submission words), or null when released or not one region.
   */
  remoteAt(offset: number): QueueAddressWords | null {
    const r = this.#remote;
    if (r === null || this.#io === null) return null;
    const lo = r.addressLo + offset;
    return { addressHi: (r.addressHi + Math.floor(lo / 0x100000000)) >>> 0, addressLo: lo >>> 0, keyHi: r.keyHi, keyLo: r.keyLo };
  }

  /** False once released or once its connection is gone. */
  get valid(): boolean {
    return this.#io !== null && this.#connectionAlive();
  }

  /** @internal The descriptors for [offset, offset + length) of the buffer. */
  segments(offset: number, length: number): DataDescriptor[] {
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
    this.#onRelease(this);
    io.release();
  }

  /**
   * @internal The registered buffer `b` is a view of, and b's offset in it;
   * also for a view of memory already released (then `registered.valid` is
   * false and the view reads as empty).
   */
  static find(b: Buffer): { registered: RegisteredBuffer; offset: number } | undefined {
    const registered = byMemory.get(b.buffer);
    if (registered === undefined) return undefined;
    if (!registered.valid) return { registered, offset: 0 };
    const offset = b.byteOffset - registered.buffer.byteOffset;
    if (offset < 0 || offset + b.length > registered.length) return undefined;
    return { registered, offset };
  }
}
