// Pull-style reads of exact byte counts from a socket. The socket is paused
// whenever enough is buffered and nobody is waiting, so a client that sends
// faster than the device completes is held back by TCP flow control rather
// than by our memory.
import type { Socket } from 'node:net';
import { StreamClosed } from './errors.js';

/** Buffered bytes beyond which the socket is paused while no read waits. */
const HIGH_WATER = 256 * 1024;
/** Skipped payloads are consumed in pieces of at most this size. */
const SKIP_PIECE = 64 * 1024;

interface Waiter {
  want: number;
  resolve: (buf: Buffer) => void;
  reject: (err: Error) => void;
}

export class ByteReader {
  readonly #socket: Socket;
  readonly #chunks: Buffer[] = [];
  #head = 0;
  #buffered = 0;
  #waiter: Waiter | null = null;
  #closed: StreamClosed | null = null;
  #discarding = false;

  constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('end', () => this.#fail(new StreamClosed('the peer closed the connection')));
    socket.on('close', () => this.#fail(new StreamClosed('the connection closed')));
    socket.on('error', (err) => this.#fail(new StreamClosed(`the connection failed: ${err.message}`)));
  }

  /** Resolves with exactly n bytes, or rejects with StreamClosed. */
  read(n: number): Promise<Buffer> {
    if (this.#waiter !== null) return Promise.reject(new Error('ByteReader: one read at a time'));
    if (this.#buffered >= n) return Promise.resolve(this.#take(n));
    if (this.#closed !== null) return Promise.reject(this.#closed);
    return new Promise<Buffer>((resolve, reject) => {
      this.#waiter = { want: n, resolve, reject };
      this.#socket.resume();
    });
  }

  /** Fills `into` with the next into.length bytes, copied once out of what arrived. */
  async readInto(into: Buffer): Promise<void> {
    let filled = 0;
    while (filled < into.length) {
      if (this.#buffered === 0) {
        // Nothing buffered: wait (and let the socket flow again) for the next byte.
        into[filled++] = (await this.read(1))[0];
        continue;
      }
      const n = Math.min(this.#buffered, into.length - filled);
      this.#buffered -= n;
      this.#copyOut(into, filled, n);
      filled += n;
    }
  }

  /** Consumes n bytes without holding more than one piece of them. */
  async skip(n: number): Promise<void> {
    let left = n;
    while (left > 0) {
      const piece = Math.min(left, SKIP_PIECE);
      await this.read(piece);
      left -= piece;
    }
  }

  /**
   * Stops reading for good: a pending read rejects with `reason`, and input
   * from now on is dropped unread so the socket can still see the peer's EOF.
   */
  cancel(reason: string): void {
    this.#discarding = true;
    this.#chunks.length = 0;
    this.#head = 0;
    this.#buffered = 0;
    this.#fail(new StreamClosed(reason));
    this.#socket.resume();
  }

  #onData(chunk: Buffer): void {
    if (this.#discarding) return;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    const waiter = this.#waiter;
    if (waiter !== null && this.#buffered >= waiter.want) {
      this.#waiter = null;
      waiter.resolve(this.#take(waiter.want));
    }
    if (this.#waiter === null && this.#buffered >= HIGH_WATER) this.#socket.pause();
  }

  #fail(err: StreamClosed): void {
    if (this.#closed === null) this.#closed = err;
    const waiter = this.#waiter;
    if (waiter !== null) {
      this.#waiter = null;
      waiter.reject(this.#closed);
    }
  }

  #take(n: number): Buffer {
    this.#buffered -= n;
    const first = this.#chunks[0];
    if (first !== undefined && first.length - this.#head >= n) {
      const out = first.subarray(this.#head, this.#head + n);
      this.#advance(first, n);
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    this.#copyOut(out, 0, n);
    return out;
  }

  /** Copies the next n buffered bytes into `into` at `at` (the caller has taken them off #buffered). */
  #copyOut(into: Buffer, at: number, n: number): void {
    let filled = 0;
    while (filled < n) {
      const chunk = this.#chunks[0];
      if (chunk === undefined) throw new Error('ByteReader: buffer accounting is off');
      const count = Math.min(chunk.length - this.#head, n - filled);
      chunk.copy(into, at + filled, this.#head, this.#head + count);
      filled += count;
      this.#advance(chunk, count);
    }
  }

  #advance(chunk: Buffer, count: number): void {
    this.#head += count;
    if (this.#head === chunk.length) {
      this.#chunks.shift();
      this.#head = 0;
    }
  }
}
