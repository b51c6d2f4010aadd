// A small NVMe/TCP host for the tests and the soak (bench/soak/nvme-fuzz.ts),
// written from the specs (NVMe TCP Transport 1.0 §3.6, NVMe-oF 1.1 §3, Base 2.0 §4-5), not from target/nvme/. It builds
// SQEs with protocol/nvme's encoder, but frames its own PDUs and decodes
// every response at explicit byte offsets, so that a misunderstanding in the
// codec shows up as a failing test rather than agreeing with itself.
import { connect as tcpConnect, type Socket } from 'node:net';
import { crc32c } from '../../protocol/crc32c.js';
import { buildSqe } from '../../protocol/nvme/command.js';

export interface Pdu {
  type: number;
  flags: number;
  hlen: number;
  pdo: number;
  plen: number;
  /** The whole PDU as received. */
  raw: Buffer;
  /** HLEN bytes. */
  header: Buffer;
  data: Buffer | null;
}

export interface Cqe {
  dw0: number;
  dw1: number;
  sqhd: number;
  sqid: number;
  cid: number;
  /** Bytes 14-15 whole. */
  statusField: number;
  sc: number;
  sct: number;
  dnr: boolean;
}

export interface Result extends Cqe {
  /** C2HData received for the command, concatenated in DATAO order. */
  data: Buffer;
  /** C2HData PDUs and R2Ts seen. */
  c2hPdus: number;
  r2ts: number;
  /** Completed by C2HData with SUCCESS, without a CapsuleResp. */
  bySuccessFlag: boolean;
}

export const HOST_NQN = 'nqn.2014-08.org.nvmexpress:uuid:6f1b2c9e-0000-4000-8000-000000000001';
export const HOST_ID = Buffer.from('6f1b2c9e000040008000000000000001', 'hex');

/** Decodes a CQE at its Base 2.0 §4.6 offsets. */
export function decodeCqe(b: Buffer, at = 0): Cqe {
  const statusField = b.readUInt16LE(at + 14);
  return {
    dw0: b.readUInt32LE(at),
    dw1: b.readUInt32LE(at + 4),
    sqhd: b.readUInt16LE(at + 8),
    sqid: b.readUInt16LE(at + 10),
    cid: b.readUInt16LE(at + 12),
    statusField,
    sc: (statusField >> 1) & 0xff,
    sct: (statusField >> 9) & 7,
    dnr: (statusField & 0x8000) !== 0,
  };
}

export class RawHost {
  hdgst = false;
  ddgst = false;
  maxH2CData = 0;
  cpda = 0;
  cid = 0;
  closed = false;
  private buf = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  private queue: Pdu[] = [];

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.split();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => undefined);
  }

  static open(port: number, host = '127.0.0.1'): Promise<RawHost> {
    return new Promise((resolve, reject) => {
      const s = tcpConnect({ host, port, noDelay: true });
      s.once('connect', () => {
        s.off('error', reject);
        resolve(new RawHost(s));
      });
      s.once('error', reject);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private split(): void {
    // CH (§3.6.2.1): type 0, flags 1, HLEN 2, PDO 3, PLEN 4-7.
    while (this.buf.length >= 8) {
      const plen = this.buf.readUInt32LE(4);
      if (this.buf.length < plen) break;
      const raw = this.buf.subarray(0, plen);
      this.buf = this.buf.subarray(plen);
      const type = raw[0];
      const flags = raw[1];
      const hlen = raw[2];
      const pdo = raw[3];
      const header = raw.subarray(0, hlen);
      let data: Buffer | null = null;
      const term = type === 0x02 || type === 0x03;
      if (term) data = plen > hlen ? raw.subarray(hlen) : null;
      else if (type !== 0x00 && type !== 0x01) {
        const hd = (flags & 1) !== 0;
        const dd = (flags & 2) !== 0;
        if (hd && crc32c(header) !== raw.readUInt32LE(hlen)) throw new Error(`header digest mismatch on a PDU of type ${type}`);
        if (plen > hlen + (hd ? 4 : 0)) {
          data = raw.subarray(pdo, plen - (dd ? 4 : 0));
          if (dd && crc32c(data) !== raw.readUInt32LE(plen - 4)) throw new Error(`data digest mismatch on a PDU of type ${type}`);
        }
      }
      this.queue.push({ type, flags, hlen, pdo, plen, raw: Buffer.from(raw), header: Buffer.from(header), data: data && Buffer.from(data) });
    }
    this.wake();
  }

  /** The next PDU from the controller; rejects if the connection closes first or nothing comes within ms. */
  async next(ms = 10_000): Promise<Pdu> {
    const deadline = Date.now() + ms;
    for (;;) {
      const p = this.queue.shift();
      if (p) return p;
      if (this.closed) throw new Error('connection closed');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for a PDU');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Resolves when the controller closes the connection (or after ms, false). */
  async waitClosed(ms = 10_000): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!this.closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    return this.closed;
  }

  write(b: Buffer): void {
    this.socket.write(b);
  }

  /** Frames a PDU (§3.6.1): header, HDGST, data at PDO (no padding: CPDA is checked 0 by the tests), DDGST. */
  frame(header: Buffer, data: Buffer | null): Buffer {
    const hd = this.hdgst;
    const dd = this.ddgst && data !== null && data.length > 0;
    const hlen = header.length;
    const pdo = data && data.length > 0 ? hlen + (hd ? 4 : 0) : 0;
    const plen = (pdo ? pdo + data!.length : hlen + (hd ? 4 : 0)) + (dd ? 4 : 0);
    header[1] = (header[1] & ~3) | (hd ? 1 : 0) | (dd ? 2 : 0);
    header[2] = hlen;
    header[3] = pdo;
    header.writeUInt32LE(plen, 4);
    const parts = [header];
    if (hd) parts.push(u32(crc32c(header)));
    if (pdo) {
      parts.push(data!);
      if (dd) parts.push(u32(crc32c(data!)));
    }
    return Buffer.concat(parts);
  }

  /** ICReq (§3.6.2.2) and the ICResp (§3.6.2.3) decoded. */
  async initialize(o: { hdgst?: boolean; ddgst?: boolean; hpda?: number } = {}): Promise<{ pfv: number; cpda: number; dgst: number; maxH2CData: number; plen: number; hlen: number; type: number }> {
    const h = Buffer.alloc(128);
    h[0] = 0x00;
    h[2] = 128;
    h.writeUInt32LE(128, 4);
    h.writeUInt16LE(0, 8); // PFV
    h[10] = o.hpda ?? 0; // HPDA
    h[11] = (o.hdgst ? 1 : 0) | (o.ddgst ? 2 : 0); // DGST
    h.writeUInt32LE(3, 12); // MAXR2T: 4 (0's based)
    this.write(h);
    const r = await this.next();
    const out = { type: r.type, hlen: r.hlen, plen: r.plen, pfv: r.raw.readUInt16LE(8), cpda: r.raw[10], dgst: r.raw[11], maxH2CData: r.raw.readUInt32LE(12) };
    this.hdgst = (out.dgst & 1) !== 0;
    this.ddgst = (out.dgst & 2) !== 0;
    this.maxH2CData = out.maxH2CData;
    this.cpda = out.cpda;
    return out;
  }

  /** Sends a CapsuleCmd (§3.6.2.6) with optional in-capsule data. */
  sendCapsule(sqe: Buffer, inCapsule: Buffer | null = null): void {
    const h = Buffer.alloc(72);
    h[0] = 0x04;
    sqe.copy(h, 8);
    this.write(this.frame(h, inCapsule));
  }

  /**
   * Runs one command: sends it (write data in-capsule when asked, else by the R2Ts
   * it gets, in H2CData PDUs of at most MAXH2CDATA, or `chunk`), collects C2HData, returns the completion.
   */
  async command(sqe: Buffer, o: { data?: Buffer; inCapsule?: boolean; chunk?: number } = {}): Promise<Result> {
    const cid = sqe.readUInt16LE(2);
    this.sendCapsule(sqe, o.inCapsule ? (o.data ?? null) : null);
    const parts: Buffer[] = [];
    let c2hPdus = 0;
    let r2ts = 0;
    for (;;) {
      const p = await this.next();
      if (p.type === 0x09) {
        // R2T (§3.6.2.10): CCCID 8-9, TTAG 10-11, R2TO 12-15, R2TL 16-19.
        r2ts++;
        const cccid = p.raw.readUInt16LE(8);
        const ttag = p.raw.readUInt16LE(10);
        const r2to = p.raw.readUInt32LE(12);
        const r2tl = p.raw.readUInt32LE(16);
        if (cccid !== cid) throw new Error(`R2T for CID ${cccid}, expected ${cid}`);
        const step = Math.min(o.chunk ?? this.maxH2CData, this.maxH2CData);
        for (let off = r2to; off < r2to + r2tl; off += step) {
          const n = Math.min(step, r2to + r2tl - off);
          const h = Buffer.alloc(24);
          h[0] = 0x06; // H2CData (§3.6.2.8)
          h[1] = off + n === r2to + r2tl ? 0x04 : 0; // LAST_PDU
          h.writeUInt16LE(cid, 8);
          h.writeUInt16LE(ttag, 10);
          h.writeUInt32LE(off, 12);
          h.writeUInt32LE(n, 16);
          this.write(this.frame(h, o.data!.subarray(off, off + n)));
        }
        continue;
      }
      if (p.type === 0x07) {
        // C2HData (§3.6.2.9): CCCID 8-9, DATAO 12-15, DATAL 16-19; LAST_PDU 0x04, SUCCESS 0x08.
        c2hPdus++;
        const datao = p.raw.readUInt32LE(12);
        const datal = p.raw.readUInt32LE(16);
        if (p.raw.readUInt16LE(8) !== cid) throw new Error('C2HData for another command');
        if (datal !== (p.data?.length ?? 0)) throw new Error(`C2HData DATAL ${datal} with ${p.data?.length ?? 0} bytes`);
        if (datao !== parts.reduce((n, b) => n + b.length, 0)) throw new Error(`C2HData out of order at ${datao}`);
        parts.push(p.data!);
        if ((p.flags & 0x08) !== 0) {
          return { ...decodeCqe(Buffer.alloc(16)), cid, data: Buffer.concat(parts), c2hPdus, r2ts, bySuccessFlag: true };
        }
        continue;
      }
      if (p.type === 0x05) {
        const cqe = decodeCqe(p.raw, 8);
        if (cqe.cid !== cid) throw new Error(`CapsuleResp for CID ${cqe.cid}, expected ${cid}`);
        return { ...cqe, data: Buffer.concat(parts), c2hPdus, r2ts, bySuccessFlag: false };
      }
      throw new Error(`unexpected PDU type ${p.type}`);
    }
  }

  nextCid(): number {
    this.cid = (this.cid + 1) & 0xffff;
    return this.cid;
  }

  /** Fabrics Connect (NVMe-oF 1.1 §3.3), data in-capsule. */
  async connect(o: { qid: number; sqsize: number; subnqn: string; cntlid?: number; kato?: number; cattr?: number; hostnqn?: string }): Promise<Result> {
    const sqe = buildSqe({ opcode: 0x7f, cid: this.nextCid(), sgl: { id: 0x01, length: 1024 } });
    sqe[4] = 0x01; // FCTYPE Connect
    sqe.writeUInt16LE(0, 40); // RECFMT
    sqe.writeUInt16LE(o.qid, 42);
    sqe.writeUInt16LE(o.sqsize - 1, 44); // SQSIZE, 0's based
    sqe[46] = o.cattr ?? 0;
    sqe.writeUInt32LE(o.kato ?? 0, 48);
    const d = Buffer.alloc(1024);
    HOST_ID.copy(d, 0);
    d.writeUInt16LE(o.cntlid ?? 0xffff, 16);
    d.write(o.subnqn, 256, 'utf8');
    d.write(o.hostnqn ?? HOST_NQN, 512, 'utf8');
    return this.command(sqe, { data: d, inCapsule: true });
  }

  /** Property Get (NVMe-oF 1.1 §3.4): ATTRIB byte 40, OFST 44-47; value in DW0/DW1. */
  propertyGet(offset: number, eight: boolean): Promise<Result> {
    const sqe = buildSqe({ opcode: 0x7f, cid: this.nextCid() });
    sqe[4] = 0x04;
    sqe[40] = eight ? 1 : 0;
    sqe.writeUInt32LE(offset, 44);
    return this.command(sqe);
  }

  /** Property Set (NVMe-oF 1.1 §3.5): ATTRIB 40, OFST 44-47, VALUE 48-55. */
  propertySet(offset: number, value: number): Promise<Result> {
    const sqe = buildSqe({ opcode: 0x7f, cid: this.nextCid() });
    sqe[4] = 0x00;
    sqe[40] = 0;
    sqe.writeUInt32LE(offset, 44);
    sqe.writeBigUInt64LE(BigInt(value), 48);
    return this.command(sqe);
  }

  /** A command whose data (if any) the controller sends: SGL Transport Data Block (5Ah) of `length`. */
  admin(opcode: number, o: { nsid?: number; length?: number; cdw?: Partial<Record<10 | 11 | 12 | 13 | 14 | 15, number>> } = {}): Promise<Result> {
    return this.command(buildSqe({ opcode, cid: this.nextCid(), nsid: o.nsid, sgl: { id: 0x5a, length: o.length ?? 0 }, cdw: o.cdw }));
  }

  /** ICReq, admin Connect, CC.EN = 1 (IOSQES 6, IOCQES 4). Returns the CNTLID. */
  async enable(subnqn: string, o: { hdgst?: boolean; ddgst?: boolean; kato?: number; hostnqn?: string } = {}): Promise<number> {
    await this.initialize(o);
    const c = await this.connect({ qid: 0, sqsize: 32, subnqn, kato: o.kato, hostnqn: o.hostnqn });
    if (c.statusField !== 0) throw new Error(`admin Connect failed: status ${c.statusField.toString(16)}`);
    const cc = 1 | (6 << 16) | (4 << 20);
    const s = await this.propertySet(0x14, cc);
    if (s.statusField !== 0) throw new Error('Property Set CC failed');
    return c.dw0 & 0xffff;
  }
}

function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0, 0);
  return b;
}

/** Read/Write/Compare SQE (NVM 1.0 §3.2): SLBA CDW10-11, NLB CDW12 bits 15:0 (0's based), FUA bit 30. */
export function rwSqe(opcode: number, cid: number, nsid: number, lba: number, blocks: number, bytes: number, o: { inCapsule?: boolean; fua?: boolean } = {}): Buffer {
  return buildSqe({
    opcode,
    cid,
    nsid,
    sgl: { id: o.inCapsule ? 0x01 : 0x5a, length: bytes },
    cdw: { 10: lba % 2 ** 32, 11: Math.floor(lba / 2 ** 32), 12: ((blocks - 1) & 0xffff) | (o.fua ? 1 << 30 : 0) },
  });
}
