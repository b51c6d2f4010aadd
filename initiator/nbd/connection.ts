// One client connection from accept to close: handshake, then transmission,
// then an orderly close. Whatever goes wrong stays inside this connection.
import type { Socket } from 'node:net';
import { ByteReader } from './byte-reader.js';
import { ProtocolViolation, StreamClosed, describe } from './errors.js';
import { negotiate, type ExportTable } from './handshake.js';
import { Transmission, type TransmissionLog } from './transmission.js';

/** How long a closing socket waits for the peer's FIN before it is destroyed. */
const CLOSE_GRACE_MS = 2000;

export interface ConnectionOptions {
  readonly exports: ExportTable;
  readonly log: TransmissionLog;
  readonly maxInFlight: number;
}

export class Connection {
  /** Settles once the socket is closed and no request is left on the device. */
  readonly done: Promise<void>;
  readonly #socket: Socket;
  readonly #reader: ByteReader;
  readonly #opts: ConnectionOptions;
  readonly #peer: string;
  #transmission: Transmission | null = null;
  #stopping = false;
  #closed = false;

  constructor(socket: Socket, opts: ConnectionOptions) {
    this.#socket = socket;
    this.#opts = opts;
    this.#peer =
      socket.remoteAddress !== undefined ? `${socket.remoteAddress}:${socket.remotePort ?? 0}` : 'unix socket client';
    socket.on('close', () => {
      this.#closed = true;
    });
    socket.setNoDelay(true);
    this.#reader = new ByteReader(socket);
    this.done = this.#run();
  }

  /**
   * Graceful stop: a client still negotiating is dropped (it has nothing in
   * flight); one in transmission gets replies to what it already sent, then
   * the socket closes.
   */
  shutdown(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    if (this.#transmission === null) this.#socket.destroy();
    else this.#transmission.stop();
  }

  async #run(): Promise<void> {
    const log = this.#opts.log;
    try {
      const negotiated = await negotiate(this.#socket, this.#reader, this.#opts.exports, log);
      if (negotiated !== null && !this.#stopping) {
        log('debug', `${this.#peer}: serving export "${negotiated.export.name}"`);
        this.#transmission = new Transmission(this.#socket, this.#reader, negotiated, {
          maxInFlight: this.#opts.maxInFlight,
          log,
          peer: this.#peer,
        });
        await this.#transmission.run();
      }
    } catch (err) {
      if (err instanceof StreamClosed) {
        log('debug', `${this.#peer}: ${err.message}`);
      } else if (err instanceof ProtocolViolation) {
        log('warn', `${this.#peer}: closing the connection: ${err.message}`);
      } else {
        log('error', `${this.#peer}: closing the connection after an internal error: ${describe(err)}`);
      }
      this.#socket.destroy();
    }
    await this.#close();
  }

  /** Flushes queued replies, sends FIN, and waits for the peer to close (within a grace period). */
  async #close(): Promise<void> {
    this.#reader.cancel('the connection is closing');
    if (this.#closed) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.#socket.destroy(), CLOSE_GRACE_MS);
      this.#socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      this.#socket.end();
    });
  }
}
