// A minimal iSCSI initiator over a raw socket, for tests that must send what
// real initiators never do (malformed PDUs, CmdSN outside the window, a
// second login of the same ISID) and read the target's exact answers.
import { connect, type Socket } from 'node:net';
import { crc32c } from '../../protocol/crc32c.js';
import { PduReader, type ReceivedPdu } from '../../target/iscsi/pdu-reader.js';
import { encodeText, parseText } from '../../target/iscsi/text.js';

export interface RawPdu {
  bhs: Buffer;
  data: Buffer;
  op: number;
}

/**
 * One PDU's bytes as the wire carries them: the BHS with its data segment
 * length set, the header digest, the data padded to 4 bytes, the data digest
 * (RFC 7143 §11.1), the digests only when negotiated.
 */
export function framePdu(bhs: Buffer, data: Buffer = Buffer.alloc(0), headerDigest = false, dataDigest = false): Buffer {
  bhs[5] = (data.length >> 16) & 0xff;
  bhs[6] = (data.length >> 8) & 0xff;
  bhs[7] = data.length & 0xff;
  const parts = [bhs];
  if (headerDigest) {
    const d = Buffer.alloc(4);
    d.writeUInt32LE(crc32c(bhs));
    parts.push(d);
  }
  if (data.length > 0) {
    const padded = Buffer.alloc(data.length + ((4 - (data.length & 3)) & 3));
    data.copy(padded);
    parts.push(padded);
    if (dataDigest) {
      const d = Buffer.alloc(4);
      d.writeUInt32LE(crc32c(padded));
      parts.push(d);
    }
  }
  return Buffer.concat(parts);
}

let nextIsid = 1;

export class RawInitiator {
  readonly received: RawPdu[] = [];
  private waiters: (() => void)[] = [];
  private readonly reader: PduReader;
  closed = false;
  cmdSN = 1;
  expStatSN = 0;
  headerDigest = false;
  dataDigest = false;
  private readonly closedP: Promise<void>;

  private constructor(readonly socket: Socket) {
    this.reader = new PduReader(
      (p: ReceivedPdu) => {
        if ((p.bhs[0] & 0x3f) === 0x20 && p.bhs.readUInt32BE(20) !== 0xffffffff) {
          // The target's ping: answered as real initiators do (RFC 7143 §11.18), and kept for tests that look.
          const h = Buffer.alloc(48);
          h[0] = 0x40;
          h[1] = 0x80;
          p.bhs.copy(h, 8, 8, 16);
          h.writeUInt32BE(0xffffffff, 16);
          h.writeUInt32BE(p.bhs.readUInt32BE(20), 20);
          h.writeUInt32BE(this.cmdSN, 24);
          this.send(h);
        }
        this.received.push({ bhs: Buffer.from(p.bhs), data: Buffer.from(p.data), op: p.bhs[0] & 0x3f });
        for (const w of this.waiters.splice(0)) w();
      },
      () => socket.destroy(),
    );
    this.reader.maxDataSegment = 1 << 24;
    socket.on('data', (d: Buffer) => this.reader.push(d));
    this.closedP = new Promise((r) =>
      socket.on('close', () => {
        this.closed = true;
        for (const w of this.waiters.splice(0)) w();
        r();
      }),
    );
    socket.on('error', () => undefined);
  }

  /** localAddress: the source address to connect from (127.0.0.2 ... stand for other hosts on loopback). */
  static open(port: number, localAddress?: string): Promise<RawInitiator> {
    return new Promise((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port, ...(localAddress === undefined ? {} : { localAddress }) }, () => resolve(new RawInitiator(s)));
      s.once('error', reject);
    });
  }

  get whenClosed(): Promise<void> {
    return this.closedP;
  }

  useDigests(header: boolean, data: boolean): void {
    this.headerDigest = header;
    this.dataDigest = data;
    this.reader.headerDigest = header;
    this.reader.dataDigest = data;
  }

  send(bhs: Buffer, data: Buffer = Buffer.alloc(0)): void {
    this.socket.write(framePdu(bhs, data, this.headerDigest, this.dataDigest));
  }

  /** The next PDU with this opcode (consumed), or null when the connection closed first. */
  async next(op?: number, timeoutMs = 5000): Promise<RawPdu | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.received.findIndex((p) => op === undefined || p.op === op);
      if (i >= 0) {
        const p = this.received.splice(i, 1)[0];
        if (p.op !== 0x25 || (p.bhs[1] & 0x01) !== 0) this.expStatSN = (p.bhs.readUInt32BE(24) + 1) >>> 0;
        return p;
      }
      if (this.closed || Date.now() > deadline) return null;
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  /** A one-PDU login straight to the full feature phase (no security stage). */
  async login(o: { initiator: string; target?: string; isid?: Buffer; tsih?: number; keys?: [string, string][]; discovery?: boolean }): Promise<RawPdu | null> {
    const h = Buffer.alloc(48);
    h[0] = 0x43; // Login, immediate
    h[1] = 0x80 | (1 << 2) | 3; // T, CSG=1, NSG=3
    (o.isid ?? Buffer.from([0x80, 0, 0, 0x10, 0, nextIsid++ & 0xff])).copy(h, 8);
    h.writeUInt16BE(o.tsih ?? 0, 14);
    h.writeUInt32BE(1, 16);
    h.writeUInt32BE(this.cmdSN, 24);
    h.writeUInt32BE(this.expStatSN, 28);
    const keys: [string, string][] = [['InitiatorName', o.initiator], ['SessionType', o.discovery ? 'Discovery' : 'Normal']];
    if (!o.discovery) keys.push(['TargetName', o.target ?? '']);
    keys.push(...(o.keys ?? []));
    this.send(h, encodeText(keys));
    return this.next(0x23);
  }

  /** A SCSI command PDU (non-immediate unless told), data as immediate data. */
  command(o: { itt: number; cdb: Buffer; read?: boolean; write?: boolean; edtl: number; lun?: number; cmdSN?: number; immediate?: boolean; data?: Buffer; final?: boolean }): void {
    const h = Buffer.alloc(48);
    h[0] = 0x01 | (o.immediate ? 0x40 : 0);
    h[1] = (o.final === false ? 0 : 0x80) | (o.read ? 0x40 : 0) | (o.write ? 0x20 : 0);
    h[9] = o.lun ?? 0;
    h.writeUInt32BE(o.itt, 16);
    h.writeUInt32BE(o.edtl, 20);
    const sn = o.cmdSN ?? this.cmdSN;
    h.writeUInt32BE(sn, 24);
    if (o.cmdSN === undefined && !o.immediate) this.cmdSN = (this.cmdSN + 1) >>> 0;
    h.writeUInt32BE(this.expStatSN, 28);
    o.cdb.copy(h, 32);
    this.send(h, o.data);
  }

  close(): void {
    this.socket.destroy();
  }
}

export const textOf = (p: RawPdu): Map<string, string> => new Map(parseText(p.data));
export const loginStatus = (p: RawPdu): number => (p.bhs[36] << 8) | p.bhs[37];
