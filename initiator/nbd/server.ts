// An NBD server (fixed newstyle, proto.md) that exports BlockDevices over TCP
// or a unix socket, so that qemu, nbdcopy, fio or nbd-client can use a
// remote rblk volume as a local disk.
import { createServer, type Server, type Socket } from 'node:net';
import type { BlockDevice } from '../block-device.js';
import { Connection } from './connection.js';
import { DEFAULT_MAX_IN_FLIGHT, DEFAULT_PORT } from './constants.js';
import { describeExport, type NbdExport } from './export-info.js';
import type { ExportTable } from './handshake.js';

export type NbdLogLevel = 'error' | 'warn' | 'info' | 'debug';
export type NbdLog = (level: NbdLogLevel, msg: string) => void;

export interface NbdServerOptions {
  /** Export name of a lone device passed to the constructor; "" unless given. */
  name?: string;
  log?: NbdLog;
  /** Requests one connection may have outstanding; 64 unless given. */
  maxInFlight?: number;
}

export interface NbdListenOptions {
  /** TCP host; 127.0.0.1 unless given. Ignored when path is set. */
  host?: string;
  /** TCP port; 10809 (the IANA NBD port) unless given; 0 picks a free one. */
  port?: number;
  /** Unix socket path; when set, no TCP port is opened. */
  path?: string;
}

export interface NbdAddress {
  port?: number;
  path?: string;
}

export class NbdServer {
  readonly #exports: readonly NbdExport[];
  readonly #byName = new Map<string, NbdExport>();
  readonly #log: NbdLog;
  readonly #maxInFlight: number;
  readonly #connections = new Set<Connection>();
  #server: Server | null = null;
  #closing: Promise<void> | null = null;

  constructor(exports: Map<string, BlockDevice> | BlockDevice, opts: NbdServerOptions = {}) {
    const entries: Array<[string, BlockDevice]> =
      exports instanceof Map ? [...exports.entries()] : [[opts.name ?? '', exports]];
    if (entries.length === 0) throw new RangeError('NbdServer needs at least one export');
    this.#exports = entries.map(([name, device]) => describeExport(name, device));
    for (const exp of this.#exports) this.#byName.set(exp.name, exp);
    this.#log = opts.log ?? (() => {});
    const maxInFlight = opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    if (!Number.isSafeInteger(maxInFlight) || maxInFlight < 1) {
      throw new RangeError(`maxInFlight ${maxInFlight} must be a positive integer`);
    }
    this.#maxInFlight = maxInFlight;
  }

  /** Open client connections, in handshake or transmission. */
  get connections(): number {
    return this.#connections.size;
  }

  listen(where: NbdListenOptions = {}): Promise<NbdAddress> {
    if (this.#server !== null) return Promise.reject(new Error('NbdServer is already listening'));
    if (this.#closing !== null) return Promise.reject(new Error('NbdServer is closed'));
    // allowHalfOpen: a client may shut down its sending side and still be
    // owed replies; the connection ends its side itself once they are sent.
    const server = createServer({ allowHalfOpen: true }, (socket) => this.#accept(socket));
    this.#server = server;
    return new Promise<NbdAddress>((resolve, reject) => {
      const onError = (err: Error): void => {
        this.#server = null;
        reject(err);
      };
      server.once('error', onError);
      const ready = (): void => {
        server.off('error', onError);
        server.on('error', (err) => this.#log('error', `NBD server: ${err.message}`));
        const address = server.address();
        if (where.path !== undefined) {
          this.#log('info', `NBD server listening on ${where.path}`);
          resolve({ path: where.path });
        } else if (address !== null && typeof address === 'object') {
          this.#log('info', `NBD server listening on ${address.address}:${address.port}`);
          resolve({ port: address.port });
        } else {
          reject(new Error('NbdServer: the listening socket has no address'));
        }
      };
      if (where.path !== undefined) server.listen(where.path, ready);
      else server.listen(where.port ?? DEFAULT_PORT, where.host ?? '127.0.0.1', ready);
    });
  }

  /**
   * Stops accepting, lets requests already received finish and be answered,
   * then closes every connection (proto.md "Terminating the transmission
   * phase": the server waits for in-flight requests before disconnecting).
   */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    const server = this.#server;
    const stopped =
      server === null
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            server.close(() => resolve());
          });
    const connections = [...this.#connections];
    for (const conn of connections) conn.shutdown();
    await Promise.all(connections.map((conn) => conn.done));
    await stopped;
    this.#server = null;
  }

  #accept(socket: Socket): void {
    if (this.#closing !== null) {
      socket.destroy();
      return;
    }
    const conn = new Connection(socket, {
      exports: this.#table,
      log: this.#log,
      maxInFlight: this.#maxInFlight,
    });
    this.#connections.add(conn);
    void conn.done.then(() => this.#connections.delete(conn));
  }

  readonly #table: ExportTable = {
    // "" names the default export: an export called "" if there is one, else the first.
    find: (name) => this.#byName.get(name) ?? (name === '' ? this.#exports[0] : undefined),
    list: () => this.#exports,
  };
}
