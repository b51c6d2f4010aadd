// The PDU side of one NVMe/TCP connection (NVMe TCP Transport 1.0 §3.6):
// the received byte stream framed into PDUs and checked (the common header
// before the rest is buffered, then the digests), ICReq answered with ICResp
// (§3.6.2.2, §3.6.2.3), CapsuleCmd and H2CData handed to the queue
// (connection.ts), and PDUs framed and written to the socket, with the
// C2HTermReq that ends a connection on a malformed PDU (§3.6.2.5,
// docs/nvme.md "Bad input"). What the queue does with a command is not here.
import type { Socket } from 'node:net';
import { crc32c } from '../../protocol/crc32c.js';
import { DIGEST_LENGTH, Fes, framePdu, icResp, PduFlag, PduStream, PduType, termReq, type CommonHeader, type Digests } from '../../protocol/nvme/pdu.js';
import type { TargetLogger } from '../connection/environment.js';
import { checkHeader, MAX_H2C_DATA, type Fatal } from './framing.js';

/** Bytes queued on the socket beyond which reading stops until it drains. */
const OUTPUT_HIGH_WATER = 4 * 1024 * 1024;

/**
 * Corked bytes after which a command's last PDU is written at once instead of
 * at the end of the loop turn (send). Four 4 KiB reads: flushing every two
 * was slower than not at all, every four to six the fastest
 * (docs/performance.md "NVMe/TCP: the first answers of a burst go out early").
 */
const EARLY_FLUSH_BYTES = 16 * 1024;

/** What the channel hands to the queue above it. */
export interface PduReceiver {
  /** The most in-capsule data a CapsuleCmd may carry now (IOCCSZ, or the admin queue's). */
  readonly inCapsuleMax: number;
  readonly log: TargetLogger;
  /** ICReq answered: capsules may come (the queue waits for its Fabrics Connect). */
  initialized(): void;
  /** A CapsuleCmd or H2CData with its header digest checked; `data` (null without) with digestOk false on a data digest mismatch. */
  pdu(h: CommonHeader, pdu: Buffer, data: Buffer | null, digestOk: boolean): Fatal | null;
  /** The host ended the connection (H2CTermReq), or the channel failed: the connection ends at once. */
  abort(why: string): void;
  /** A C2HTermReq was queued: the connection ends once it is written. */
  terminated(why: string): void;
}

export class PduChannel {
  /** What ICReq negotiated (§3.6.2.2); none before it. */
  digests: Digests = { header: false, data: false };
  #hpda = 0;
  #initialized = false;
  #stopped = false;
  /** Corked until the end of this loop turn, or until EARLY_FLUSH_BYTES (send). */
  #corked = false;
  /** Bytes queued since the socket was last uncorked. */
  #corkedBytes = 0;
  /** The received bytes, cut into PDUs (protocol/nvme/pdu.ts, shared with the host's queue). */
  readonly #in = new PduStream();

  constructor(
    private readonly socket: Socket,
    private readonly up: PduReceiver,
  ) {
    socket.on('data', (d: Buffer) => this.#onData(d));
    socket.on('drain', () => socket.resume());
  }

  /** No more PDUs are delivered and what is buffered is dropped (the connection is ending). */
  stop(): void {
    this.#stopped = true;
    this.#in.clear();
  }

  #onData(d: Buffer): void {
    if (this.#stopped) return;
    this.#in.push(d);
    try {
      this.#parse();
    } catch (e) {
      this.up.log.error(`NVMe/TCP connection failed: ${e instanceof Error ? e.message : String(e)}`);
      this.up.abort('internal error');
    }
  }

  // ---- framing (§3.6.1, §3.6.2.1) ----

  #parse(): void {
    const input = this.#in;
    while (!this.#stopped && input.length >= 8) {
      const ch = input.commonHeader();
      const bad = checkHeader(ch, !this.#initialized, this.digests, this.up.inCapsuleMax);
      if (bad) return this.terminate(bad, input.peek(Math.min(input.length, ch.hlen || 8, 128)));
      if (input.length < ch.plen) return;
      // One PDU as one buffer: a view when it came in one read, else its chunks joined (not the bytes after it).
      const pdu = input.take(ch.plen);
      const fatal = this.#onPdu(ch, pdu);
      if (fatal) return this.terminate(fatal, pdu.subarray(0, Math.min(ch.hlen, 128)));
    }
  }

  #onPdu(h: CommonHeader, pdu: Buffer): Fatal | null {
    if (h.type === PduType.ICReq) return this.#icReq(pdu);
    if (h.type === PduType.H2CTermReq) {
      this.up.log.warn(`NVMe/TCP host ended the connection: H2CTermReq FES ${pdu.readUInt16LE(8)} FEI ${pdu.readUInt32LE(10)}`);
      this.up.abort('H2CTermReq');
      return null;
    }
    const hd = this.digests.header;
    if (hd && crc32c(pdu, 0, 0, h.hlen) !== pdu.readUInt32LE(h.hlen)) return { fes: Fes.HeaderDigestError, fei: 0, why: 'header digest mismatch' };
    let data: Buffer | null = null;
    let digestOk = true;
    if (h.plen > h.hlen + (hd ? DIGEST_LENGTH : 0)) {
      const dd = this.digests.data;
      data = pdu.subarray(h.pdo, h.plen - (dd ? DIGEST_LENGTH : 0));
      if (dd) digestOk = crc32c(data) === pdu.readUInt32LE(h.plen - DIGEST_LENGTH);
    }
    return this.up.pdu(h, pdu, data, digestOk);
  }

  /** ICReq (§3.6.2.2) → ICResp (§3.6.2.3): PFV 0, HPDA ≤ 31, digests as asked, CPDA 0, MAXH2CDATA. */
  #icReq(pdu: Buffer): Fatal | null {
    if (pdu.readUInt16LE(8) !== 0) return { fes: Fes.UnsupportedParameter, fei: 8, why: `ICReq PFV ${pdu.readUInt16LE(8)}` };
    if (pdu[10] > 31) return { fes: Fes.InvalidHeaderField, fei: 10, why: `ICReq HPDA ${pdu[10]}` };
    this.#hpda = pdu[10];
    this.digests = { header: (pdu[11] & 1) !== 0, data: (pdu[11] & 2) !== 0 };
    this.#initialized = true;
    this.send(icResp({ cpda: 0, digests: this.digests, maxH2CData: MAX_H2C_DATA }));
    this.up.initialized();
    return null;
  }

  // ---- sending ----

  /**
   * Frames one PDU (its header, data, digests as negotiated; data aligned to
   * the host's HPDA) and queues it; `written` runs once the socket is done
   * with it (written, or failed with the connection). Writes made in one turn
   * of the event loop go out as one writev: the socket is corked until
   * setImmediate, after this turn's I/O callbacks and the promise chains they
   * started, so a C2HData, its CapsuleResp and the answers of every command
   * that finished in the turn share one system call, as the iSCSI listener's
   * do (target/iscsi/connection.ts send). Corked one PDU at a time, a 4 KiB
   * read cost two writes, and rblkd twice the iSCSI listener's CPU per read
   * (docs/performance.md "NVMe/TCP writes batched per loop turn").
   *
   * The disk completes a queue's reads in bursts: at QD32 the ring hands JS
   * about 31 completions at once. Held to the turn's end, the first answers
   * wait while rblkd answers the rest, and the host idles. So once
   * EARLY_FLUSH_BYTES are corked, a PDU that ends a command (CapsuleResp, or a
   * C2HData with SUCCESS) is written at once; the rest of the turn's PDUs are
   * corked again behind it. Whole PDUs only: the host reads what it gets.
   */
  send(header: Buffer, data: Buffer | null = null, written?: () => void): void {
    const s = this.socket;
    if (s.destroyed) {
      written?.();
      return;
    }
    if (!this.#corked) {
      this.#corked = true;
      s.cork();
      setImmediate(this.#uncork);
    }
    if (data !== null && data.length === 0) data = null;
    if (!this.digests.header && (data === null || (header[0] === PduType.C2HData && this.#hpda === 0 && !this.digests.data))) {
      // The common cases, no digests: the header (CH filled in here; type and flags are the caller's), then a
      // C2HData's data right after it (PDO = HLEN with HPDA 0), without framePdu's array of pieces.
      const hlen = header.length;
      header[2] = hlen;
      if (data === null) {
        header[3] = 0;
        header.writeUInt32LE(hlen, 4);
        if (written === undefined) s.write(header);
        else s.write(header, () => written());
      } else {
        header[3] = hlen;
        header.writeUInt32LE(hlen + data.length, 4);
        s.write(header);
        if (written === undefined) s.write(data);
        else s.write(data, () => written());
      }
    } else {
      const pieces = framePdu(header, data, this.digests, data === null ? 0 : this.#hpda);
      const last = pieces.length - 1;
      for (let i = 0; i < last; i++) s.write(pieces[i]);
      if (written === undefined) s.write(pieces[last]);
      else s.write(pieces[last], () => written());
    }
    this.#corkedBytes += header.length + (data === null ? 0 : data.length);
    if (this.#corkedBytes >= EARLY_FLUSH_BYTES && endsCommand(header)) this.#uncork();
    if (s.writableLength > OUTPUT_HIGH_WATER) s.pause();
  }

  /** Writes what is corked; the turn's setImmediate finds nothing corked then, or corks of its own. */
  readonly #uncork = (): void => {
    this.#corkedBytes = 0;
    if (!this.#corked) return;
    this.#corked = false;
    this.socket.uncork();
  };

  /** Ends the connection for a fatal transport error: C2HTermReq with FES and FEI, the offending header as data (§3.6.2.5). */
  terminate(f: Fatal, offending: Buffer): void {
    this.up.log.warn(`NVMe/TCP protocol error, ending the connection: ${f.why} (C2HTermReq FES ${f.fes}, FEI ${f.fei})`);
    this.send(termReq(PduType.C2HTermReq, f.fes, f.fei), Buffer.from(offending));
    this.stop();
    this.up.terminated(f.why);
  }
}

/** A CapsuleResp, or a C2HData that completes its command itself (SUCCESS, §3.6.2.9): the host can act on it alone. */
function endsCommand(header: Buffer): boolean {
  return header[0] === PduType.CapsuleResp || (header[0] === PduType.C2HData && (header[1] & PduFlag.SUCCESS) !== 0);
}
