// One NVMe/TCP queue as a host runs it: one TCP connection (NVMe TCP
// Transport 1.0 §3.3; NVMe-oF 1.1 §3.3: each queue is its own connection).
// It sends ICReq and checks ICResp (§3.6.2.2, §3.6.2.3), the Fabrics Connect
// (NVMe-oF 1.1 §3.3), and then commands: write data in the capsule up to the
// in-capsule size (§3.6.2.6) or in H2CData PDUs answering the controller's
// R2T (§3.6.2.10, §3.6.2.8), read data from C2HData (§3.6.2.9, SUCCESS
// included), completions from CapsuleResp (§3.6.2.7). A C2HTermReq
// (§3.6.2.5), a malformed PDU, a digest mismatch, a command timeout or a
// closed socket loses the queue: every command still on it rejects with a
// QueueLostError, which the session (session.ts) answers by reconnecting and
// reissuing them (docs/nvme.md "The rblk library as an NVMe/TCP host").
import { connect as tcpConnect, type Socket } from 'node:net';
import { crc32c } from '../../protocol/crc32c.js';
import { connectData, connectSqe, isSuccess, parseCqe, SglId, Status, type NvmeStatus } from '../../protocol/nvme/command.js';
import { CH_LENGTH, DIGEST_LENGTH, Fes, framePdu, h2cData, HLEN, icReq, PduFlag, PduStream, PduType, termReq, type CommonHeader, type Digests } from '../../protocol/nvme/pdu.js';
import { RblkError } from '../errors.js';

/** In-capsule data the admin queue always takes (TCP 1.0 §3.3: 8 KiB for admin and Fabrics commands). */
export const ADMIN_IN_CAPSULE = 8192;
/** The largest PDU accepted from a controller: a C2HData of up to 1 MiB plus headers; anything larger is a framing error. */
const MAX_PDU = (1 << 20) + 256;

/** The queue's connection ended; its unanswered commands may be reissued on another. */
export class QueueLostError extends Error {
  constructor(readonly why: string) {
    super(why);
    this.name = 'QueueLostError';
  }
}

export interface Completion {
  status: NvmeStatus;
  dw0: number;
  dw1: number;
  /** C2HData received, for a command that reads. */
  data: Buffer | null;
}

export interface Command {
  /** The 64-byte SQE; the queue writes its CID (bytes 2-3) and the data SGL (bytes 24-39). */
  sqe: Buffer;
  /** Host-to-controller data. */
  write?: Buffer;
  /** Controller-to-host bytes expected. */
  readLength?: number;
  /**
   * Where they go (readLength bytes); a new buffer when absent. C2HData is
   * copied into it straight from the socket's chunks, with no copy of the
   * PDU between. Filled again if the command is reissued.
   */
  readInto?: Buffer;
  /** False: not sent again after its queue was lost (a reservation command's second effect could differ). Default true. */
  idempotent?: boolean;
  /** The registered buffer its data lies in (session.allocate()): not reissued once it is released. */
  registered?: { readonly valid: boolean };
}

export interface QueueOptions {
  address: string;
  port: number;
  qid: number;
  /** Entries asked for at Connect (SQSIZE + 1). */
  size: number;
  digests: Digests;
  hostnqn: string;
  hostid: Buffer;
  subnqn: string;
  /** FFFFh for the admin queue (dynamic model); the controller's for an I/O queue. */
  cntlid: number;
  /** Connect's KATO (admin queue), ms. */
  kato: number;
  /** In-capsule data bytes the controller takes on this queue. */
  inCapsule: number;
  connectTimeoutMs: number;
  /** A command unanswered this long loses the queue (0: never). */
  commandTimeoutMs: number;
  /**
   * Ask the controller to disable SQ flow control (Connect CATTR bit 2,
   * NVMe-oF 1.1 §3.3; TCP 1.0 §3.3.2): a successful read then completes by
   * the SUCCESS flag of its last C2HData, without a CapsuleResp.
   */
  disableSqFlowControl?: boolean;
}

interface Pending {
  readonly cid: number;
  readonly cmd: Command;
  readonly resolve: (c: Completion) => void;
  readonly reject: (e: Error) => void;
  data: Buffer | null;
  received: number;
  /** When it was sent (performance.now()), for the command timeout's sweep. */
  readonly sent: number;
}

function timeoutError(what: string, ms: number): RblkError {
  return new RblkError('TIMEOUT', `${what}: no answer within ${ms} ms`);
}

export class NvmeQueue {
  readonly qid: number;
  /** Commands outstanding at most: SQSIZE (one entry of the ring is always empty, Base 2.0 §3.3.1.5). */
  readonly depth: number;
  /** The controller's MAXH2CDATA (ICResp). */
  maxH2CData = 0;
  /** Set from the Connect completion (DW0 bits 15:0). */
  cntlid = 0xffff;
  /** Commands completed by a C2HData SUCCESS flag rather than a CapsuleResp. */
  bySuccessFlag = 0;
  #lost: QueueLostError | null = null;
  readonly #in = new PduStream();
  readonly #pending = new Map<number, Pending>();
  readonly #waiting: (() => void)[] = [];
  #nextCid = 0;
  #digests: Digests = { header: false, data: false };
  #onLost: ((e: QueueLostError) => void) | null = null;
  #icResp: ((pdu: Buffer) => void) | null = null;
  /** One sweep for the command timeout rather than a timer per command (a timer per I/O costs more than the I/O's framing). */
  #sweep: NodeJS.Timeout | null = null;
  /** Resolves when the queue is lost or closed, whoever asked for it. */
  /** Corked until the end of this turn of the event loop (#send). */
  #corked = false;
  readonly #whenLost: Promise<QueueLostError>;
  #resolveLost!: (e: QueueLostError) => void;

  private constructor(
    private readonly socket: Socket,
    readonly o: QueueOptions,
  ) {
    this.qid = o.qid;
    this.depth = Math.max(1, o.size - 1);
    this.#whenLost = new Promise((r) => (this.#resolveLost = r));
    socket.on('data', (d: Buffer) => this.#onData(d));
    socket.on('error', (e) => this.#lose(`connection error: ${e.message}`));
    socket.on('close', () => this.#lose('connection closed by the controller'));
    const ms = o.commandTimeoutMs;
    // The admin queue has no sweep: Keep Alive and submitWithin's deadlines watch it.
    if (ms > 0 && o.qid !== 0) {
      this.#sweep = setInterval(() => this.#expire(ms), Math.max(10, Math.min(1000, Math.floor(ms / 4))));
      this.#sweep.unref();
    }
  }

  /** The queue is lost if its oldest command has gone unanswered for commandTimeoutMs (as a Linux host resets the controller). */
  #expire(ms: number): void {
    const now = performance.now();
    for (const p of this.#pending.values()) {
      if (now - p.sent >= ms) return this.#lose(`command ${p.cid} (opcode ${p.cmd.sqe[0]}) unanswered for ${ms} ms`);
    }
  }

  /** TCP connect, ICReq/ICResp, Fabrics Connect: a queue ready for commands, or a typed error. */
  static async open(o: QueueOptions): Promise<NvmeQueue> {
    const socket = tcpConnect({ host: o.address, port: o.port, noDelay: true });
    const q = new NvmeQueue(socket, o);
    const timer = setTimeout(() => q.close(`no Connect within ${o.connectTimeoutMs} ms`), o.connectTimeoutMs);
    try {
      const failed = q.#whenLost.then((e) => Promise.reject(e));
      failed.catch(() => undefined);
      await Promise.race([new Promise<void>((resolve) => socket.once('connect', resolve)), failed]);
      await Promise.race([q.#initialize(), failed]);
      const sqe = connectSqe({ cid: 0, qid: o.qid, sqsize: o.size - 1, kato: o.qid === 0 ? o.kato : 0, cattr: o.disableSqFlowControl === true ? 1 << 2 : 0 });
      const c = await q.submit({ sqe, write: connectData({ hostid: o.hostid, cntlid: o.cntlid, subnqn: o.subnqn, hostnqn: o.hostnqn }) });
      if (!isSuccess(c.status)) {
        q.close('Connect refused');
        throw new RblkError('LOGIN_FAILED', `NVMe Fabrics Connect of queue ${o.qid} to ${o.subnqn} at ${o.address}:${o.port} refused: ${describeStatus(c.status)}${c.status.sct === 1 && c.status.sc === 0x82 ? ` (invalid parameter at offset ${c.dw0 & 0xffff} of the ${(c.dw0 >> 16) & 1 ? 'data' : 'SQE'})` : ''}`, { cause: c.status });
      }
      q.cntlid = c.dw0 & 0xffff;
      return q;
    } catch (e) {
      q.close('connect failed');
      if (e instanceof RblkError) throw e;
      if (e instanceof QueueLostError) throw new RblkError('LOGIN_FAILED', e.message, { cause: e });
      throw new RblkError('LOGIN_FAILED', `NVMe/TCP queue ${o.qid} to ${o.address}:${o.port}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Called once when the queue is lost (not after close()). */
  set onLost(f: ((e: QueueLostError) => void) | null) {
    this.#onLost = f;
  }

  get lost(): boolean {
    return this.#lost !== null;
  }

  get outstanding(): number {
    return this.#pending.size;
  }

  /** ICReq (§3.6.2.2): PFV 0, HPDA 0, digests as asked, MAXR2T 0 (one R2T outstanding per command); ICResp checked (§3.6.2.3). */
  async #initialize(): Promise<void> {
    const resp = new Promise<Buffer>((resolve) => (this.#icResp = resolve));
    this.#send(framePdu(icReq({ hpda: 0, digests: this.o.digests, maxR2T: 0 }), null, this.#digests));
    const pdu = await resp;
    const pfv = pdu.readUInt16LE(8);
    const cpda = pdu[10];
    const dgst = pdu[11];
    const maxH2CData = pdu.readUInt32LE(12);
    if (pfv !== 0) throw this.#fatal(Fes.UnsupportedParameter, 8, `ICResp PFV ${pfv}`);
    // CPDA > 0 would pad C2HData; the reader below honours PDO whatever it is, so any CPDA ≤ 31 is taken.
    if (cpda > 31) throw this.#fatal(Fes.InvalidHeaderField, 10, `ICResp CPDA ${cpda}`);
    // The controller grants the digests the host asked for or refuses; it may not add any (§3.6.2.3).
    const d = { header: (dgst & 1) !== 0, data: (dgst & 2) !== 0 };
    if ((d.header && !this.o.digests.header) || (d.data && !this.o.digests.data)) throw this.#fatal(Fes.InvalidHeaderField, 11, `ICResp DGST ${dgst} grants digests not asked for`);
    if (maxH2CData < 4096 || maxH2CData % 4 !== 0) throw this.#fatal(Fes.InvalidHeaderField, 12, `ICResp MAXH2CDATA ${maxH2CData}`);
    this.#digests = d;
    this.maxH2CData = maxH2CData;
  }

  /**
   * Sends one command and resolves its completion; waits for a free entry
   * when the queue is full. Not an async function: with an entry free (nearly
   * always) the one promise made is the completion's.
   */
  submit(cmd: Command): Promise<Completion> {
    if (this.#lost) return Promise.reject(this.#lost);
    if (this.#pending.size >= this.depth) return this.#submitWhenRoom(cmd);
    return new Promise<Completion>((resolve, reject) => this.#issue(cmd, resolve, reject));
  }

  async #submitWhenRoom(cmd: Command): Promise<Completion> {
    while (this.#pending.size >= this.depth && this.#lost === null) await new Promise<void>((r) => this.#waiting.push(r));
    if (this.#lost) throw this.#lost;
    return new Promise<Completion>((resolve, reject) => this.#issue(cmd, resolve, reject));
  }

  /** The CapsuleCmd of one command, queued on the socket, and its entry taken (in a promise's executor: what throws rejects). */
  #issue(cmd: Command, resolve: (c: Completion) => void, reject: (e: Error) => void): void {
    // CIDs 0-FFFEh: FFFFh means "no command" in the error log and Abort (Base 2.0 §5.16.1.2).
    do this.#nextCid = (this.#nextCid + 1) % 0xffff;
    while (this.#pending.has(this.#nextCid));
    const cid = this.#nextCid;
    // The CapsuleCmd (§3.6.2.6): the SQE at bytes 8-71, its CID (SQE bytes 2-3) and SGL1 (SQE bytes 24-39) set here.
    const capsule = Buffer.allocUnsafe(HLEN[PduType.CapsuleCmd]);
    capsule.fill(0, 0, 8);
    capsule[0] = PduType.CapsuleCmd;
    cmd.sqe.copy(capsule, 8, 0, 64);
    capsule.writeUInt16LE(cid, 8 + 2);
    const w = cmd.write;
    const readLength = cmd.readLength ?? 0;
    const inCapsule = w !== undefined && w.length > 0 && w.length <= this.o.inCapsule;
    if ((w !== undefined && w.length > 0) || readLength > 0) {
      // SGL1 (Base 2.0 §4.3.2; TCP 1.0 §3.3.1): in-capsule Data Block at offset 0, or a Transport Data Block moved by R2T/H2CData or C2HData.
      capsule.fill(0, 8 + 24, 8 + 32);
      capsule.writeUInt32LE(w !== undefined && w.length > 0 ? w.length : readLength, 8 + 32);
      capsule[8 + 39] = inCapsule ? SglId.InCapsule : SglId.TransportData;
    }
    const p: Pending = { cid, cmd, resolve, reject, data: null, received: 0, sent: performance.now() };
    if (readLength > 0) p.data = cmd.readInto !== undefined && cmd.readInto.length === readLength ? cmd.readInto : Buffer.allocUnsafe(readLength);
    this.#pending.set(cid, p);
    if (!inCapsule && !this.#digests.header) {
      // No data and no digest (every read): the capsule is the whole PDU, its CH filled in here rather than by framePdu.
      capsule[2] = HLEN[PduType.CapsuleCmd];
      capsule.writeUInt32LE(HLEN[PduType.CapsuleCmd], 4);
      this.#send1(capsule);
    } else this.#send(framePdu(capsule, inCapsule ? w : null, this.#digests));
  }

  /** An admin command with a deadline: the admin queue has no per-command timer (Keep Alive watches it). */
  async submitWithin(cmd: Command, ms: number, what: string): Promise<Completion> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(timeoutError(what, ms));
        // The entry stays taken until the controller answers, which it did not: the queue is not trusted further.
        this.#lose(`${what} unanswered for ${ms} ms`);
      }, ms);
    });
    try {
      return await Promise.race([this.submit(cmd), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Ends the connection; commands still on it reject with QueueLostError. onLost is not called. */
  close(why = 'closed by the host'): void {
    this.#onLost = null;
    this.#lose(why);
  }

  #lose(why: string): void {
    if (this.#lost) return;
    this.#lost = new QueueLostError(`NVMe/TCP queue ${this.qid} at ${this.o.address}:${this.o.port}: ${why}`);
    // What is queued (an H2CTermReq) is handed to the socket before it goes, as when every PDU was written at once.
    this.#uncork();
    this.socket.destroy();
    if (this.#sweep) clearInterval(this.#sweep);
    this.#in.clear();
    for (const p of this.#pending.values()) p.reject(this.#lost);
    this.#pending.clear();
    for (const w of this.#waiting.splice(0)) w();
    this.#resolveLost(this.#lost);
    const f = this.#onLost;
    this.#onLost = null;
    f?.(this.#lost);
  }

  /** A fatal transport error of ours to report: H2CTermReq with FES/FEI (§3.6.2.4), then the queue is lost. */
  #fatal(fes: number, fei: number, why: string, offending: Buffer = Buffer.alloc(0)): QueueLostError {
    if (!this.#lost) this.#send(framePdu(termReq(PduType.H2CTermReq, fes, fei), offending.length > 0 ? Buffer.from(offending.subarray(0, 128)) : null, this.#digests));
    this.#lose(`protocol error from the controller: ${why} (H2CTermReq FES ${fes})`);
    return this.#lost!;
  }

  /**
   * Queues a PDU's pieces. What is sent from one I/O callback, and from the
   * promise chains it started, goes out in one write: the socket stays
   * corked until a microtask queued behind them. So a burst of completions
   * that arrives in two or three socket reads (64 KiB each) goes back as as
   * many writes, each as soon as its read is handled. It used to wait for
   * setImmediate, one write per loop turn: 0.032 writes per 4 KiB read at
   * QD32 against 0.087 (docs/performance.md "NVMe/TCP: fewer objects per
   * command"), but then the commands answered by the first read waited for
   * the last. Once rblkd submitted its reads to the disk as it parsed them,
   * writing early gave +10% IOPS at QD32 for about 0.2 µs more host CPU per
   * read (docs/performance.md "The NVMe/TCP host writes as it completes").
   */
  #send(pieces: Buffer[]): void {
    for (const p of pieces) this.#send1(p);
  }

  #send1(piece: Buffer): void {
    const s = this.socket;
    if (s.destroyed) return;
    if (!this.#corked) {
      this.#corked = true;
      s.cork();
      queueMicrotask(this.#uncork);
    }
    s.write(piece);
  }

  readonly #uncork = (): void => {
    if (!this.#corked) return;
    this.#corked = false;
    this.socket.uncork();
  };

  // ---- receiving (§3.6.1 framing) ----

  #onData(d: Buffer): void {
    if (this.#lost) return;
    this.#in.push(d);
    try {
      this.#parse();
    } catch (e) {
      this.#lose(`host error on a received PDU: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  #parse(): void {
    const input = this.#in;
    while (!this.#lost && input.length >= CH_LENGTH) {
      const ch = input.commonHeader();
      const bad = this.#checkHeader(ch);
      if (bad) {
        this.#fatal(bad.fes, bad.fei, bad.why, input.peek(Math.min(input.length, 24)));
        return;
      }
      if (input.length < ch.plen) return;
      if (ch.type === PduType.C2HData) this.#c2hDataFrom(ch);
      // Any other PDU is a header and at most a TermReq's 128 bytes: parsed as one buffer.
      else this.#onPdu(ch, input.take(ch.plen));
    }
  }

  /** What the common header alone shows wrong (§3.6.2.1): a type a controller does not send, a wrong HLEN, PLEN or PDO. */
  #checkHeader(h: CommonHeader): { fes: number; fei: number; why: string } | null {
    const known = h.type === PduType.ICResp || h.type === PduType.C2HTermReq || h.type === PduType.CapsuleResp || h.type === PduType.C2HData || h.type === PduType.R2T;
    if (!known) return { fes: Fes.InvalidHeaderField, fei: 0, why: `PDU type ${h.type} is not one a controller sends` };
    // A C2HTermReq may come at any time, in place of an ICResp too (§3.6.2.5).
    if (h.type !== PduType.C2HTermReq && (h.type === PduType.ICResp) !== (this.#icResp !== null)) return { fes: Fes.PduSequenceError, fei: 0, why: `PDU type ${h.type} ${this.#icResp ? 'before' : 'after'} ICResp` };
    if (h.hlen !== HLEN[h.type]) return { fes: Fes.InvalidHeaderField, fei: 2, why: `HLEN ${h.hlen} for PDU type ${h.type}` };
    if (h.type === PduType.ICResp) return h.plen === 128 ? null : { fes: Fes.InvalidHeaderField, fei: 4, why: `ICResp PLEN ${h.plen}` };
    if (h.type === PduType.C2HTermReq) return h.plen >= 24 && h.plen <= 152 ? null : { fes: Fes.InvalidHeaderField, fei: 4, why: `C2HTermReq PLEN ${h.plen}` };
    const hd = this.#digests.header;
    if (((h.flags & PduFlag.HDGSTF) !== 0) !== hd) return { fes: Fes.InvalidHeaderField, fei: 1, why: 'HDGSTF differs from what ICReq negotiated' };
    const min = h.hlen + (hd ? DIGEST_LENGTH : 0);
    if (h.plen < min || h.plen > MAX_PDU) return { fes: Fes.InvalidHeaderField, fei: 4, why: `PLEN ${h.plen}` };
    if (h.plen === min) return h.type === PduType.C2HData ? { fes: Fes.InvalidHeaderField, fei: 4, why: 'C2HData without data' } : null;
    if (h.type !== PduType.C2HData) return { fes: Fes.InvalidHeaderField, fei: 4, why: `PLEN ${h.plen} for PDU type ${h.type}, which carries no data` };
    const dd = (h.flags & PduFlag.DDGSTF) !== 0;
    if (dd !== this.#digests.data) return { fes: Fes.InvalidHeaderField, fei: 1, why: 'DDGSTF differs from what ICReq negotiated' };
    if (h.pdo < min || h.pdo >= h.plen - (dd ? DIGEST_LENGTH : 0)) return { fes: Fes.InvalidHeaderField, fei: 3, why: `PDO ${h.pdo} with PLEN ${h.plen}` };
    return null;
  }

  #onPdu(h: CommonHeader, pdu: Buffer): void {
    if (h.type === PduType.ICResp) {
      const f = this.#icResp!;
      this.#icResp = null;
      return f(pdu);
    }
    if (h.type === PduType.C2HTermReq) {
      // C2HTermReq (§3.6.2.5): FES 8-9, FEI 10-13; the controller closes the connection after it.
      this.#lose(`the controller ended the connection: C2HTermReq FES ${pdu.readUInt16LE(8)} FEI ${pdu.readUInt32LE(10)}`);
      return;
    }
    if (this.#digests.header && crc32c(pdu, 0, 0, h.hlen) !== pdu.readUInt32LE(h.hlen)) {
      this.#fatal(Fes.HeaderDigestError, 0, 'header digest mismatch', pdu.subarray(0, h.hlen));
      return;
    }
    if (h.type === PduType.CapsuleResp) return this.#capsuleResp(pdu);
    return this.#r2t(pdu);
  }

  /** CapsuleResp (§3.6.2.7): the CQE at bytes 8-23. */
  #capsuleResp(pdu: Buffer): void {
    const cqe = parseCqe(pdu, 8);
    const p = this.#pending.get(cqe.cid);
    if (p === undefined) {
      this.#fatal(Fes.InvalidHeaderField, 8 + 12, `CapsuleResp for CID ${cqe.cid}, which is not outstanding`, pdu.subarray(0, 24));
      return;
    }
    let status = cqe.status;
    if (p.data !== null && p.received < p.data.length && isSuccess(status)) {
      // A success with fewer bytes than the command asked for: the rest of
      // the buffer holds whatever was there (allocUnsafe memory, or the
      // caller's old bytes). An I/O read fails as a Data Transfer Error
      // (Base 2.0 generic status 04h) rather than return it; an admin
      // command's tail reads as zeroes, as a log shorter than asked.
      if (this.qid !== 0) status = Status.DataTransferError;
      else p.data.fill(0, p.received);
    }
    this.#finish(p, { status, dw0: cqe.dw0, dw1: cqe.dw1, data: p.data });
  }

  /**
   * C2HData (§3.6.2.9), whole in the stream: CCCID 8-9, DATAO 12-15, DATAL
   * 16-19, in order; the header (and HDGST, and the padding to PDO) taken as
   * one buffer, the data copied from the received chunks straight into the
   * command's buffer (the caller's, for a read into a buffer), its DDGST
   * computed on the way. SUCCESS on the last PDU completes the command
   * without a CapsuleResp.
   */
  #c2hDataFrom(h: CommonHeader): void {
    const input = this.#in;
    const head = input.take(h.pdo);
    if (this.#digests.header && crc32c(head, 0, 0, h.hlen) !== head.readUInt32LE(h.hlen)) {
      this.#fatal(Fes.HeaderDigestError, 0, 'header digest mismatch', head.subarray(0, h.hlen));
      return;
    }
    const dd = this.#digests.data;
    const length = h.plen - h.pdo - (dd ? DIGEST_LENGTH : 0);
    const cccid = head.readUInt16LE(8);
    const datao = head.readUInt32LE(12);
    const datal = head.readUInt32LE(16);
    const p = this.#pending.get(cccid);
    if (p === undefined || p.data === null) {
      this.#fatal(Fes.InvalidHeaderField, 8, `C2HData for CID ${cccid}, which reads nothing outstanding`, head.subarray(0, 24));
      return;
    }
    if (datal !== length || datao !== p.received || datao + datal > p.data.length) {
      this.#fatal(Fes.DataTransferOutOfRange, 12, `C2HData at ${datao}+${datal} (${length} bytes) for CID ${cccid}, expected offset ${p.received} of ${p.data.length}`, head.subarray(0, 24));
      return;
    }
    const crc = input.copyOut(datal, p.data, datao, dd ? 0 : undefined);
    // A data digest error loses the queue: the read is reissued on a new connection rather than trusted (§3.6.2.9).
    if (dd && crc !== input.take(DIGEST_LENGTH).readUInt32LE(0)) {
      this.#lose('C2HData data digest mismatch');
      return;
    }
    p.received += datal;
    const success = (h.flags & PduFlag.SUCCESS) !== 0;
    if (success) {
      if ((h.flags & PduFlag.LAST_PDU) === 0 || p.received !== p.data.length) {
        this.#fatal(Fes.InvalidHeaderField, 1, `C2HData SUCCESS for CID ${cccid} before all its data`, head.subarray(0, 24));
        return;
      }
      this.bySuccessFlag++;
      this.#finish(p, { status: { sct: 0, sc: 0 }, dw0: 0, dw1: 0, data: p.data });
    }
  }

  /** R2T (§3.6.2.10): CCCID 8-9, TTAG 10-11, R2TO 12-15, R2TL 16-19; answered by H2CData PDUs of at most MAXH2CDATA (§3.6.2.8). */
  #r2t(pdu: Buffer): void {
    const cccid = pdu.readUInt16LE(8);
    const ttag = pdu.readUInt16LE(10);
    const r2to = pdu.readUInt32LE(12);
    const r2tl = pdu.readUInt32LE(16);
    const p = this.#pending.get(cccid);
    const w = p?.cmd.write;
    if (p === undefined || w === undefined) {
      this.#fatal(Fes.InvalidHeaderField, 8, `R2T for CID ${cccid}, which writes nothing outstanding`, pdu.subarray(0, 24));
      return;
    }
    if (r2tl === 0 || r2to + r2tl > w.length) {
      this.#fatal(Fes.DataTransferOutOfRange, 12, `R2T for ${r2to}+${r2tl} of a ${w.length}-byte write`, pdu.subarray(0, 24));
      return;
    }
    for (let off = r2to; off < r2to + r2tl; off += this.maxH2CData) {
      const n = Math.min(this.maxH2CData, r2to + r2tl - off);
      this.#send(framePdu(h2cData(cccid, ttag, off, n, off + n === r2to + r2tl), w.subarray(off, off + n), this.#digests));
    }
  }

  #finish(p: Pending, c: Completion): void {
    this.#pending.delete(p.cid);
    this.#waiting.shift()?.();
    p.resolve(c);
  }
}

/** Status as words, for messages: "SCT 0h SC 80h" and the name where there is one. */
export function describeStatus(s: NvmeStatus): string {
  const names: Record<string, string> = {
    '0/1': 'Invalid Command Opcode',
    '0/2': 'Invalid Field in Command',
    '0/4': 'Data Transfer Error',
    '0/6': 'Internal Error',
    '0/7': 'Command Abort Requested',
    '0/8': 'Command Aborted due to SQ Deletion',
    '0/11': 'Invalid Namespace or Format',
    '0/12': 'Command Sequence Error',
    '0/32': 'Namespace is Write Protected',
    '0/34': 'Transient Transport Error',
    '0/128': 'LBA Out of Range',
    '0/129': 'Capacity Exceeded',
    '0/130': 'Namespace Not Ready',
    '0/131': 'Reservation Conflict',
    '1/128': 'Connect Incompatible Format',
    '1/129': 'Connect Controller Busy',
    '1/130': 'Connect Invalid Parameters',
    '1/132': 'Connect Invalid Host',
    '2/128': 'Write Fault',
    '2/129': 'Unrecovered Read Error',
    '2/133': 'Compare Failure',
    '2/134': 'Access Denied',
    '3/1': 'Asymmetric Access Persistent Loss',
    '3/2': 'Asymmetric Access Inaccessible',
    '3/3': 'Asymmetric Access Transition',
  };
  const name = names[`${s.sct}/${s.sc}`];
  return `${name ? `${name} ` : ''}(SCT ${s.sct.toString(16)}h SC ${s.sc.toString(16).padStart(2, '0')}h${s.dnr ? ', DNR' : ''})`;
}
