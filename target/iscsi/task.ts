// One iSCSI SCSI Command as the request core's front end (docs/architecture.md
// "Seams"; RFC 7143 §4.2.2, §11.3-11.8): data-out from immediate data,
// unsolicited Data-Out and R2T-solicited Data-Out; data-in as Data-In PDUs
// with the status in the last one when there is no sense; otherwise a SCSI
// Response. The life of the command is the request core's
// (target/scsi/request/request.ts).
import { DataOutUnusable, type RequestBuffer, type RequestFrontEnd, type Residuals } from '../scsi/index.js';
import { PROTOCOL_SERVICE_CRC_ERROR } from '../../protocol/scsi/sense-codes.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import type { SessionParams } from './negotiation.js';

export interface TaskBuffer extends RequestBuffer {
  readonly buffer: Buffer;
}

/** What a task needs from its connection. */
export interface TaskHost {
  readonly params: SessionParams;
  allocate(length: number): Promise<TaskBuffer>;
  /** A Data-In PDU; with status when `status` is given (the S bit). */
  dataIn(task: IscsiTask, data: Buffer, offset: number, dataSN: number, final: boolean, status?: { status: number; residuals: Residuals }): void;
  r2t(task: IscsiTask, ttt: number, r2tSN: number, offset: number, length: number): void;
  response(task: IscsiTask, status: number, sense: Buffer | undefined, residuals: Residuals): void;
  newTransferTag(task: IscsiTask): number;
  /** The task answered (or gave up): remove it and open the command window. */
  finished(task: IscsiTask): void;
  transferFailed(task: IscsiTask, why: string): void;
}

export class TaskGone extends Error {}

interface Solicited {
  readonly ttt: number;
  /** The DataSN the next Data-Out of this sequence must carry (RFC 7143 §11.7.5: from 0 per R2T). */
  dataSN: number;
  next: number;
  readonly end: number;
}

interface HeldDataIn {
  readonly data: Buffer;
  readonly offset: number;
  readonly dataSN: number;
}

export class IscsiTask implements RequestFrontEnd<TaskBuffer> {
  /** Data-out that arrived before a buffer was taken: views of the received PDUs. */
  private pending: { offset: number; data: Buffer }[] = [];
  private buffer: Buffer | null = null;
  /** Bytes of data-out wanted: [0, want) of the buffer. */
  private want = 0;
  /** Unsolicited data (immediate and Data-Out with TTT 0xffffffff) goes up to here. */
  readonly unsolicitedEnd: number;
  private unsolicitedNext: number;
  private unsolicitedDone: boolean;
  private unsolicitedDataSN = 0;
  private r2tNext = 0;
  private r2tSN = 0;
  private readonly solicited = new Map<number, Solicited>();
  private dataOutWaiter: { resolve: () => void; reject: (e: Error) => void } | null = null;
  private unsolicitedWaiters: (() => void)[] = [];
  private dataInSN = 0;
  /**
   * The first out-of-order DataSN of this task's data-out. RFC 7143 §7.9: it
   * implies a PDU lost to a digest error, handled as §7.8 says for one, here
   * (ErrorRecoveryLevel 0, no recovery R2T) by taking the rest of the data
   * and ending the task in CHECK CONDITION "protocol service CRC error"
   * (§11.4.7.2); the connection stays up.
   */
  private sequenceError: string | null = null;
  private held: HeldDataIn | null = null;
  /** Aborted by task management: iSCSI answers the TMF, never the task (RFC 7143 §4.2.3.3, §11.5.1). */
  silenced = false;
  /** A SCSI status went to the initiator (a response, or the last Data-In with status): the task is no longer there to abort. */
  answered = false;
  private gone = false;

  constructor(
    private readonly host: TaskHost,
    readonly itt: number,
    readonly lun: number,
    readonly cmdSN: number,
    readonly immediate: boolean,
    /** Expected Data Transfer Length. */
    readonly edtl: number,
    readonly direction: 'in' | 'out' | 'none',
    immediateData: Buffer,
    /** The F bit of the command: no unsolicited Data-Out follows. */
    final: boolean,
  ) {
    const p = host.params;
    if (immediateData.length > 0) this.pending.push({ offset: 0, data: immediateData });
    this.unsolicitedNext = immediateData.length;
    this.unsolicitedEnd = direction === 'out' && !final && !p.initialR2T ? Math.min(p.firstBurstLength, edtl) : immediateData.length;
    this.unsolicitedDone = this.unsolicitedNext >= this.unsolicitedEnd;
  }

  get label(): string {
    return `ITT 0x${this.itt.toString(16)}`;
  }

  allocate(length: number): Promise<TaskBuffer> {
    return this.host.allocate(length);
  }

  /** An unsolicited (ttt 0xffffffff) or solicited Data-Out; a string is the protocol error it makes. */
  dataOut(ttt: number, dataSN: number, offset: number, data: Buffer, final: boolean): string | null {
    if (ttt === 0xffffffff) {
      if (this.unsolicitedDone || offset !== this.unsolicitedNext || offset + data.length > this.unsolicitedEnd)
        return `unsolicited Data-Out at ${offset}+${data.length} outside ${this.unsolicitedNext}..${this.unsolicitedEnd}`;
      if (dataSN !== this.unsolicitedDataSN) this.sequenceError ??= `unsolicited Data-Out with DataSN ${dataSN}, expected ${this.unsolicitedDataSN}`;
      this.unsolicitedDataSN = (dataSN + 1) >>> 0;
      this.unsolicitedNext += data.length;
      this.land(offset, data);
      if (final || this.unsolicitedNext >= this.unsolicitedEnd) {
        this.unsolicitedDone = true;
        for (const w of this.unsolicitedWaiters.splice(0)) w();
      }
      this.checkFetched();
      return null;
    }
    const s = this.solicited.get(ttt);
    if (!s) return `Data-Out with unknown TTT 0x${ttt.toString(16)}`;
    if (offset !== s.next || offset + data.length > s.end) return `Data-Out at ${offset}+${data.length} outside the R2T's ${s.next}..${s.end}`;
    if (dataSN !== s.dataSN) this.sequenceError ??= `Data-Out with DataSN ${dataSN}, expected ${s.dataSN}`;
    s.dataSN = (dataSN + 1) >>> 0;
    s.next += data.length;
    this.land(offset, data);
    if (s.next >= s.end) {
      this.solicited.delete(ttt);
      this.sendR2Ts();
    } else if (final) return `Data-Out sequence ended at ${s.next}, before the R2T's ${s.end}`;
    this.checkFetched();
    return null;
  }

  private land(offset: number, data: Buffer): void {
    if (this.buffer === null) {
      this.pending.push({ offset, data });
      return;
    }
    if (offset < this.want) data.copy(this.buffer, offset, 0, Math.min(data.length, this.want - offset));
  }

  async fetchDataOut(into: TaskBuffer, offset: number, length: number): Promise<void> {
    this.buffer = into.buffer;
    this.want = offset + length;
    for (const p of this.pending) this.land(p.offset, p.data);
    this.pending = [];
    this.r2tNext = Math.max(this.unsolicitedEnd, offset);
    if (this.fetched()) {
      if (this.sequenceError !== null) throw new DataOutUnusable(PROTOCOL_SERVICE_CRC_ERROR, this.sequenceError);
      return;
    }
    await new Promise<void>((resolve, reject) => {
      this.dataOutWaiter = { resolve, reject };
      this.sendR2Ts();
    });
  }

  private fetched(): boolean {
    return (this.unsolicitedDone || this.unsolicitedNext >= this.want) && this.r2tNext >= this.want && this.solicited.size === 0;
  }

  private checkFetched(): void {
    if (this.dataOutWaiter && this.fetched()) {
      const w = this.dataOutWaiter;
      this.dataOutWaiter = null;
      if (this.sequenceError !== null) w.reject(new DataOutUnusable(PROTOCOL_SERVICE_CRC_ERROR, this.sequenceError));
      else w.resolve();
    }
  }

  /** Keeps up to MaxOutstandingR2T R2Ts of at most MaxBurstLength out (RFC 7143 §11.8). */
  private sendR2Ts(): void {
    if (this.gone || this.buffer === null) return;
    const p = this.host.params;
    while (this.solicited.size < p.maxOutstandingR2T && this.r2tNext < this.want) {
      const length = Math.min(p.maxBurstLength, this.want - this.r2tNext);
      const ttt = this.host.newTransferTag(this);
      this.solicited.set(ttt, { ttt, dataSN: 0, next: this.r2tNext, end: this.r2tNext + length });
      this.host.r2t(this, ttt, this.r2tSN++, this.r2tNext, length);
      this.r2tNext += length;
    }
  }

  /** Whether a TTT is one of this task's outstanding R2Ts. */
  ownsTransfer(ttt: number): boolean {
    return this.solicited.has(ttt);
  }

  pushDataIn(from: TaskBuffer, offset: number, length: number): Promise<void> {
    if (this.gone) return Promise.reject(new TaskGone('the connection is gone'));
    const p = this.host.params;
    const seg = p.initiatorMaxRecvDataSegment;
    const end = offset + length;
    // The last PDU waits for complete(), so that it can carry the status (phase collapse, RFC 7143 §11.7.1).
    this.flushHeld(false);
    for (let at = offset; at < end; at += seg) {
      const n = Math.min(seg, end - at);
      const data = from.buffer.subarray(at, at + n);
      if (at + n >= end) {
        this.held = { data, offset: at, dataSN: this.dataInSN++ };
        break;
      }
      // F ends a Data-In sequence at each MaxBurstLength (RFC 7143 §11.7.1).
      const final = (at + n) % p.maxBurstLength === 0;
      this.host.dataIn(this, data, at, this.dataInSN++, final);
    }
    return Promise.resolve();
  }

  private flushHeld(final: boolean): void {
    if (this.held === null) return;
    const h = this.held;
    this.held = null;
    this.host.dataIn(this, h.data, h.offset, h.dataSN, final);
  }

  async complete(status: number, sense: Buffer | undefined, residuals: Residuals): Promise<void> {
    // A response never overtakes the initiator's unsolicited data (RFC 7143 §4.2.3.2): wait for the burst to end.
    if (!this.unsolicitedDone && !this.gone) await new Promise<void>((r) => this.unsolicitedWaiters.push(r));
    this.host.finished(this);
    if (this.gone || (this.silenced && status === ScsiStatus.TASK_ABORTED)) return;
    this.answered = true;
    if (this.held !== null && sense === undefined) {
      const h = this.held;
      this.held = null;
      this.host.dataIn(this, h.data, h.offset, h.dataSN, true, { status, residuals });
      return;
    }
    this.flushHeld(true);
    this.host.response(this, status, sense, residuals);
  }

  transferFailed(step: 'data-out' | 'data-in', error: unknown): void {
    this.host.finished(this);
    if (this.gone || this.silenced) return;
    this.host.transferFailed(this, `${step} for ${this.label} failed: ${error instanceof Error ? error.message : String(error)}`);
  }

  /** The connection ended, or task management aborted the task: stop waiting for data that will not come. */
  cancel(why: string, connectionGone: boolean): void {
    if (connectionGone) this.gone = true;
    this.unsolicitedDone = true;
    for (const w of this.unsolicitedWaiters.splice(0)) w();
    if (this.dataOutWaiter) {
      const w = this.dataOutWaiter;
      this.dataOutWaiter = null;
      w.reject(new TaskGone(why));
    }
  }

  /** The next expected DataSN of data-in (ExpDataSN of a SCSI Response). */
  get dataInCount(): number {
    return this.dataInSN;
  }
}
