// Zero-copy I/O memory: the session's, registered once on each connection
// that carries its I/O (docs/architecture.md "Memory"). A read or write whose buffer lies in such
// a region is sent with a descriptor naming it, so the target RDMA-writes or
// -reads the caller's bytes directly; nothing is copied through the I/O pool.
import type { DataDescriptor } from '../protocol/wire/index.js';
import { RblkError } from './errors.js';
import { TransportError, type Connection, type QueueAddressWords } from './connection.js';
import type { IoBuffer, SessionMemory } from './transport/transport.js';

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
 * libfabric happens with its connection (native/src/core/memory-region.cc,
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
 * The memory belongs to the session, not to a connection (docs/architecture.md
 * "Memory"): it is registered on each connection that
 * carries I/O through it, the first time it does, so a command lost with one
 * connection is reissued on the next (or on another path) like any other, and
 * the caller's bytes are never detached or emptied while the caller holds
 * them. Only `release()` (or `session.close()`) gives the memory up; I/O through
 * it, or any view of it, then fails BUFFER_RELEASED, never as a zero-length
 * success.
 */
export class RegisteredBuffer {
  /** The registered bytes. */
  readonly buffer: Buffer;
  readonly length: number;
  #memory: SessionMemory | null;
  /** Its registration on each connection that has carried its I/O; a closed connection's is dropped. */
  readonly #on = new Map<Connection, { io: IoBuffer; remote: QueueAddressWords | null }>();
  readonly #onRelease: (b: RegisteredBuffer) => void;

  /** @internal Built by Session.allocate. */
  constructor(memory: SessionMemory, length: number, onRelease: (b: RegisteredBuffer) => void) {
    this.#memory = memory;
    this.length = length;
    this.buffer = memory.buffer.subarray(0, length);
    this.#onRelease = onRelease;
    byMemory.set(this.buffer.buffer, this);
  }

  /** False once released. */
  get valid(): boolean {
    return this.#memory !== null;
  }

  /** Connections that hold a registration of it now (tests, stats). */
  get registrations(): number {
    this.#prune();
    return this.#on.size;
  }

  /** @internal Its registration on `conn`, made on first use there. Throws BUFFER_RELEASED once released. */
  #registrationOn(conn: Connection): { io: IoBuffer; remote: QueueAddressWords | null } {
    let r = this.#on.get(conn);
    if (r !== undefined) return r;
    const memory = this.#memory;
    if (memory === null) throw new RblkError('BUFFER_RELEASED', 'the registered buffer was released');
    // Registrations of connections that have ended went with their domains: forget them.
    this.#prune();
    const io = conn.register(memory);
    r = { io, remote: queueAddressOf(io) };
    this.#on.set(conn, r);
    return r;
  }

  #prune(): void {
    for (const [c, r] of this.#on) {
      if (!c.isClosed) continue;
      this.#on.delete(c);
      r.io.release();
    }
  }

  /**
   * @internal The remote address of buffer[offset] on `conn` and its key, as
   * u32 halves (the native queue's submission words), or null when not one region.
   */
  remoteAt(conn: Connection, offset: number): QueueAddressWords | null {
    const r = this.remoteBase(conn);
    if (r === null) return null;
    const lo = r.addressLo + offset;
    return { addressHi: (r.addressHi + Math.floor(lo / 0x100000000)) >>> 0, addressLo: lo >>> 0, keyHi: r.keyHi, keyLo: r.keyLo };
  }

  /**
   * @internal The address words of buffer[0] on `conn` (made on first use
   * there), or null when not one region: shared, not a copy, so the common
   * read and write (initiator/fast-io.ts) add their offset without an object per I/O.
   */
  remoteBase(conn: Connection): Readonly<QueueAddressWords> | null {
    return this.#registrationOn(conn).remote;
  }

  /** @internal An IoBuffer for one command over part of this memory, as `conn` names it to the target. */
  view(conn: Connection, offset: number, length: number): IoBuffer {
    const { io } = this.#registrationOn(conn);
    return {
      buffer: this.buffer.subarray(offset, offset + length),
      segments: (o = 0, l = length - o) => io.segments(offset + o, l),
      release: () => undefined,
    };
  }

  /** Deregisters the memory everywhere and frees it. Do not use `buffer` afterwards: it reads as empty. */
  release(): void {
    const memory = this.#memory;
    if (memory === null) return;
    this.#memory = null;
    this.#onRelease(this);
    for (const r of this.#on.values()) r.io.release();
    this.#on.clear();
    memory.free();
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
