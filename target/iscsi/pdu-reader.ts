// Frames iSCSI PDUs out of a TCP byte stream (RFC 7143 §11.2): the BHS, any
// AHS, the optional header digest, the data segment with its padding and the
// optional data digest. A PDU that lies within one received chunk is handed
// up as views of that chunk, without a copy; one that spans chunks is joined
// once. The data segment length is checked against what was declared before
// any of it is buffered, so a peer cannot make the target hold more than one
// PDU's worth.
import { crc32c } from '../../protocol/crc32c.js';
import { ahsLengthOf, BHS_LENGTH, dataLengthOf, padOf } from './pdu.js';

export interface ReceivedPdu {
  /** The 48-byte BHS (a view). */
  readonly bhs: Buffer;
  /** The AHS, empty when there is none. */
  readonly ahs: Buffer;
  /** The data segment without padding (a view). */
  readonly data: Buffer;
}

export type FrameError =
  | { kind: 'header-digest' }
  | { kind: 'data-digest'; bhs: Buffer }
  | { kind: 'too-large'; bhs: Buffer; length: number; limit: number };

const EMPTY = Buffer.alloc(0);

export class PduReader {
  headerDigest = false;
  dataDigest = false;
  /** The largest data segment accepted (our MaxRecvDataSegmentLength; 8192 during login). */
  maxDataSegment = 8192;
  private readonly chunks: Buffer[] = [];
  private buffered = 0;
  /** The PDU's whole length once its BHS is known; 0 while waiting for one. */
  private need = 0;
  private stopped = false;

  constructor(
    private readonly onPdu: (pdu: ReceivedPdu) => void,
    private readonly onError: (e: FrameError) => void,
  ) {}

  /** No more PDUs are delivered (the connection is ending). */
  stop(): void {
    this.stopped = true;
    this.chunks.length = 0;
    this.buffered = 0;
  }

  push(chunk: Buffer): void {
    if (this.stopped) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    while (!this.stopped) {
      if (this.need === 0) {
        if (this.buffered < BHS_LENGTH) return;
        const bhs = this.peek(BHS_LENGTH);
        const length = dataLengthOf(bhs);
        if (length > this.maxDataSegment) {
          this.onError({ kind: 'too-large', bhs: Buffer.from(bhs), length, limit: this.maxDataSegment });
          return this.stop();
        }
        const hd = this.headerDigest ? 4 : 0;
        const dd = this.dataDigest && length > 0 ? 4 : 0;
        this.need = BHS_LENGTH + ahsLengthOf(bhs) + hd + length + padOf(length) + dd;
      }
      if (this.buffered < this.need) return;
      const pdu = this.take(this.need);
      this.need = 0;
      this.deliver(pdu);
    }
  }

  private deliver(pdu: Buffer): void {
    const ahsLength = ahsLengthOf(pdu);
    let at = BHS_LENGTH + ahsLength;
    if (this.headerDigest) {
      if (pdu.readUInt32LE(at) !== crc32c(pdu, 0, 0, at)) {
        this.onError({ kind: 'header-digest' });
        return this.stop();
      }
      at += 4;
    }
    const bhs = pdu.subarray(0, BHS_LENGTH);
    const length = dataLengthOf(pdu);
    const padded = length + padOf(length);
    if (this.dataDigest && length > 0) {
      // RFC 7143 §13.1: the data digest covers the data segment and its padding.
      if (pdu.readUInt32LE(at + padded) !== crc32c(pdu, 0, at, at + padded)) {
        this.onError({ kind: 'data-digest', bhs: Buffer.from(bhs) });
        return this.stop();
      }
    }
    this.onPdu({ bhs, ahs: ahsLength > 0 ? pdu.subarray(BHS_LENGTH, BHS_LENGTH + ahsLength) : EMPTY, data: length > 0 ? pdu.subarray(at, at + length) : EMPTY });
  }

  /** The first n buffered bytes without consuming them. */
  private peek(n: number): Buffer {
    const first = this.chunks[0];
    if (first.length >= n) return first.subarray(0, n);
    return Buffer.concat(this.chunks, Math.min(this.buffered, Math.max(n, 0))).subarray(0, n);
  }

  /** Consumes n bytes: a view when the first chunk holds them, else one copy. */
  private take(n: number): Buffer {
    this.buffered -= n;
    const first = this.chunks[0];
    if (first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const c = this.chunks[0];
      const k = Math.min(c.length, n - at);
      c.copy(out, at, 0, k);
      at += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    return out;
  }
}
