// NVMe/TCP PDUs (NVMe TCP Transport Specification 1.0, §3.6), shared by the
// target (target/nvme/) and a host. Every multi-byte field is little-endian
// (§3.6.1). A PDU is: the 8-byte common header (CH, §3.6.2.1), the rest of
// the PDU-specific header (PSH) up to HLEN, an optional header digest
// (HDGST), padding up to PDO, the data, and an optional data digest (DDGST).
// Digests are CRC32C (§3.6.2.6 / docs/nvme.md "Transport").
import { crc32c } from '../crc32c.js';

/** PDU-Type, CH byte 0 (§3.6.2.1, Figure "PDU Type Values"). */
export const PduType = {
  ICReq: 0x00,
  ICResp: 0x01,
  H2CTermReq: 0x02,
  C2HTermReq: 0x03,
  CapsuleCmd: 0x04,
  CapsuleResp: 0x05,
  H2CData: 0x06,
  C2HData: 0x07,
  R2T: 0x09,
} as const;

/** FLAGS, CH byte 1 (§3.6.2.1): bit 0 HDGSTF, bit 1 DDGSTF; bit 2 LAST_PDU and bit 3 SUCCESS (C2HData, §3.6.2.9; LAST_PDU also H2CData, §3.6.2.8). */
export const PduFlag = {
  HDGSTF: 0x01,
  DDGSTF: 0x02,
  LAST_PDU: 0x04,
  SUCCESS: 0x08,
} as const;

/** HLEN of each type (the fixed PSH sizes of §3.6.2.2-§3.6.2.10). */
export const HLEN: Record<number, number> = {
  [PduType.ICReq]: 128,
  [PduType.ICResp]: 128,
  [PduType.H2CTermReq]: 24,
  [PduType.C2HTermReq]: 24,
  [PduType.CapsuleCmd]: 72,
  [PduType.CapsuleResp]: 24,
  [PduType.H2CData]: 24,
  [PduType.C2HData]: 24,
  [PduType.R2T]: 24,
};

export const CH_LENGTH = 8;
export const DIGEST_LENGTH = 4;
/** A TermReq carries at most this much of the offending PDU's header as its data (§3.6.2.4/§3.6.2.5: PLEN ≤ 152). */
export const TERM_REQ_MAX_DATA = 128;

/** Fatal Error Status of a TermReq (§3.6.2.4 Figure "FES values"). */
export const Fes = {
  InvalidHeaderField: 0x01,
  PduSequenceError: 0x02,
  HeaderDigestError: 0x03,
  DataTransferOutOfRange: 0x04,
  DataTransferLimitExceeded: 0x05,
  UnsupportedParameter: 0x06,
} as const;

/** The common header (§3.6.2.1): type byte 0, flags byte 1, HLEN byte 2, PDO byte 3, PLEN bytes 4-7. */
export interface CommonHeader {
  type: number;
  flags: number;
  hlen: number;
  pdo: number;
  plen: number;
}

export function readCommonHeader(b: Buffer, at = 0): CommonHeader {
  return { type: b[at], flags: b[at + 1], hlen: b[at + 2], pdo: b[at + 3], plen: b.readUInt32LE(at + 4) };
}

/** What a connection negotiated in ICReq/ICResp (§3.6.2.2, §3.6.2.3). */
export interface Digests {
  header: boolean;
  data: boolean;
}

/** Where a PDU's data starts: after the header and its digest, aligned to (PDA + 1) dwords (§3.6.2.1 PDO; HPDA/CPDA §3.6.2.2). */
export function dataOffset(hlen: number, hdgst: boolean, pda: number): number {
  const after = hlen + (hdgst ? DIGEST_LENGTH : 0);
  const unit = (pda + 1) * 4;
  return pda === 0 ? after : Math.ceil(after / unit) * unit;
}

/**
 * Frames one PDU from its header (HLEN bytes, CH filled in here but for
 * type and type-specific flags) and optional data, adding digests as
 * negotiated (ICReq/ICResp and TermReqs never carry digests, §3.6.2.2-§3.6.2.5).
 * Returns the pieces to write, in order.
 */
export function framePdu(header: Buffer, data: Buffer | null, d: Digests, pda = 0): Buffer[] {
  const type = header[0];
  const noDigests = type === PduType.ICReq || type === PduType.ICResp || type === PduType.H2CTermReq || type === PduType.C2HTermReq;
  const hd = d.header && !noDigests;
  const dd = d.data && !noDigests && data !== null && data.length > 0;
  const hlen = header.length;
  const hasData = data !== null && data.length > 0;
  const term = type === PduType.H2CTermReq || type === PduType.C2HTermReq;
  // A TermReq's data follows its header at once and its PDO is reserved (§3.6.2.4, §3.6.2.5).
  const start = hasData ? (noDigests ? hlen : dataOffset(hlen, hd, pda)) : 0;
  const pdo = term ? 0 : start;
  const plen = (hasData ? start + data.length : hlen + (hd ? DIGEST_LENGTH : 0)) + (dd ? DIGEST_LENGTH : 0);
  header[1] = (header[1] & ~(PduFlag.HDGSTF | PduFlag.DDGSTF)) | (hd ? PduFlag.HDGSTF : 0) | (dd ? PduFlag.DDGSTF : 0);
  header[2] = hlen;
  header[3] = pdo;
  header.writeUInt32LE(plen, 4);
  const out: Buffer[] = [header];
  if (hd) out.push(u32(crc32c(header)));
  if (hasData) {
    const pad = start - hlen - (hd ? DIGEST_LENGTH : 0);
    if (pad > 0) out.push(Buffer.alloc(pad));
    out.push(data);
    if (dd) out.push(u32(crc32c(data)));
  }
  return out;
}

function u32(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32LE(v >>> 0, 0);
  return b;
}

/**
 * A zeroed header from Node's shared pool (allocUnsafe slices a pooled slab
 * for small sizes): Buffer.alloc makes a new ArrayBuffer for each, and a
 * queue makes one or two headers per command (docs/performance.md "NVMe/TCP
 * writes batched per loop turn").
 */
function zeroed(n: number): Buffer {
  return Buffer.allocUnsafe(n).fill(0);
}

/** ICReq (§3.6.2.2): PFV bytes 8-9 (0), HPDA byte 10, DGST byte 11 (bit 0 HDGST_ENABLE, bit 1 DDGST_ENABLE), MAXR2T bytes 12-15 (0's based). */
export function icReq(o: { hpda?: number; digests: Digests; maxR2T?: number }): Buffer {
  const h = Buffer.alloc(128);
  h[0] = PduType.ICReq;
  h.writeUInt16LE(0, 8);
  h[10] = o.hpda ?? 0;
  h[11] = (o.digests.header ? 1 : 0) | (o.digests.data ? 2 : 0);
  h.writeUInt32LE(o.maxR2T ?? 0, 12);
  return h;
}

/** ICResp (§3.6.2.3): PFV bytes 8-9 (0), CPDA byte 10, DGST byte 11, MAXH2CDATA bytes 12-15 (≥ 4096). */
export function icResp(o: { cpda: number; digests: Digests; maxH2CData: number }): Buffer {
  const h = Buffer.alloc(128);
  h[0] = PduType.ICResp;
  h.writeUInt16LE(0, 8);
  h[10] = o.cpda;
  h[11] = (o.digests.header ? 1 : 0) | (o.digests.data ? 2 : 0);
  h.writeUInt32LE(o.maxH2CData, 12);
  return h;
}

/** CapsuleCmd (§3.6.2.6): CH then the 64-byte SQE at bytes 8-71. */
export function capsuleCmd(sqe: Buffer): Buffer {
  const h = zeroed(72);
  h[0] = PduType.CapsuleCmd;
  sqe.copy(h, 8, 0, 64);
  return h;
}

/** CapsuleResp (§3.6.2.7): CH then the 16-byte CQE at bytes 8-23. */
export function capsuleResp(cqe: Buffer): Buffer {
  const h = zeroed(24);
  h[0] = PduType.CapsuleResp;
  cqe.copy(h, 8, 0, 16);
  return h;
}

/** C2HData (§3.6.2.9): CCCID bytes 8-9, DATAO bytes 12-15, DATAL bytes 16-19; flags LAST_PDU, SUCCESS. */
export function c2hData(cccid: number, datao: number, datal: number, last: boolean, success: boolean): Buffer {
  const h = zeroed(24);
  h[0] = PduType.C2HData;
  h[1] = (last ? PduFlag.LAST_PDU : 0) | (success ? PduFlag.SUCCESS : 0);
  h.writeUInt16LE(cccid, 8);
  h.writeUInt32LE(datao, 12);
  h.writeUInt32LE(datal, 16);
  return h;
}

/** H2CData (§3.6.2.8): CCCID bytes 8-9, TTAG bytes 10-11, DATAO bytes 12-15, DATAL bytes 16-19; flag LAST_PDU. */
export function h2cData(cccid: number, ttag: number, datao: number, datal: number, last: boolean): Buffer {
  const h = zeroed(24);
  h[0] = PduType.H2CData;
  h[1] = last ? PduFlag.LAST_PDU : 0;
  h.writeUInt16LE(cccid, 8);
  h.writeUInt16LE(ttag, 10);
  h.writeUInt32LE(datao, 12);
  h.writeUInt32LE(datal, 16);
  return h;
}

/** R2T (§3.6.2.10): CCCID bytes 8-9, TTAG bytes 10-11, R2TO bytes 12-15, R2TL bytes 16-19. */
export function r2t(cccid: number, ttag: number, r2to: number, r2tl: number): Buffer {
  const h = zeroed(24);
  h[0] = PduType.R2T;
  h.writeUInt16LE(cccid, 8);
  h.writeUInt16LE(ttag, 10);
  h.writeUInt32LE(r2to, 12);
  h.writeUInt32LE(r2tl, 16);
  return h;
}

/** H2CTermReq/C2HTermReq (§3.6.2.4, §3.6.2.5): FES bytes 8-9, FEI bytes 10-13; data: the offending PDU header. */
export function termReq(type: typeof PduType.H2CTermReq | typeof PduType.C2HTermReq, fes: number, fei: number): Buffer {
  const h = zeroed(24);
  h[0] = type;
  h.writeUInt16LE(fes, 8);
  h.writeUInt32LE(fei >>> 0, 10);
  return h;
}

/**
 * The received byte stream of one NVMe/TCP connection, cut into PDUs
 * (§3.6.1: a PDU's common header gives its PLEN, and PDUs follow each other
 * with nothing between). Socket reads arrive in chunks that split PDUs
 * anywhere; the stream keeps them as they came and joins bytes only where a
 * caller needs one contiguous header. Data can instead be copied out
 * straight from the chunks into its destination (copyOut), so a C2HData's
 * payload reaches the reader's buffer without an intermediate copy of the
 * whole PDU. Used by the host queue (initiator/nvme/queue.ts) and the
 * target's connection (target/nvme/connection.ts).
 */
export class PduStream {
  #chunks: Buffer[] = [];
  /**
   * Bytes of the first chunk already consumed. Kept as an offset rather than
   * cutting the chunk with subarray: a Buffer view per PDU consumed was a
   * measurable part of each 4 KiB read's cost on both sides
   * (docs/performance.md "NVMe/TCP: fewer objects per command").
   */
  #off = 0;
  #have = 0;

  /** Bytes received and not yet consumed. */
  get length(): number {
    return this.#have;
  }

  push(d: Buffer): void {
    if (d.length === 0) return;
    this.#chunks.push(d);
    this.#have += d.length;
  }

  /** Drops everything held (the connection is gone). */
  clear(): void {
    this.#chunks = [];
    this.#off = 0;
    this.#have = 0;
  }

  /** The first chunk, holding at least the first n bytes (n ≤ length) from #off: the chunks they span joined once when split. */
  #head(n: number): Buffer {
    if (n > this.#have) throw new RangeError(`PduStream: ${n} bytes asked for with ${this.#have} held`);
    const head = this.#chunks[0];
    if (head.length - this.#off >= n) return head;
    let k = 1;
    let sum = head.length - this.#off;
    while (sum < n) sum += this.#chunks[k++].length;
    const parts = this.#chunks.slice(0, k);
    parts[0] = head.subarray(this.#off);
    const joined = Buffer.concat(parts, sum);
    this.#chunks.splice(0, k, joined);
    this.#off = 0;
    return joined;
  }

  /** The common header of the next PDU (length ≥ CH_LENGTH), read in place: no view made. */
  commonHeader(): CommonHeader {
    return readCommonHeader(this.#head(CH_LENGTH), this.#off);
  }

  /** The first n bytes (n ≤ length), not consumed: a view when they lie in one chunk, else the chunks they span joined once. */
  peek(n: number): Buffer {
    const head = this.#head(n);
    return head.subarray(this.#off, this.#off + n);
  }

  /** The first n bytes, consumed (a view, as peek). Valid until the chunks it views are released by the socket's owner: parse it before the next read. */
  take(n: number): Buffer {
    const out = this.peek(n);
    this.skip(n);
    return out;
  }

  /** Consumes n bytes without looking at them. */
  skip(n: number): void {
    this.copyOut(n, null, 0);
  }

  /**
   * Consumes n bytes, copying them into dest from `at` straight from the
   * received chunks (dest null: nowhere), and returns their CRC32C
   * continued from `crc` when one is given (the data digest, §3.6.2.6), else 0.
   */
  copyOut(n: number, dest: Buffer | null, at: number, crc?: number): number {
    if (n > this.#have) throw new RangeError(`PduStream.copyOut(${n}) with ${this.#have} bytes held`);
    let left = n;
    let c = crc ?? 0;
    while (left > 0) {
      const head = this.#chunks[0];
      const off = this.#off;
      const m = Math.min(left, head.length - off);
      if (crc !== undefined) c = crc32c(head, c, off, off + m);
      if (dest !== null) head.copy(dest, at, off, off + m);
      at += m;
      left -= m;
      if (off + m === head.length) {
        this.#chunks.shift();
        this.#off = 0;
      } else this.#off = off + m;
    }
    this.#have -= n;
    return crc === undefined ? 0 : c;
  }
}
