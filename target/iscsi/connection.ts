// One iSCSI connection on the target, from TCP accept to close (RFC 7143):
// the login phase (security with CHAP, operational negotiation), then the
// full feature phase of a Normal session (SCSI commands through the request
// core, Data-Out/R2T, Data-In, NOP, task management, logout) or of a
// Discovery session (SendTargets). rblkd allows one connection per session
// (MaxConnections=1) and error recovery level 0, so a connection is its
// session, and any protocol error ends it alone (docs/iscsi.md).
//
// Over 600 lines on purpose: the full feature phase is one state machine over
// one set of sequence numbers (StatSN, ExpCmdSN, MaxCmdSN, the tasks in the
// window), which receiving, ordering, sending and every PDU kind read and
// advance; split across files, each part would reach into the others' fields.
// What stands apart is apart: the life every front end's connection shares
// (FrontEndConnection, target/connection/front-end-connection.ts), login
// (login.ts), task management (task-management.ts), text exchanges
// (text-exchange.ts) and one task's data (task.ts).
import type { Socket } from 'node:net';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { errorText } from '../error-text.js';
import { ScsiRequest, type Residuals } from '../scsi/index.js';
import { noNative, type LogoutKind, type ConnectionEnvironment } from '../connection/environment.js';
import { FrontEndConnection, type ConnectionFacts } from '../connection/front-end-connection.js';
import { ChapError } from './chap.js';
import { AlignedBuffers } from './aligned-buffers.js';
import { Budget } from './budget.js';
import { crc32c } from '../../protocol/crc32c.js';
import { defaultParams, NegotiationError, type SessionParams, type TargetOffer } from './negotiation.js';
import { IscsiLogin, LoginRefusal } from './login.js';
import {
  BHS_LENGTH,
  CONTINUE,
  FINAL,
  header,
  isFinal,
  isImmediate,
  ittOf,
  LoginStatus,
  lunOf,
  Op,
  opcodeOf,
  padOf,
  RejectReason,
  RESERVED_TAG,
  snAdd,
  snLess,
  TmfFunction,
  TmfResponse,
  TOp,
  word,
  writeLun,
} from './pdu.js';
import { PduReader, type FrameError, type ReceivedPdu } from './pdu-reader.js';
import { IscsiTask, type TaskBuffer, type TaskHost } from './task.js';
import { taskFunction, type TaskManagementHost } from './task-management.js';
import { encodeText, parseText, TextError } from './text.js';
import { TextExchange, TextExchangeError } from './text-exchange.js';

const EMPTY = Buffer.alloc(0);
const PADDING = Buffer.alloc(4);
/** Immediate commands (I bit) run outside the CmdSN window; this many at once at most. */
const MAX_IMMEDIATE_TASKS = 16;
/** After a requested logout (drain, admin), how long the initiator has to log out before the connection is closed. */
const LOGOUT_GRACE_MS = 1000;

type Phase = 'login' | 'full' | 'closing' | 'closed';

/** How sessions find each other for reinstatement (RFC 7143 §6.3.5): the portal group's live sessions. */
export interface SessionRegistry {
  /** Sessions by initiator name and ISID. */
  find(initiator: string, isid: string): IscsiConnection | undefined;
  add(c: IscsiConnection): void;
  remove(c: IscsiConnection): void;
  nextTsih(): number;
}

export interface ConnectionContext {
  readonly env: ConnectionEnvironment;
  readonly registry: SessionRegistry;
  readonly offer: TargetOffer;
  /** Bytes of data buffers one connection may hold at once (limits.connection_memory, at least max_io). */
  readonly memoryBudget: number;
}

class ProtocolError extends Error {
  constructor(
    message: string,
    /** The Reject reason to send first, if the RFC asks for one. */
    readonly reject?: number,
  ) {
    super(message);
  }
}

let nextConnectionId = 1;

interface Running {
  readonly task: IscsiTask;
  readonly lun: number;
  /** Null for a task answered BUSY without running. */
  readonly request: ScsiRequest<TaskBuffer> | null;
  done: Promise<void>;
}

/** ITTs of ended tasks kept for ABORT TASK (rememberDone): more than any CmdSN window rblkd grants. */
const RECENTLY_DONE = 1024;

export class IscsiConnection extends FrontEndConnection<number, Running> implements TaskHost {
  readonly id = `iscsi-${nextConnectionId++}`;
  private phase: Phase = 'login';
  private readonly reader: PduReader;
  params: SessionParams;
  /** The login phase's negotiation (login.ts). */
  private readonly login: IscsiLogin;
  /** What task management (task-management.ts) reads of this connection. */
  private readonly tmf: TaskManagementHost;
  initiatorName = '';
  isid = '';
  tsih = 0;
  private cid = 0;
  private discovery = false;
  // Sequence numbers (RFC 7143 §4.2.2).
  private statSN = 0;
  private expCmdSN = 0;
  private maxCmdSN = 0;
  private readonly held = new Map<number, ReceivedPdu>();
  // Full feature phase (its tasks are FrontEndConnection.outstanding, by ITT).
  private readonly recentlyDone = new Set<number>();
  /** Page-aligned, for O_DIRECT volumes (aligned-buffers.ts). */
  private readonly buffers = new AlignedBuffers();
  private windowed = 0;
  private immediateTasks = 0;
  private nextTtt = 1;
  private readonly budget: Budget;
  private pingTtt: number | null = null;
  private corked = false;
  /** The Text Request exchange in progress (text-exchange.ts), if any. */
  private text: TextExchange | null = null;
  private logoutRequested: (() => void) | null = null;

  constructor(
    private readonly socket: Socket,
    private readonly ctx: ConnectionContext,
  ) {
    super(ctx.env);
    this.params = defaultParams(ctx.offer.maxRecvDataSegment);
    this.budget = new Budget(ctx.memoryBudget);
    // The getters below read the connection's fields as they are at each call.
    const self = this;
    this.tmf = {
      get luns() {
        return self.luns;
      },
      tasks: this.outstanding,
      get expCmdSN() {
        return self.expCmdSN;
      },
      answeredRecently: (itt) => this.recentlyDone.has(itt),
      get log() {
        return self.log;
      },
    };
    this.login = new IscsiLogin({
      env: ctx.env,
      registry: ctx.registry,
      offer: ctx.offer,
      get params() {
        return self.params;
      },
      get log() {
        return self.log;
      },
      meta: () => this.meta(),
      get isid() {
        return self.isid;
      },
      get tsih() {
        return self.tsih;
      },
      started: (h) => this.loginStarted(h),
      get initiatorName() {
        return self.initiatorName;
      },
      named: (name) => {
        this.initiatorName = name;
        this.fixLogFields();
      },
      get discovery() {
        return self.discovery;
      },
      set discovery(d: boolean) {
        self.discovery = d;
      },
    });
    this.reader = new PduReader(
      (pdu) => this.onPdu(pdu),
      (e) => this.onFrameError(e),
    );
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.lastHeard = performance.now();
      this.reader.push(chunk);
    });
    socket.on('error', (e) => this.detach(this.end(`socket error: ${e.message}`)));
    socket.on('close', () => this.detach(this.end('connection closed by the initiator')));
    // RFC 7143 leaves the login time to the target; rblkd's is limits.login_timeout_ms.
    this.armLoginTimer(() => {
      if (this.phase === 'login') {
        this.log.warn('iSCSI login did not complete in time, closing the connection', this.meta());
        this.detach(this.end('login timeout'));
      }
    });
  }

  // ServedConnection (the rest is FrontEndConnection's).
  protected facts(): ConnectionFacts {
    return {
      id: this.tsih !== 0 ? `iscsi:${this.isid}:${this.tsih}` : this.id,
      peer: `${this.socket.remoteAddress ?? '?'}:${this.socket.remotePort ?? '?'}`,
      provider: 'iscsi',
      connection: this.cid,
      state: this.phase,
      // Serial-number distance (RFC 7143 §3.2.2.1): right across the 2^32 wrap too.
      credits: ((this.maxCmdSN - this.expCmdSN) >>> 0) + 1,
      native: noNative('iSCSI connections are served in JavaScript'),
    };
  }

  get initiator(): string | null {
    return this.initiatorName === '' ? null : this.initiatorName;
  }
  get loggedIn(): boolean {
    return this.phase !== 'login' && this.nexus !== null;
  }
  get isActive(): boolean {
    return this.phase === 'full' && !this.discovery;
  }
  protected get serving(): boolean {
    return this.phase === 'full';
  }

  /** Drain, forced logout, a removed volume: the initiator is asked to log out, whatever the kind. */
  protected askLogout(_kind: LogoutKind | number, why: string): Promise<void> {
    return this.requestLogout(why);
  }

  /** Asks the initiator to log out (Async Message event 1, RFC 7143 §11.9.1), then closes the connection. */
  private async requestLogout(why: string): Promise<void> {
    if (this.phase !== 'full') return this.end(why);
    const h = header(TOp.ASYNC, FINAL, 0);
    h.fill(0xff, 8, 16);
    h.writeUInt32BE(RESERVED_TAG, 16);
    this.seqFields(h, true);
    h[36] = 1;
    h.writeUInt16BE(1, 42); // Parameter3: seconds to log out in.
    this.send(h);
    await Promise.race([new Promise<void>((r) => (this.logoutRequested = r)), new Promise((r) => setTimeout(r, LOGOUT_GRACE_MS).unref()), this.closed]);
    await this.end(why);
  }

  protected meta(): Record<string, unknown> {
    return { connection: this.id, ...(this.initiatorName ? { initiator: this.initiatorName } : {}), ...(this.tsih ? { tsih: this.tsih } : {}) };
  }

  // ---- Sending ----

  /**
   * Queues one PDU: header (with its digest), data, padding, data digest.
   * Writes made in one turn of the event loop go out as one writev (the
   * socket is corked until setImmediate, after this turn's I/O callbacks and
   * the promise chains they started), so a Data-In and its status, and the
   * responses of every command that finished in the turn, share one system
   * call: on loopback each writev also runs the receiver's TCP input, so
   * fewer of them is most of the cost (docs/iscsi.md "Performance").
   */
  private send(h: Buffer, data: Buffer = EMPTY): void {
    if (this.phase === 'closed' || this.socket.destroyed) return;
    const s = this.socket;
    if (!this.corked) {
      this.corked = true;
      s.cork();
      setImmediate(() => {
        this.corked = false;
        s.uncork();
      });
    }
    if (this.params.headerDigest === 'CRC32C' && this.phase === 'full') {
      const d = Buffer.allocUnsafe(BHS_LENGTH + 4);
      h.copy(d);
      d.writeUInt32LE(crc32c(h), BHS_LENGTH);
      s.write(d);
    } else s.write(h);
    if (data.length === 0) return;
    s.write(data);
    const pad = padOf(data.length);
    if (pad > 0) s.write(PADDING.subarray(0, pad));
    if (this.params.dataDigest === 'CRC32C' && this.phase === 'full') {
      const d = Buffer.allocUnsafe(4);
      d.writeUInt32LE(pad > 0 ? crc32c(PADDING, crc32c(data), 0, pad) : crc32c(data));
      s.write(d);
    }
  }

  /** StatSN (advanced when `status`), ExpCmdSN and MaxCmdSN at bytes 24-35. */
  private seqFields(h: Buffer, status: boolean): void {
    h.writeUInt32BE(this.statSN, 24);
    if (status) this.statSN = snAdd(this.statSN, 1);
    h.writeUInt32BE(this.expCmdSN, 28);
    h.writeUInt32BE(this.currentMaxCmdSN(), 32);
  }

  /** MaxCmdSN never goes back (RFC 7143 §4.2.2.1): the window is the queue depth less the commands in it. */
  private currentMaxCmdSN(): number {
    const depth = Math.max(1, this.env.limits.queueDepth);
    const m = snAdd(this.expCmdSN, depth - 1 - Math.min(this.windowed, depth));
    if (snLess(this.maxCmdSN, m)) this.maxCmdSN = m;
    return this.maxCmdSN;
  }

  private reject(bhs: Buffer, reason: number): void {
    const h = header(TOp.REJECT, FINAL, BHS_LENGTH);
    h[2] = reason;
    h.writeUInt32BE(RESERVED_TAG, 16);
    this.seqFields(h, true);
    this.send(h, Buffer.from(bhs.subarray(0, BHS_LENGTH)));
  }

  // ---- Receiving ----

  private onFrameError(e: FrameError): void {
    switch (e.kind) {
      case 'header-digest':
        // The header cannot be trusted: nothing to answer (RFC 7143 §7.8).
        this.protocolFailure(new ProtocolError('header digest error'));
        return;
      case 'data-digest':
        this.protocolFailure(new ProtocolError('data digest error', RejectReason.DATA_DIGEST), e.bhs);
        return;
      case 'too-large':
        this.protocolFailure(new ProtocolError(`data segment of ${e.length} bytes exceeds MaxRecvDataSegmentLength ${e.limit}`, RejectReason.PROTOCOL_ERROR), e.bhs);
    }
  }

  private onPdu(pdu: ReceivedPdu): void {
    if (this.phase === 'closing' || this.phase === 'closed') return;
    try {
      if (this.phase === 'login') this.onLoginPdu(pdu);
      else this.onFullFeaturePdu(pdu);
    } catch (e) {
      if (e instanceof ProtocolError) this.protocolFailure(e, pdu.bhs);
      else {
        this.log.error(`iSCSI PDU handling failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`, this.meta());
        this.protocolFailure(new ProtocolError('internal error'));
      }
    }
  }

  /** A protocol error ends this connection only (error recovery level 0), after a Reject where one is due. */
  private protocolFailure(e: ProtocolError, bhs?: Buffer): void {
    if (this.phase === 'closing' || this.phase === 'closed') return;
    this.log.warn(`iSCSI protocol error, closing the connection: ${e.message}`, this.meta());
    let told = false;
    if (e.reject !== undefined && bhs !== undefined && this.phase === 'full') {
      this.reject(bhs, e.reject);
      told = true;
    } else if (this.phase === 'login') {
      this.loginResponseStatus(bhs, LoginStatus.INITIATOR_ERROR);
      told = true;
    }
    this.phase = 'closing';
    this.reader.stop();
    // What was just queued (the Reject) goes out before the FIN.
    if (told) this.closeAfterFlush(`protocol error: ${e.message}`);
    else this.detach(this.end(`protocol error: ${e.message}`));
  }

  // ---- Login (RFC 7143 §6, §11.12-11.13) ----

  private onLoginPdu(pdu: ReceivedPdu): void {
    const h = pdu.bhs;
    if (opcodeOf(h) !== Op.LOGIN) throw new ProtocolError(`opcode 0x${opcodeOf(h).toString(16)} before login completed`);
    try {
      const o = this.login.step(h, pdu.data);
      if (o.finish) this.finishLogin(h, o.answer);
      else this.loginResponse(h, o.transit, o.csg, o.answer, o.nsg);
    } catch (e) {
      if (e instanceof LoginRefusal) return this.refuseLogin(h, e);
      if (e instanceof TextError || e instanceof NegotiationError || e instanceof ChapError)
        return this.refuseLogin(h, new LoginRefusal(LoginStatus.INITIATOR_ERROR, e.message));
      throw e;
    }
  }

  private refuseLogin(h: Buffer, e: LoginRefusal): void {
    const cls = e.status >> 8;
    this.log.warn(`iSCSI login refused (status 0x${e.status.toString(16).padStart(4, '0')}): ${e.message}`, this.meta());
    this.loginResponseStatus(h, e.status);
    this.phase = 'closing';
    this.reader.stop();
    // RFC 7143 §11.13.5: after a refusal (class 2 or 3) the target closes the connection.
    if (cls !== 0) this.closeAfterFlush(`login refused: ${e.message}`);
  }

  private loginResponseStatus(req: Buffer | undefined, status: number): void {
    const h = header(TOp.LOGIN_RESPONSE, 0, 0);
    if (req) {
      h[1] = req[1] & 0x0c; // CSG kept, T=0.
      req.copy(h, 8, 8, 14); // ISID
      h.writeUInt32BE(ittOf(req), 16);
    }
    this.seqFields(h, true);
    h[36] = status >> 8;
    h[37] = status & 0xff;
    this.send(h);
  }

  /** The first Login PDU: the session's ISID, TSIH and CID, and where its sequence numbers start (RFC 7143 §4.2.2). */
  private loginStarted(h: Buffer): void {
    this.isid = h.toString('hex', 8, 14);
    this.tsih = h.readUInt16BE(14);
    this.cid = h.readUInt16BE(20);
    this.expCmdSN = word(h, 24);
    this.maxCmdSN = snAdd(this.expCmdSN, Math.max(1, this.env.limits.queueDepth) - 1);
    this.statSN = word(h, 28);
  }

  private loginResponse(req: Buffer, transit: boolean, csg: number, pairs: readonly (readonly [string, string])[], nsg = 0): void {
    const data = encodeText(pairs);
    const h = header(TOp.LOGIN_RESPONSE, (transit ? 0x80 : 0) | (csg << 2) | (transit ? nsg : 0), data.length);
    req.copy(h, 8, 8, 14);
    h.writeUInt16BE(this.tsih, 14);
    h.writeUInt32BE(ittOf(req), 16);
    this.seqFields(h, true);
    this.send(h, data);
  }

  private finishLogin(req: Buffer, answer: [string, string][]): void {
    if (!this.login.authenticated) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'login ended before authentication');
    if (!this.discovery) {
      const luns = this.env.lunsFor(this.initiatorName);
      if (luns.size === 0) throw new LoginRefusal(LoginStatus.AUTHORIZATION_FAILURE, 'no volume is visible to this initiator');
      // Session reinstatement (RFC 7143 §6.3.5): the same initiator name and ISID replace the old session.
      const old = this.ctx.registry.find(this.initiatorName, this.isid);
      if (old && old !== this) {
        this.log.info(`iSCSI session reinstatement: closing the old session (TSIH ${old.tsih})`);
        old.reinstated();
      }
      if (this.tsih === 0) this.tsih = this.ctx.registry.nextTsih();
      this.ctx.registry.add(this);
      this.nexus = { sessionId: `${this.id}`, initiator: `${this.initiatorName},i,0x${this.isid}`, device: this.initiatorName, targetPort: this.env.portName };
      this.mapLuns(luns);
      this.env.scsi.login(this.nexus);
    } else {
      if (this.tsih === 0) this.tsih = this.ctx.registry.nextTsih();
      this.nexus = { sessionId: this.id, initiator: this.initiatorName };
    }
    if (answer.length === 0 || !this.login.operationalAnswered) {
      if (!answer.some(([k]) => k === 'MaxRecvDataSegmentLength')) answer.push(['MaxRecvDataSegmentLength', String(this.params.targetMaxRecvDataSegment)]);
    }
    this.fixLogFields();
    this.loginResponse(req, true, this.login.stage, answer, 3);
    // Digests and the declared segment length apply from the first PDU after the last Login Response.
    this.phase = 'full';
    this.loggedInAt = new Date();
    this.reader.headerDigest = this.params.headerDigest === 'CRC32C';
    this.reader.dataDigest = this.params.dataDigest === 'CRC32C';
    this.reader.maxDataSegment = this.params.targetMaxRecvDataSegment;
    this.stopTimer();
    this.keepAlive();
    const p = this.params;
    this.log.info(
      `iSCSI ${this.discovery ? 'discovery ' : ''}session logged in${this.login.usedChap ? ' (CHAP)' : ''}: ${this.luns.size} LUN(s), ` +
        `HeaderDigest=${p.headerDigest} DataDigest=${p.dataDigest} MaxRecvDataSegmentLength=${p.initiatorMaxRecvDataSegment}/${p.targetMaxRecvDataSegment} ` +
        `MaxBurstLength=${p.maxBurstLength} FirstBurstLength=${p.firstBurstLength} ImmediateData=${p.immediateData ? 'Yes' : 'No'} InitialR2T=${p.initialR2T ? 'Yes' : 'No'}`,
    );
  }

  /** Another login of the same initiator name and ISID took this session over. */
  reinstated(): void {
    this.ctx.registry.remove(this);
    this.detach(this.end('reinstated by a new login of the same initiator and ISID'));
  }

  private keepAlive(): void {
    // A silent initiator gets a NOP-In ping (RFC 7143 §11.19); silence for another interval ends the connection.
    this.startKeepAlive((quiet, ka) => {
      if (this.pingTtt !== null && quiet > 2 * ka) {
        this.log.warn(`no PDU for ${quiet} ms and no answer to a NOP-In: the initiator is gone`);
        this.detach(this.end('keep-alive timeout'));
      } else if (this.pingTtt === null && quiet > ka) {
        this.pingTtt = this.transferTag();
        const h = header(TOp.NOP_IN, FINAL, 0);
        h.writeUInt32BE(RESERVED_TAG, 16);
        h.writeUInt32BE(this.pingTtt, 20);
        this.seqFields(h, false);
        this.send(h);
      }
    });
  }

  private transferTag(): number {
    const t = this.nextTtt;
    this.nextTtt = this.nextTtt >= 0x7fffffff ? 1 : this.nextTtt + 1;
    return t;
  }

  // ---- Full feature phase ----

  private onFullFeaturePdu(pdu: ReceivedPdu): void {
    const h = pdu.bhs;
    const op = opcodeOf(h);
    if (op === Op.DATA_OUT) return this.onDataOut(pdu);
    if (op === Op.SNACK) throw new ProtocolError('SNACK at error recovery level 0', RejectReason.PROTOCOL_ERROR);
    if (op !== Op.SCSI_COMMAND && op !== Op.NOP_OUT && op !== Op.TASK_MGMT && op !== Op.TEXT && op !== Op.LOGOUT) {
      if (op === Op.LOGIN) throw new ProtocolError('Login PDU in the full feature phase', RejectReason.PROTOCOL_ERROR);
      // RFC 7143 §11.17.1: an opcode the target does not know is rejected; the connection stays.
      this.reject(h, RejectReason.COMMAND_NOT_SUPPORTED);
      return;
    }
    // NOP-Out answering our ping carries ITT 0xffffffff and no command number to order.
    if (op === Op.NOP_OUT && ittOf(h) === RESERVED_TAG) return this.onNopOut(pdu);
    if (isImmediate(h)) return this.dispatch(pdu);
    // RFC 7143 §4.2.2.1: non-immediate PDUs run in CmdSN order; one outside the window is dropped.
    const sn = word(h, 24);
    if (sn === this.expCmdSN) {
      this.expCmdSN = snAdd(this.expCmdSN, 1);
      this.dispatch(pdu);
      // Commands that came early (a gap now filled).
      for (let next = this.held.get(this.expCmdSN); next; next = this.held.get(this.expCmdSN)) {
        this.held.delete(this.expCmdSN);
        this.expCmdSN = snAdd(this.expCmdSN, 1);
        this.dispatch(next);
      }
      return;
    }
    if (snLess(this.expCmdSN, sn) && !snLess(this.currentMaxCmdSN(), sn) && !this.held.has(sn)) {
      this.held.set(sn, { bhs: Buffer.from(pdu.bhs), ahs: Buffer.from(pdu.ahs), data: Buffer.from(pdu.data) });
      return;
    }
    this.log.debug(`dropped a PDU with CmdSN ${sn} outside the window ${this.expCmdSN}..${this.maxCmdSN}`);
  }

  private dispatch(pdu: ReceivedPdu): void {
    if (this.phase !== 'full') return;
    const h = pdu.bhs;
    switch (opcodeOf(h)) {
      case Op.SCSI_COMMAND:
        return this.onCommand(pdu);
      case Op.NOP_OUT:
        return this.onNopOut(pdu);
      case Op.TASK_MGMT:
        return this.onTaskManagement(h);
      case Op.TEXT:
        return this.onText(pdu);
      case Op.LOGOUT:
        return this.onLogout(h);
    }
  }

  private onNopOut(pdu: ReceivedPdu): void {
    const h = pdu.bhs;
    const itt = ittOf(h);
    const ttt = word(h, 20);
    if (ttt !== RESERVED_TAG) {
      // The answer to our ping (RFC 7143 §11.18).
      if (ttt === this.pingTtt) this.pingTtt = null;
      return;
    }
    if (itt === RESERVED_TAG) return; // No answer wanted.
    const data = pdu.data.length > this.params.initiatorMaxRecvDataSegment ? pdu.data.subarray(0, this.params.initiatorMaxRecvDataSegment) : pdu.data;
    const r = header(TOp.NOP_IN, FINAL, data.length);
    h.copy(r, 8, 8, 16);
    r.writeUInt32BE(itt, 16);
    r.writeUInt32BE(RESERVED_TAG, 20);
    this.seqFields(r, true);
    this.send(r, Buffer.from(data));
  }

  private onText(pdu: ReceivedPdu): void {
    const h = pdu.bhs;
    const final = (h[1] & FINAL) !== 0;
    const cont = (h[1] & CONTINUE) !== 0;
    const itt = ittOf(h);
    const ttt = word(h, 20);
    // RFC 7143 §11.10.2: a request whose text continues is not final.
    if (final && cont) throw new ProtocolError('Text Request with both F and C set', RejectReason.PROTOCOL_ERROR);
    if (ttt === RESERVED_TAG) {
      // RFC 7143 §11.10.4: a new request; whatever exchange was in progress is forgotten.
      this.text = new TextExchange(itt);
    } else if (this.text === null || this.text.itt !== itt || this.text.ttt !== ttt) {
      throw new ProtocolError(`Text Request with ITT 0x${itt.toString(16)} and TTT 0x${ttt.toString(16)} continues no exchange`, RejectReason.PROTOCOL_ERROR);
    }
    const x = this.text;
    if (x.answering) {
      // RFC 7143 §11.11: the initiator pulls the rest of our answer with empty requests.
      if (pdu.data.length > 0 || cont) throw new ProtocolError('Text Request with text while the target is still answering the previous one', RejectReason.PROTOCOL_ERROR);
      return this.sendTextPart(h, x);
    }
    try {
      x.add(pdu.data);
    } catch (e) {
      if (e instanceof TextExchangeError) throw new ProtocolError(e.message, RejectReason.PROTOCOL_ERROR);
      throw e;
    }
    // More text to come: an empty answer with a TTT asks for it (RFC 7143 §11.10.2).
    if (cont) return this.sendTextPart(h, x);
    let pairs: [string, string][];
    try {
      pairs = parseText(x.take());
    } catch (e) {
      throw new ProtocolError(errorText(e), RejectReason.PROTOCOL_ERROR);
    }
    x.answer(encodeText(this.textAnswer(pairs)), final);
    this.sendTextPart(h, x);
  }

  private textAnswer(pairs: readonly [string, string][]): [string, string][] {
    const answer: [string, string][] = [];
    for (const [key, value] of pairs) {
      if (key === 'SendTargets') {
        // RFC 7143 Appendix C: All in a discovery session; in a normal session, the empty value means this target.
        // Only to an initiator that may see a LUN of it, as REPORT LUNS answers it (RFC 7143 Appendix C:
        // the targets the initiator is allowed to access): to any other the answer is empty.
        const name = this.env.targetName;
        const named = value === 'All' ? this.discovery : value === '' || value === name;
        if (named && this.env.lunsFor(this.initiatorName).size > 0) {
          answer.push(['TargetName', name]);
          const a = this.socket.localAddress ?? '127.0.0.1';
          answer.push(['TargetAddress', `${a.includes(':') ? `[${a}]` : a}:${this.socket.localPort ?? 3260},1`]);
        }
      } else answer.push([key, 'NotUnderstood']);
    }
    return answer;
  }

  /**
   * One Text Response of exchange x: the next part of its answer that fits the
   * initiator's MaxRecvDataSegmentLength (RFC 7143 §11.11.6), C set when more
   * follows, F when the exchange ends; otherwise a TTT for the initiator to copy.
   */
  private sendTextPart(req: Buffer, x: TextExchange): void {
    const part = x.nextPart(this.params.initiatorMaxRecvDataSegment);
    if (!part.done) x.ttt ??= this.transferTag();
    const r = header(TOp.TEXT_RESPONSE, (part.done ? FINAL : 0) | (part.more ? CONTINUE : 0), part.data.length);
    req.copy(r, 8, 8, 16);
    r.writeUInt32BE(x.itt, 16);
    r.writeUInt32BE(part.done ? RESERVED_TAG : x.ttt!, 20);
    this.seqFields(r, true);
    this.send(r, Buffer.from(part.data));
    if (part.done) this.text = null;
  }

  private onLogout(h: Buffer): void {
    const reason = h[1] & 0x7f;
    // Close the session (0) or this connection (1), which is the session here; recovery (2) needs level 2.
    const response = reason === 0 || reason === 1 ? 0 : 2;
    const itt = ittOf(h);
    const finish = async (): Promise<void> => {
      if (response === 0) {
        this.draining = true;
        await Promise.allSettled([...this.outstanding.values()].map((r) => r.done));
      }
      const r = header(TOp.LOGOUT_RESPONSE, FINAL, 0);
      r[2] = response;
      r.writeUInt32BE(itt, 16);
      this.seqFields(r, true);
      r.writeUInt16BE(this.params.defaultTime2Wait, 40);
      r.writeUInt16BE(this.params.defaultTime2Retain, 42);
      this.send(r);
      if (response === 0) {
        this.log.info('iSCSI initiator logged out');
        this.logoutRequested?.();
        this.phase = 'closing';
        this.reader.stop();
        this.closeAfterFlush('initiator logout');
      }
    };
    this.detach(finish());
  }

  private closeAfterFlush(why: string): void {
    const s = this.socket;
    // end() sends FIN after what is queued; the 'close' event then ends the session.
    process.nextTick(() => {
      if (!s.destroyed) s.end();
      setTimeout(() => this.detach(this.end(why)), 2000).unref();
      s.once('finish', () => this.detach(this.end(why)));
    });
  }

  // ---- SCSI commands ----

  private onCommand(pdu: ReceivedPdu): void {
    const h = pdu.bhs;
    if (this.discovery) throw new ProtocolError('SCSI command in a discovery session', RejectReason.PROTOCOL_ERROR);
    const itt = ittOf(h);
    const immediate = isImmediate(h);
    if (itt === RESERVED_TAG || this.outstanding.has(itt)) throw new ProtocolError(`ITT 0x${itt.toString(16)} is reserved or already in use`, RejectReason.PROTOCOL_ERROR);
    const read = (h[1] & 0x40) !== 0;
    const write = (h[1] & 0x20) !== 0;
    if (read && write) {
      // Bidirectional commands: the core has none (target/scsi/request/request.ts).
      this.reject(h, RejectReason.COMMAND_NOT_SUPPORTED);
      return;
    }
    const edtl = word(h, 20);
    const data = pdu.data;
    if (data.length > 0 && (!write || !this.params.immediateData || data.length > this.params.firstBurstLength || data.length > edtl))
      throw new ProtocolError(`${data.length} bytes of immediate data not allowed here`, RejectReason.PROTOCOL_ERROR);
    let cdb = h.subarray(32, 48);
    if (pdu.ahs.length > 0) {
      // RFC 7143 §11.3.4: an Extended CDB AHS (type 1) carries the CDB beyond 16 bytes.
      const len = pdu.ahs.readUInt16BE(0);
      if (pdu.ahs[2] === 1 && len >= 1 && len - 1 <= pdu.ahs.length - 4) cdb = Buffer.concat([cdb, pdu.ahs.subarray(4, 4 + len - 1)]);
    }
    const lun = lunOf(h);
    const direction = write ? 'out' : read ? 'in' : 'none';
    const task = new IscsiTask(this, itt, lun, word(h, 24), immediate, edtl, direction, data, isFinal(h));
    const overfull = immediate && this.immediateTasks >= MAX_IMMEDIATE_TASKS;
    if (immediate) this.immediateTasks++;
    else this.windowed++;
    if (this.draining || overfull) return this.busy(task);
    // A READ flagged W (or a WRITE flagged R) runs moving no data, its EDTL an underflow residual:
    // RFC 7143 §11.4.5 reports what moved against the EDTL, and libiscsi's Read10Invalid expects GOOD.
    const request = new ScsiRequest(task, this.scopeOf(lun), Buffer.from(cdb), { direction, length: edtl, otherDirection: 'moves-nothing' });
    const r: Running = { task, lun, request, done: Promise.resolve() };
    this.outstanding.set(itt, r);
    r.done = request.run();
  }

  /** Draining or too many immediate commands: BUSY without running (SAM-5 5.3.1). */
  private busy(task: IscsiTask): void {
    const r: Running = { task, lun: task.lun, request: null, done: Promise.resolve() };
    this.outstanding.set(task.itt, r);
    r.done = task.complete(ScsiStatus.BUSY, undefined, { dataOut: task.direction === 'out' ? task.edtl : 0, dataIn: task.direction === 'in' ? task.edtl : 0 });
  }

  private onDataOut(pdu: ReceivedPdu): void {
    const h = pdu.bhs;
    const r = this.outstanding.get(ittOf(h));
    if (!r) {
      // Data for a task that was aborted or answered already: dropped (RFC 7143 §4.2.3.3).
      return;
    }
    const err = r.task.dataOut(word(h, 20), word(h, 36), word(h, 40), pdu.data, isFinal(h));
    if (err !== null) throw new ProtocolError(err, RejectReason.PROTOCOL_ERROR);
  }

  // TaskHost.
  async allocate(length: number): Promise<TaskBuffer> {
    await this.budget.take(length);
    const buffer = this.buffers.take(length);
    let released = false;
    return {
      buffer,
      release: () => {
        if (released) return;
        released = true;
        this.budget.give(length);
        // A Data-In of this buffer may still wait in the socket's queue: reuse it only once what
        // was queued before now has gone to the kernel (write callbacks run in order).
        if (this.socket.writableLength === 0) this.buffers.give(buffer);
        else if (!this.socket.destroyed) this.socket.write(EMPTY, () => this.buffers.give(buffer));
      },
    };
  }

  dataIn(task: IscsiTask, data: Buffer, offset: number, dataSN: number, final: boolean, status?: { status: number; residuals: Residuals }): void {
    let flags = final ? FINAL : 0;
    const h = header(TOp.DATA_IN, 0, data.length);
    writeLun(h, task.lun);
    h.writeUInt32BE(task.itt, 16);
    h.writeUInt32BE(RESERVED_TAG, 20);
    if (status) {
      flags |= FINAL | 0x01 | residualFlags(status.residuals.dataIn);
      h[3] = status.status;
      this.seqFields(h, true);
      h.writeUInt32BE(Math.abs(status.residuals.dataIn), 44);
    } else {
      h.writeUInt32BE(this.expCmdSN, 28);
      h.writeUInt32BE(this.currentMaxCmdSN(), 32);
    }
    h[1] = flags;
    h.writeUInt32BE(dataSN, 36);
    h.writeUInt32BE(offset, 40);
    this.send(h, data);
  }

  r2t(task: IscsiTask, ttt: number, r2tSN: number, offset: number, length: number): void {
    const h = header(TOp.R2T, FINAL, 0);
    writeLun(h, task.lun);
    h.writeUInt32BE(task.itt, 16);
    h.writeUInt32BE(ttt, 20);
    this.seqFields(h, false);
    h.writeUInt32BE(r2tSN, 36);
    h.writeUInt32BE(offset, 40);
    h.writeUInt32BE(length, 44);
    this.send(h);
  }

  response(task: IscsiTask, status: number, sense: Buffer | undefined, residuals: Residuals): void {
    const residual = task.direction === 'out' ? residuals.dataOut : residuals.dataIn;
    let data = EMPTY;
    if (sense !== undefined && sense.length > 0) {
      // RFC 7143 §11.4.7: SenseLength, then the sense data.
      data = Buffer.allocUnsafe(2 + sense.length);
      data.writeUInt16BE(sense.length, 0);
      sense.copy(data, 2);
    }
    const h = header(TOp.SCSI_RESPONSE, FINAL | residualFlags(residual), data.length);
    h[3] = status;
    h.writeUInt32BE(task.itt, 16);
    this.seqFields(h, true);
    h.writeUInt32BE(task.direction === 'in' ? task.dataInCount : 0, 36);
    h.writeUInt32BE(Math.abs(residual), 44);
    this.send(h, data);
  }

  newTransferTag(): number {
    return this.transferTag();
  }

  finished(task: IscsiTask): void {
    const r = this.outstanding.get(task.itt);
    if (!r || r.task !== task) return;
    this.outstanding.delete(task.itt);
    this.rememberDone(task.itt);
    if (task.immediate) this.immediateTasks--;
    else this.windowed--;
    this.wakeIfIdle();
  }

  /** The last tasks that ended, by ITT, bounded: an ABORT TASK naming one finds it answered, not lost. */
  private rememberDone(itt: number): void {
    this.recentlyDone.delete(itt);
    this.recentlyDone.add(itt);
    if (this.recentlyDone.size > RECENTLY_DONE) this.recentlyDone.delete(this.recentlyDone.values().next().value!);
  }

  transferFailed(_task: IscsiTask, why: string): void {
    this.detach(this.end(why));
  }

  // ---- Task management (RFC 7143 §11.5; task-management.ts) ----

  private onTaskManagement(h: Buffer): void {
    const fn = h[1] & 0x7f;
    const itt = ittOf(h);
    const lun = lunOf(h);
    const ref = word(h, 20);
    const refCmdSN = word(h, 32);
    this.detach(
      taskFunction(this.tmf, fn, lun, ref, refCmdSN).then((response) => {
        if (this.phase !== 'full') return;
        const r = header(TOp.TASK_MGMT_RESPONSE, FINAL, 0);
        r[2] = response;
        r.writeUInt32BE(itt, 16);
        this.seqFields(r, true);
        this.send(r);
        // A cold reset drops the connection after its response (RFC 7143 §11.5.1).
        if (fn === TmfFunction.TARGET_COLD_RESET && response === TmfResponse.COMPLETE) this.closeAfterFlush('target cold reset');
      }),
    );
  }

  // ---- The end ----

  /** For work nobody awaits: a failure is a bug here, and ends this connection, logged, instead of reaching the daemon. */
  protected detach(p: Promise<unknown>, _what?: string): void {
    p.catch((e: unknown) => {
      this.log.error(`iSCSI connection failed: ${errorText(e)}`, this.meta());
      if (this.phase !== 'closed') this.end('internal error').catch(() => undefined);
    });
  }

  protected async endOnce(why: string): Promise<void> {
    this.phase = 'closing';
    this.reader.stop();
    this.ctx.registry.remove(this);
    for (const r of this.outstanding.values()) {
      r.request?.abort();
      r.task.cancel(why, true);
    }
    // What is still inside a backend fences later commands on its blocks, so
    // that a task the initiator retries elsewhere cannot land before it
    // (LogicalUnit.fenceLost, docs/target.md "A lost connection's commands").
    if (!this.discovery) this.fenceLostCommands();
    this.socket.destroy();
    await Promise.allSettled([...this.outstanding.values()].map((r) => r.done));
    this.phase = 'closed';
    this.stopTimer();
    if (this.nexus && !this.discovery) this.env.scsi.logout(this.nexus);
    this.outstanding.clear();
    this.held.clear();
    this.log.info(`iSCSI connection ended: ${why}`, this.meta());
    this.finish();
  }
}

/** O (0x04) for an overflow, U (0x02) for an underflow (RFC 7143 §11.4.5). */
function residualFlags(residual: number): number {
  return residual > 0 ? 0x02 : residual < 0 ? 0x04 : 0;
}


