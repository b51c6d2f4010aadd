// The initiator paths a soak writes through: the rblk library (a Session and its Volume,
// FUA writes), the library's NVMe/TCP host against rblkd's nvme-tcp listener (docs/nvme.md),
// and the NBD export of `rblk attach --nbd-socket` through a small NBD client
// of our own (docs/nbd.md; fixed newstyle handshake, NBD_OPT_GO, simple replies), so that
// every write's acknowledgement is seen exactly as the export sends it.
import { connect as netConnect, type Socket } from 'node:net';
import { connect, connectNvme, type NvmeSession, type Session, type Volume } from '../../initiator/index.js';
import type { BlockClient } from './ledger.js';

/** A library session that waits out a target restart instead of failing (docs/initiator.md "Timeouts and recovery"). */
export async function librarySession(url: string, opts: { lossMs?: number; commandMs?: number; keepAliveMs?: number } = {}): Promise<{ session: Session; volume: Volume; client: BlockClient; reconnectErrors: () => number }> {
  const session = await connect(url, {
    initiatorName: 'iqn.2026-11.io.rblk:soak',
    queueDepth: 8,
    maxIo: 128 * 1024,
    keepAliveMs: opts.keepAliveMs ?? 0,
    timeouts: { lossMs: opts.lossMs ?? 60_000, commandMs: opts.commandMs ?? 30_000, connectMs: 5000 },
  });
  let errors = 0;
  // A failed reconnect attempt is an 'error' event; listening keeps it from being thrown.
  session.on('error', () => errors++);
  const volume = await session.open();
  return {
    session,
    volume,
    client: { write: (offset, data, fua) => volume.write(offset, data, { fua }), read: (offset, length) => volume.read(offset, length) },
    reconnectErrors: () => errors,
  };
}

/**
 * The NVMe/TCP host on nsid 1, waiting out a target restart like librarySession
 * (docs/nvme.md "The rblk library as an NVMe/TCP host"); a failed reconnect
 * attempt is a `pathDown` event, counted.
 */
export async function nvmeSession(url: string, opts: { lossMs?: number } = {}): Promise<{ session: NvmeSession; client: BlockClient; reconnectErrors: () => number }> {
  const session = await connectNvme(url, {
    queueDepth: 8,
    maxIo: 128 * 1024,
    timeouts: { lossMs: opts.lossMs ?? 60_000, commandMs: 30_000, connectMs: 5000 },
    reconnect: { initialDelayMs: 50, maxDelayMs: 500 },
  });
  let downs = 0;
  session.on('pathDown', () => downs++);
  const volume = await session.open(1);
  return {
    session,
    client: { write: (offset, data, fua) => volume.write(offset, data, { fua }), read: (offset, length) => volume.read(offset, length) },
    reconnectErrors: () => downs,
  };
}

const NBDMAGIC = 0x4e42444d41474943n;
const IHAVEOPT = 0x49484156454f5054n;
const REPLY_MAGIC = 0x3e889045565a9n;
const REQUEST_MAGIC = 0x25609513;
const SIMPLE_REPLY_MAGIC = 0x67446698;
const OPT_GO = 7;
const REP_ACK = 1;
const REP_INFO = 3;
const CMD_READ = 0;
const CMD_WRITE = 1;
const CMD_DISC = 2;
const CMD_FLAG_FUA = 1;

export class NbdError extends Error {
  constructor(
    message: string,
    readonly errno: number,
  ) {
    super(message);
    this.name = 'NbdError';
  }
}

interface Pending {
  length: number;
  resolve: (data: Buffer) => void;
  reject: (e: Error) => void;
}

/** An NBD client over a unix socket: the handshake, then READ and WRITE (with FUA) in flight together. */
export class NbdClient implements BlockClient {
  #sock: Socket;
  #buf: Buffer = Buffer.alloc(0);
  #need: ((buf: Buffer) => number) | null = null;
  #pending = new Map<bigint, Pending>();
  #cookie = 1n;
  #closed: Error | null = null;
  size = 0;

  private constructor(sock: Socket) {
    this.#sock = sock;
    sock.on('data', (d: Buffer) => {
      this.#buf = this.#buf.length === 0 ? d : Buffer.concat([this.#buf, d]);
      this.#drain();
    });
    const fail = (e: Error): void => {
      if (this.#closed !== null) return;
      this.#closed = e;
      for (const p of this.#pending.values()) p.reject(e);
      this.#pending.clear();
    };
    sock.on('error', fail);
    sock.on('close', () => fail(new NbdError('the NBD connection closed', 0)));
  }

  #drain(): void {
    while (this.#need !== null) {
      const used = this.#need(this.#buf);
      if (used === 0) return;
      this.#buf = this.#buf.subarray(used);
    }
  }

  /** Reads exactly n bytes of the handshake. */
  #take(n: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      if (this.#closed !== null) return reject(this.#closed);
      const onClose = (): void => reject(this.#closed ?? new NbdError('closed during the handshake', 0));
      this.#sock.once('close', onClose);
      this.#need = (buf) => {
        if (buf.length < n) return 0;
        this.#need = null;
        this.#sock.off('close', onClose);
        resolve(Buffer.from(buf.subarray(0, n)));
        return n;
      };
      this.#drain();
    });
  }

  static async open(path: string, exportName: string): Promise<NbdClient> {
    const sock = netConnect(path);
    await new Promise<void>((resolve, reject) => {
      sock.once('connect', resolve);
      sock.once('error', reject);
    });
    const c = new NbdClient(sock);
    try {
      await c.#handshake(exportName);
    } catch (e) {
      sock.destroy();
      throw e;
    }
    return c;
  }

  async #handshake(name: string): Promise<void> {
    const hello = await this.#take(18);
    if (hello.readBigUInt64BE(0) !== NBDMAGIC || hello.readBigUInt64BE(8) !== IHAVEOPT) throw new NbdError('not an NBD newstyle server', 0);
    // FIXED_NEWSTYLE | NO_ZEROES
    const flags = Buffer.alloc(4);
    flags.writeUInt32BE(3);
    const nameBytes = Buffer.from(name);
    const opt = Buffer.alloc(16 + 4 + nameBytes.length + 2);
    opt.writeBigUInt64BE(IHAVEOPT, 0);
    opt.writeUInt32BE(OPT_GO, 8);
    opt.writeUInt32BE(4 + nameBytes.length + 2, 12);
    opt.writeUInt32BE(nameBytes.length, 16);
    nameBytes.copy(opt, 20);
    this.#sock.write(Buffer.concat([flags, opt]));
    for (;;) {
      const head = await this.#take(20);
      if (head.readBigUInt64BE(0) !== REPLY_MAGIC) throw new NbdError('bad option reply magic', 0);
      const type = head.readUInt32BE(12);
      const data = await this.#take(head.readUInt32BE(16));
      if (type === REP_ACK) break;
      if (type >= 0x80000000) throw new NbdError(`NBD_OPT_GO refused: ${type - 0x80000000} ${data.toString()}`, 0);
      if (type === REP_INFO && data.readUInt16BE(0) === 0) this.size = Number(data.readBigUInt64BE(2));
    }
    this.#need = (buf) => this.#reply(buf);
    this.#drain();
  }

  #reply(buf: Buffer): number {
    if (buf.length < 16) return 0;
    if (buf.readUInt32BE(0) !== SIMPLE_REPLY_MAGIC) {
      this.#sock.destroy(new NbdError(`unexpected reply magic 0x${buf.readUInt32BE(0).toString(16)}`, 0));
      return 0;
    }
    const errno = buf.readUInt32BE(4);
    const cookie = buf.readBigUInt64BE(8);
    const p = this.#pending.get(cookie);
    if (p === undefined) {
      this.#sock.destroy(new NbdError(`reply for unknown cookie ${cookie}`, 0));
      return 0;
    }
    const dataLength = errno === 0 ? p.length : 0;
    if (buf.length < 16 + dataLength) return 0;
    this.#pending.delete(cookie);
    if (errno !== 0) p.reject(new NbdError(`NBD error ${errno}`, errno));
    else p.resolve(Buffer.from(buf.subarray(16, 16 + dataLength)));
    return 16 + dataLength;
  }

  #request(type: number, flags: number, offset: number, length: number, data?: Buffer, replyLength = 0): Promise<Buffer> {
    if (this.#closed !== null) return Promise.reject(this.#closed);
    const cookie = this.#cookie++;
    const head = Buffer.alloc(28);
    head.writeUInt32BE(REQUEST_MAGIC, 0);
    head.writeUInt16BE(flags, 4);
    head.writeUInt16BE(type, 6);
    head.writeBigUInt64BE(cookie, 8);
    head.writeBigUInt64BE(BigInt(offset), 16);
    head.writeUInt32BE(length, 24);
    const done = new Promise<Buffer>((resolve, reject) => this.#pending.set(cookie, { length: replyLength, resolve, reject }));
    this.#sock.write(data === undefined ? head : Buffer.concat([head, data]));
    return done;
  }

  async write(offset: number, data: Buffer, fua: boolean): Promise<void> {
    await this.#request(CMD_WRITE, fua ? CMD_FLAG_FUA : 0, offset, data.length, data);
  }

  read(offset: number, length: number): Promise<Buffer> {
    return this.#request(CMD_READ, 0, offset, length, undefined, length);
  }

  /** NBD_CMD_DISC, then the socket closes. */
  async close(): Promise<void> {
    if (this.#closed === null) {
      const head = Buffer.alloc(28);
      head.writeUInt32BE(REQUEST_MAGIC, 0);
      head.writeUInt16BE(CMD_DISC, 6);
      this.#sock.end(head);
    }
    await new Promise<void>((r) => (this.#sock.closed ? r() : this.#sock.once('close', () => r())));
  }
}
