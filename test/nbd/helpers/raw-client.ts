// A test-only NBD client that speaks the wire protocol byte by byte, so tests
// can check exact option replies, error values and misbehaviour handling.
// Its constants are written out from NetworkBlockDevice/nbd doc/proto.md
// rather than imported, so a wrong value in the server cannot hide here.
import { connect, type Socket } from 'node:net';

export const NBDMAGIC = 0x4e42444d41474943n;
export const IHAVEOPT = 0x49484156454f5054n;
export const REPLY_MAGIC = 0x3e889045565a9n;

export const OPT = { EXPORT_NAME: 1, ABORT: 2, LIST: 3, STARTTLS: 5, INFO: 6, GO: 7, STRUCTURED_REPLY: 8, LIST_META: 9, SET_META: 10 };
export const REP = {
  ACK: 1,
  SERVER: 2,
  INFO: 3,
  ERR_UNSUP: 2 ** 31 + 1,
  ERR_INVALID: 2 ** 31 + 3,
  ERR_UNKNOWN: 2 ** 31 + 6,
  ERR_TOO_BIG: 2 ** 31 + 9,
};
export const INFO = { EXPORT: 0, NAME: 1, DESCRIPTION: 2, BLOCK_SIZE: 3 };
export const FLAG = {
  HAS_FLAGS: 1,
  READ_ONLY: 2,
  SEND_FLUSH: 4,
  SEND_FUA: 8,
  SEND_TRIM: 32,
  SEND_WRITE_ZEROES: 64,
  SEND_DF: 128,
  CAN_MULTI_CONN: 256,
  SEND_CACHE: 1024,
  SEND_FAST_ZERO: 2048,
};
export const CMD = { READ: 0, WRITE: 1, DISC: 2, FLUSH: 3, TRIM: 4, CACHE: 5, WRITE_ZEROES: 6, BLOCK_STATUS: 7 };
export const CMD_FLAG = { FUA: 1, NO_HOLE: 2, DF: 4, REQ_ONE: 8, FAST_ZERO: 16 };
export const E = { EPERM: 1, EIO: 5, EINVAL: 22, ENOSPC: 28, EOVERFLOW: 75, ENOTSUP: 95 };

export interface OptionReply {
  option: number;
  type: number;
  data: Buffer;
}

export interface Reply {
  cookie: bigint;
  /** 0 on success. */
  error: number;
  structured: boolean;
  /** Read data (simple reply payload or the OFFSET_DATA chunk contents). */
  data: Buffer;
  /** Offset given in the OFFSET_DATA chunk. */
  dataOffset?: bigint;
  /** Chunk types seen, in order (structured replies only). */
  chunkTypes: number[];
  /** Error message from an ERROR chunk. */
  message?: string;
}

export interface Request {
  type: number;
  flags?: number;
  cookie?: bigint;
  offset?: bigint | number;
  length?: number;
  data?: Buffer;
}

export interface Address {
  port?: number;
  path?: string;
}

export class RawClient {
  readonly socket: Socket;
  /** Resolves when the server closes the connection (or it is reset). */
  readonly closed: Promise<void>;
  structured = false;
  #chunks: Buffer[] = [];
  #buffered = 0;
  #ended = false;
  #wake: (() => void) | null = null;
  #nextCookie = 1n;
  /** Simple replies carry no length: reads in flight tell how much data follows. */
  readonly #readLengths = new Map<bigint, number>();

  private constructor(socket: Socket) {
    this.socket = socket;
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (chunk: Buffer) => {
      this.#chunks.push(chunk);
      this.#buffered += chunk.length;
      this.#notify();
    });
    socket.on('end', () => {
      this.#ended = true;
      this.#notify();
    });
    socket.on('close', () => {
      this.#ended = true;
      this.#notify();
    });
    socket.on('error', () => {
      this.#ended = true;
      this.#notify();
    });
  }

  static connect(addr: Address): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket =
        addr.path !== undefined ? connect(addr.path) : connect({ host: '127.0.0.1', port: addr.port ?? 0 });
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(new RawClient(socket));
      });
    });
  }

  /** Connects, greets with fixed newstyle + no zeroes, optionally negotiates structured replies, and sends GO. */
  static async open(addr: Address, name: string, opts: { structured?: boolean } = {}): Promise<RawClient> {
    const client = await RawClient.connect(addr);
    await client.greeting();
    client.sendClientFlags(3);
    if (opts.structured === true) {
      const [ack] = await client.option(OPT.STRUCTURED_REPLY);
      if (ack?.type !== REP.ACK) throw new Error('structured replies were refused');
      client.structured = true;
    }
    const go = await client.option(OPT.GO, infoRequest(name, [INFO.BLOCK_SIZE]));
    const last = go[go.length - 1];
    if (last?.type !== REP.ACK) throw new Error(`NBD_OPT_GO failed with reply type 0x${last?.type.toString(16)}`);
    return client;
  }

  /** True once the server has closed the connection and every byte has been read. */
  get atEof(): boolean {
    return this.#ended && this.#buffered === 0;
  }

  async readBytes(n: number): Promise<Buffer> {
    while (this.#buffered < n) {
      if (this.#ended) throw new Error(`connection closed with ${this.#buffered} of ${n} bytes`);
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
    const all = Buffer.concat(this.#chunks);
    this.#chunks = [all.subarray(n)];
    this.#buffered -= n;
    return all.subarray(0, n);
  }

  async greeting(): Promise<{ magic: bigint; optMagic: bigint; flags: number }> {
    const buf = await this.readBytes(18);
    return { magic: buf.readBigUInt64BE(0), optMagic: buf.readBigUInt64BE(8), flags: buf.readUInt16BE(16) };
  }

  sendClientFlags(flags: number): void {
    const buf = Buffer.alloc(4);
    buf.writeUInt32BE(flags >>> 0);
    this.socket.write(buf);
  }

  sendOption(option: number, data: Buffer = Buffer.alloc(0), length = data.length): void {
    const head = Buffer.alloc(16);
    head.writeBigUInt64BE(IHAVEOPT, 0);
    head.writeUInt32BE(option, 8);
    head.writeUInt32BE(length, 12);
    this.socket.write(Buffer.concat([head, data]));
  }

  async readOptionReply(): Promise<OptionReply> {
    const head = await this.readBytes(20);
    const magic = head.readBigUInt64BE(0);
    if (magic !== REPLY_MAGIC) throw new Error(`bad option reply magic 0x${magic.toString(16)}`);
    const length = head.readUInt32BE(16);
    return { option: head.readUInt32BE(8), type: head.readUInt32BE(12), data: await this.readBytes(length) };
  }

  /** Sends an option and collects replies up to the final one (ACK or an error). */
  async option(option: number, data?: Buffer): Promise<OptionReply[]> {
    this.sendOption(option, data);
    const replies: OptionReply[] = [];
    for (;;) {
      const reply = await this.readOptionReply();
      replies.push(reply);
      if (reply.type === REP.ACK || reply.type >= 2 ** 31) return replies;
    }
  }

  send(req: Request): bigint {
    const cookie = req.cookie ?? this.#nextCookie++;
    const head = Buffer.alloc(28);
    head.writeUInt32BE(0x25609513, 0);
    head.writeUInt16BE(req.flags ?? 0, 4);
    head.writeUInt16BE(req.type, 6);
    head.writeBigUInt64BE(cookie, 8);
    head.writeBigUInt64BE(BigInt(req.offset ?? 0), 16);
    head.writeUInt32BE(req.length ?? req.data?.length ?? 0, 24);
    if (req.type === CMD.READ) this.#readLengths.set(cookie, req.length ?? 0);
    this.socket.write(req.data !== undefined ? Buffer.concat([head, req.data]) : head);
    return cookie;
  }

  /** Reads one complete reply: a simple reply, or chunks up to the one flagged DONE. */
  async readReply(): Promise<Reply> {
    const magic = (await this.readBytes(4)).readUInt32BE(0);
    if (magic === 0x67446698) {
      const rest = await this.readBytes(12);
      const error = rest.readUInt32BE(0);
      const cookie = rest.readBigUInt64BE(4);
      const readLength = this.#readLengths.get(cookie);
      this.#readLengths.delete(cookie);
      const data = error === 0 && readLength !== undefined ? await this.readBytes(readLength) : Buffer.alloc(0);
      return { cookie, error, structured: false, data, chunkTypes: [] };
    }
    if (magic !== 0x668e33ef) throw new Error(`bad reply magic 0x${magic.toString(16)}`);
    const reply: Reply = { cookie: 0n, error: 0, structured: true, data: Buffer.alloc(0), chunkTypes: [] };
    for (let first = true; ; first = false) {
      if (!first) {
        const next = (await this.readBytes(4)).readUInt32BE(0);
        if (next !== 0x668e33ef) throw new Error(`bad chunk magic 0x${next.toString(16)}`);
      }
      const head = await this.readBytes(16);
      const flags = head.readUInt16BE(0);
      const type = head.readUInt16BE(2);
      reply.cookie = head.readBigUInt64BE(4);
      const payload = await this.readBytes(head.readUInt32BE(12));
      reply.chunkTypes.push(type);
      if (type === 1) {
        reply.dataOffset = payload.readBigUInt64BE(0);
        reply.data = Buffer.from(payload.subarray(8));
      } else if (type >= 0x8000) {
        reply.error = payload.readUInt32BE(0);
        reply.message = payload.subarray(6, 6 + payload.readUInt16BE(4)).toString('utf8');
      }
      if ((flags & 1) !== 0) {
        this.#readLengths.delete(reply.cookie);
        return reply;
      }
    }
  }

  async request(req: Request): Promise<Reply> {
    const cookie = this.send(req);
    const reply = await this.readReply();
    if (reply.cookie !== cookie) throw new Error(`reply for cookie ${reply.cookie}, expected ${cookie}`);
    return reply;
  }

  read(offset: number, length: number, flags = 0): Promise<Reply> {
    return this.request({ type: CMD.READ, offset, length, flags });
  }

  write(offset: number, data: Buffer, flags = 0): Promise<Reply> {
    return this.request({ type: CMD.WRITE, offset, data, flags });
  }

  /** Sends NBD_CMD_DISC and waits for the server to close. */
  async disconnect(): Promise<void> {
    this.send({ type: CMD.DISC });
    await this.closed;
  }

  destroy(): void {
    this.socket.destroy();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }
}

/** NBD_OPT_INFO / NBD_OPT_GO data. */
export function infoRequest(name: string, infos: number[] = []): Buffer {
  const nameBytes = Buffer.from(name, 'utf8');
  const buf = Buffer.alloc(4 + nameBytes.length + 2 + 2 * infos.length);
  buf.writeUInt32BE(nameBytes.length, 0);
  nameBytes.copy(buf, 4);
  buf.writeUInt16BE(infos.length, 4 + nameBytes.length);
  infos.forEach((info, i) => buf.writeUInt16BE(info, 6 + nameBytes.length + 2 * i));
  return buf;
}

/** Splits NBD_REP_INFO replies by info type. */
export function infoItems(replies: OptionReply[]): Map<number, Buffer> {
  const items = new Map<number, Buffer>();
  for (const reply of replies) {
    if (reply.type === REP.INFO) items.set(reply.data.readUInt16BE(0), reply.data.subarray(2));
  }
  return items;
}
