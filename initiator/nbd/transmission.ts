// The transmission phase of one connection (proto.md "Transmission"):
// requests are read in order, run concurrently against the device, and
// answered as each completes, matched to the request by its cookie.
import type { Socket } from 'node:net';
import type { ByteReader } from './byte-reader.js';
import {
  AllocationState,
  BASE_ALLOCATION_ID,
  Command,
  CommandFlag,
  Errno,
  MAX_IN_FLIGHT_BYTES,
  REQUEST_HEADER_SIZE,
} from './constants.js';
import { NbdRequestError, StreamClosed, describe, isExpectedFailure, nbdErrno } from './errors.js';
import type { NbdExport } from './export-info.js';
import type { Negotiated } from './handshake.js';
import { IoBuffers, type IoLease } from './io-buffers.js';
import { blockStatusChunk, errorChunk, noneChunk, offsetDataHeader, simpleReply } from './replies.js';
import { checkRequest, commandName, parseRequest, storesData, type NbdRequest } from './request.js';

/** What a request produced: data for a read's reply, and how to give its memory back once written. */
interface Reply {
  data: Buffer | null;
  done?: () => void;
  /** A BLOCK_STATUS answer: the whole reply chunk. */
  chunk?: Buffer;
}

/** base:allocation flags for a device's allocation status: a deallocated block reads as zeroes (docs/nbd.md). */
function allocationFlags(status: 'mapped' | 'deallocated' | 'anchored'): number {
  if (status === 'deallocated') return AllocationState.HOLE | AllocationState.ZERO;
  return status === 'anchored' ? AllocationState.HOLE : 0;
}
const NO_DATA: Reply = { data: null };

/**
 * `buf`, when it holds exactly the request's length: never reply with, or
 * write, fewer bytes than the client asked for (a zero-length write must not
 * be acknowledged as the client's write). A plain Error, so the client gets
 * EIO and the log an error line: this is a fault, not a device's verdict.
 */
function exactly(buf: Buffer | null, req: NbdRequest, what: string): Buffer {
  const got = buf?.length ?? 0;
  if (buf === null || got !== req.length) {
    throw new Error(`${what} ${got} bytes for a ${req.length}-byte ${commandName(req.type)}`);
  }
  return buf;
}

export type TransmissionLog = (level: 'error' | 'warn' | 'info' | 'debug', msg: string) => void;

export interface TransmissionOptions {
  /** Requests admitted before the next header is read. */
  readonly maxInFlight: number;
  readonly log: TransmissionLog;
  /** Names the client in log lines. */
  readonly peer: string;
}

export class Transmission {
  readonly #socket: Socket;
  readonly #reader: ByteReader;
  readonly #export: NbdExport;
  readonly #flags: number;
  readonly #structured: boolean;
  readonly #allocation: boolean;
  readonly #opts: TransmissionOptions;
  /** Requests admitted whose reply has not yet reached the kernel. */
  #slots = 0;
  #slotBytes = 0;
  #wakeReader: (() => void) | null = null;
  /** Requests still running on the device. */
  #running = 0;
  #idleWaiters: Array<() => void> = [];
  #stopping = false;
  /** The socket is corked until the end of this tick (#corkUntilTick). */
  #corked = false;
  readonly #buffers: IoBuffers;

  constructor(socket: Socket, reader: ByteReader, negotiated: Negotiated, opts: TransmissionOptions) {
    this.#socket = socket;
    this.#reader = reader;
    this.#export = negotiated.export;
    this.#flags = negotiated.flags;
    this.#structured = negotiated.structured;
    this.#allocation = negotiated.allocation;
    this.#opts = opts;
    // The device's own memory where it lends some (an rblk volume: zero-copy, io-buffers.ts).
    const device = negotiated.export.device;
    this.#buffers = new IoBuffers(MAX_IN_FLIGHT_BYTES, device.allocate?.bind(device));
  }

  /**
   * Serves requests until the client disconnects (NBD_CMD_DISC or EOF) or
   * stop() is called, then waits for every admitted request to finish on the
   * device. A client that breaks the protocol has its socket destroyed at
   * once and the ProtocolViolation is rethrown after the device work drains.
   */
  async run(): Promise<void> {
    let failure: unknown = null;
    try {
      await this.#serve();
    } catch (err) {
      if (!(err instanceof StreamClosed)) {
        failure = err;
        this.#socket.destroy();
      }
    }
    await this.#deviceIdle();
    this.#buffers.close();
    if (failure !== null) throw failure;
  }

  /** Reads no further requests; those already admitted still complete and are answered. */
  stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#reader.cancel('the server is shutting down');
    this.#wake();
  }

  async #serve(): Promise<void> {
    while (!this.#stopping) {
      const req = parseRequest(await this.#reader.read(REQUEST_HEADER_SIZE));
      if (req.type === Command.DISC) {
        // proto.md NBD_CMD_DISC: no reply; finish what is outstanding, then close.
        this.#opts.log('debug', `${this.#opts.peer}: client sent NBD_CMD_DISC`);
        return;
      }
      const rejection = checkRequest(req, this.#export, this.#flags, this.#structured, this.#allocation);
      const payload = req.type === Command.WRITE ? req.length : 0;
      const cost = req.type === Command.READ || req.type === Command.WRITE ? req.length : 0;
      if (rejection !== null) {
        // The payload of a refused write is consumed in pieces, never held.
        if (payload > 0) await this.#reader.skip(payload);
        if (!(await this.#admit(0))) return;
        this.#opts.log('debug', `${this.#opts.peer}: ${rejection.message}`);
        this.#reply(req, rejection.errno, rejection.message, null, 0);
        continue;
      }
      if (!(await this.#admit(cost))) return;
      let lease: IoLease | null = null;
      if (payload > 0) {
        // The export's own memory, which no lost device connection can take
        // away: the payload must still be there if the write is sent again.
        lease = this.#buffers.acquire(payload);
        try {
          await this.#reader.readInto(lease.view);
        } catch (err) {
          lease.done();
          this.#release(cost);
          throw err;
        }
      }
      this.#running++;
      this.#execute(req, lease?.view ?? null, cost, lease).catch((err: unknown) => {
        this.#opts.log('error', `${this.#opts.peer}: closing the connection after an internal error: ${describe(err)}`);
        this.#socket.destroy();
      });
    }
  }

  /** Waits for room under both in-flight bounds; false once stopping. */
  async #admit(cost: number): Promise<boolean> {
    while (!this.#stopping && !this.#hasRoom(cost)) {
      await new Promise<void>((resolve) => {
        this.#wakeReader = resolve;
      });
    }
    if (this.#stopping) return false;
    this.#slots++;
    this.#slotBytes += cost;
    return true;
  }

  #hasRoom(cost: number): boolean {
    if (this.#slots >= this.#opts.maxInFlight) return false;
    // A lone request is always admitted, however large its payload.
    return this.#slots === 0 || this.#slotBytes + cost <= MAX_IN_FLIGHT_BYTES;
  }

  #release(cost: number): void {
    this.#slots--;
    this.#slotBytes -= cost;
    this.#wake();
  }

  #wake(): void {
    const wake = this.#wakeReader;
    this.#wakeReader = null;
    wake?.();
  }

  #deviceIdle(): Promise<void> {
    if (this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  async #execute(req: NbdRequest, data: Buffer | null, cost: number, payload: IoLease | null): Promise<void> {
    let result: Reply = NO_DATA;
    let errno = 0;
    let message = '';
    try {
      result = await this.#perform(req, data);
    } catch (err) {
      errno = nbdErrno(err, storesData(req.type));
      message = `${commandName(req.type)} at ${req.offset}+${req.length}: ${describe(err)}`;
      this.#opts.log(isExpectedFailure(err) ? 'debug' : 'error', `${this.#opts.peer}: ${message}`);
    }
    payload?.done();
    this.#running--;
    this.#reply(req, errno, message, result.data, cost, result.done, result.chunk);
    if (this.#running === 0) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }

  async #perform(req: NbdRequest, data: Buffer | null): Promise<Reply> {
    const device = this.#export.device;
    const offset = Number(req.offset);
    const fua = (req.flags & CommandFlag.FUA) !== 0;
    switch (req.type) {
      case Command.READ: {
        if (req.length === 0) return { data: Buffer.alloc(0) };
        if (device.readInto === undefined) {
          const buf = await device.read(offset, req.length);
          return { data: exactly(buf, req, 'the device returned') };
        }
        // The reply is sent from the export's own memory, so a device
        // connection lost while the socket still writes it changes nothing.
        const lease = this.#buffers.acquire(req.length);
        try {
          await device.readInto(offset, lease.view);
          return { data: exactly(lease.view, req, 'the read left'), done: lease.done };
        } catch (err) {
          lease.done();
          throw err;
        }
      }
      case Command.WRITE:
        if (req.length === 0) return NO_DATA;
        // A retry after a lost connection happens below the device (the
        // session sends the same request again); these bytes are what it sends.
        await device.write(offset, exactly(data, req, 'the payload held'), { fua });
        return NO_DATA;
      case Command.FLUSH:
        await device.flush();
        return NO_DATA;
      case Command.TRIM:
        await this.#inSteps(offset, req.length, (at, len) => device.discard(at, len));
        if (fua && req.length > 0) await device.flush();
        return NO_DATA;
      case Command.WRITE_ZEROES: {
        if ((req.flags & CommandFlag.FAST_ZERO) !== 0) {
          // proto.md NBD_CMD_WRITE_ZEROES: fail fast, export untouched.
          throw new NbdRequestError(Errno.ENOTSUP, 'fast zeroing is not offered; write the zeroes instead');
        }
        // NO_HOLE asks for the range to stay provisioned, so no unmapping.
        const unmap = (req.flags & CommandFlag.NO_HOLE) === 0;
        await this.#inSteps(offset, req.length, (at, len) => device.writeZeroes(at, len, { unmap }));
        if (fua && req.length > 0) await device.flush();
        return NO_DATA;
      }
      case Command.BLOCK_STATUS: {
        const lbaStatus = device.lbaStatus?.bind(device);
        if (lbaStatus === undefined) throw new NbdRequestError(Errno.EINVAL, 'the device reports no allocation');
        // One device call: its runs start at the offset and may end early, which
        // proto.md allows (the client asks again from where they end).
        let runs = await lbaStatus(offset, req.length);
        if ((req.flags & CommandFlag.REQ_ONE) !== 0) runs = runs.slice(0, 1);
        if (runs.length === 0 || runs[0].offset !== offset) throw new Error(`the device's allocation runs do not start at ${offset}`);
        const extents = runs.map((r) => ({ length: r.length, flags: allocationFlags(r.status) }));
        return { data: null, chunk: blockStatusChunk(req.cookie, BASE_ALLOCATION_ID, extents) };
      }
      case Command.CACHE:
        // A hint only (proto.md NBD_CMD_CACHE); the device has no cache to warm.
        return NO_DATA;
      default:
        throw new NbdRequestError(Errno.EINVAL, `unknown ${commandName(req.type)}`);
    }
  }

  /**
   * TRIM and WRITE_ZEROES carry no payload, so their length may exceed the
   * maximum payload (proto.md "Size constraints"); the device takes at most
   * maxTransfer at a time, so they are issued in whole-block steps.
   */
  async #inSteps(offset: number, length: number, op: (at: number, len: number) => Promise<void>): Promise<void> {
    const bs = this.#export.minBlock;
    const step = Math.floor(this.#export.device.maxTransfer / bs) * bs;
    for (let done = 0; done < length; done += step) {
      await op(offset + done, Math.min(step, length - done));
    }
  }

  /**
   * Sends the reply for a request. Once structured replies are negotiated a
   * READ is always answered with chunks (proto.md "Structured reply chunk
   * message"), and every error goes in an NBD_REPLY_TYPE_ERROR chunk so it
   * carries its message; other successes use the simple reply, which the
   * spec allows for replies without payload.
   */
  #reply(req: NbdRequest, errno: number, message: string, data: Buffer | null, cost: number, written?: () => void, chunk?: Buffer): void {
    const isRead = req.type === Command.READ;
    let parts: Buffer[];
    if (errno !== 0) {
      parts = [this.#structured ? errorChunk(req.cookie, errno, message) : simpleReply(errno, req.cookie)];
    } else if (chunk !== undefined) {
      parts = [chunk];
    } else if (isRead && this.#structured) {
      parts =
        data !== null && data.length > 0
          ? [offsetDataHeader(req.cookie, req.offset, data.length), data]
          : [noneChunk(req.cookie)];
    } else if (isRead && data !== null && data.length > 0) {
      parts = [simpleReply(0, req.cookie), data];
    } else {
      parts = [simpleReply(0, req.cookie)];
    }
    const socket = this.#socket;
    if (socket.destroyed || !socket.writable) {
      written?.();
      this.#release(cost);
      return;
    }
    // The slot is held until the reply reaches the kernel, so a client that
    // stops reading replies stops being read from too; the data's memory is
    // reused only then.
    this.#corkUntilTick(socket);
    parts.forEach((part, i) =>
      socket.write(
        part,
        i === parts.length - 1
          ? () => {
              written?.();
              this.#release(cost);
            }
          : undefined,
      ),
    );
  }

  /**
   * Holds the socket's writes until the current tick ends: the device
   * completes its commands in batches (docs/initiator.md "Fast path": one
   * call into JavaScript per batch of completions), and the replies of one
   * batch then leave in one writev instead of one each.
   */
  #corkUntilTick(socket: Socket): void {
    if (this.#corked) return;
    this.#corked = true;
    socket.cork();
    process.nextTick(() => {
      this.#corked = false;
      socket.uncork();
    });
  }
}
