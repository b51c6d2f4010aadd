// One iSCSI connection on the target, from TCP accept to close (RFC 7143):
// the login phase (security with CHAP, operational negotiation), then the
// full feature phase of a Normal session (SCSI commands through the request
// core, Data-Out/R2T, Data-In, NOP, task management, logout) or of a
// Discovery session (SendTargets). rblkd allows one connection per session
// (MaxConnections=1) and error recovery level 0, so a connection is its
// session, and any protocol error ends it alone (docs/iscsi.md).
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { errorText } from '../error-text.js';
import { ScsiRequest, SessionIo, type Access, type LogicalUnit, type Nexus, type RequestScope, type Residuals } from '../scsi/index.js';
import { noNative, requestScopes, withMeta, type LogoutKind, type MappedLun, type ServedConnection, type ConnectionEnvironment, type SessionInfo, type TargetLogger } from '../session/environment.js';
import { ChapError, CHAP_MD5, chapResponse, decodeBinary, encodeBinary, newChallenge, verifyResponse, type ChapChallenge } from './chap.js';
import { AlignedBuffers } from './aligned-buffers.js';
import { crc32c } from '../../protocol/crc32c.js';
import { defaultParams, negotiate, NegotiationError, type SessionParams, type TargetOffer } from './negotiation.js';
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
import { encodeText, parseText, TextError } from './text.js';
import { TextExchange, TextExchangeError } from './text-exchange.js';

const EMPTY = Buffer.alloc(0);
const PADDING = Buffer.alloc(4);
/** Login text is small; more than this across continued PDUs is refused (RFC 7143 §6.6 lets the target bound it). */
const MAX_LOGIN_TEXT = 64 * 1024;
/** Immediate commands (I bit) run outside the CmdSN window; this many at once at most. */
const MAX_IMMEDIATE_TASKS = 16;
/** After a requested logout (drain, admin), how long the initiator has to log out before the connection is closed. */
const LOGOUT_GRACE_MS = 1000;

type Phase = 'login' | 'full' | 'closing' | 'closed';
type Stage = 0 | 1 | 3;

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

class LoginRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

let nextConnectionId = 1;

interface Running {
  readonly task: IscsiTask;
  readonly request: ScsiRequest<TaskBuffer>;
  done: Promise<void>;
}

/** A byte budget that delays, never fails (the data pool's rule, docs/architecture.md "Memory"). */
/** ITTs of ended tasks kept for ABORT TASK (rememberDone): more than any CmdSN window rblkd grants. */
const RECENTLY_DONE = 1024;

class Budget {
  private used = 0;
  private readonly waiters: { n: number; go: () => void }[] = [];
  constructor(private readonly limit: number) {}
  async take(n: number): Promise<void> {
    if (this.waiters.length === 0 && this.used + n <= this.limit) {
      this.used += n;
      return;
    }
    await new Promise<void>((go) => this.waiters.push({ n, go }));
  }
  give(n: number): void {
    this.used -= n;
    while (this.waiters.length > 0 && (this.used + this.waiters[0].n <= this.limit || this.used === 0)) {
      const w = this.waiters.shift()!;
      this.used += w.n;
      w.go();
    }
  }
}

export class IscsiConnection implements ServedConnection, TaskHost {
  readonly id = `iscsi-${nextConnectionId++}`;
  private phase: Phase = 'login';
  private readonly reader: PduReader;
  params: SessionParams;
  private log: TargetLogger;
  // Login state.
  private stage: Stage = 0;
  private loginText: Buffer[] = [];
  private loginTextBytes = 0;
  private loginStarted = false;
  private authenticated = false;
  private authNone = false;
  private chap: ChapChallenge | null = null;
  private chapStep: 'none' | 'method' | 'challenged' | 'done' = 'none';
  private operationalAnswered = false;
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
  // Full feature phase.
  private nexus: Nexus | null = null;
  private luns: ReadonlyMap<number, MappedLun> = new Map();
  private scopes: ReadonlyMap<number, RequestScope> = new Map();
  private unmapped: RequestScope | null = null;
  private readonly running = new Map<number, Running>();
  private readonly recentlyDone = new Set<number>();
  /** Page-aligned, for O_DIRECT volumes (aligned-buffers.ts). */
  private readonly buffers = new AlignedBuffers();
  private windowed = 0;
  private immediateTasks = 0;
  private nextTtt = 1;
  private readonly budget: Budget;
  private draining = false;
  private readonly idle: (() => void)[] = [];
  private lastHeard = Date.now();
  private pingTtt: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private corked = false;
  private ending: Promise<void> | null = null;
  private closedResolve!: () => void;
  /** The Text Request exchange in progress (text-exchange.ts), if any. */
  private text: TextExchange | null = null;
  readonly closed: Promise<void>;
  private logoutRequested: (() => void) | null = null;
  onEnd: ((session: ServedConnection) => void) | null = null;
  /** Commands, bytes and errors, counted by the request core (`rblkd ctl sessions`). */
  readonly io = new SessionIo();
  private readonly since = new Date();
  private loggedInAt: Date | null = null;

  constructor(
    private readonly socket: Socket,
    private readonly ctx: ConnectionContext,
  ) {
    this.log = ctx.env.log;
    this.params = defaultParams(ctx.offer.maxRecvDataSegment);
    this.budget = new Budget(ctx.memoryBudget);
    this.closed = new Promise((r) => (this.closedResolve = r));
    this.reader = new PduReader(
      (pdu) => this.onPdu(pdu),
      (e) => this.onFrameError(e),
    );
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.lastHeard = Date.now();
      this.reader.push(chunk);
    });
    socket.on('error', (e) => this.detach(this.end(`socket error: ${e.message}`)));
    socket.on('close', () => this.detach(this.end('connection closed by the initiator')));
    // RFC 7143 leaves the login time to the target; rblkd's is limits.login_timeout_ms.
    this.timer = setTimeout(() => {
      if (this.phase === 'login') {
        this.log.warn('iSCSI login did not complete in time, closing the connection', this.meta());
        this.detach(this.end('login timeout'));
      }
    }, ctx.env.limits.loginTimeoutMs);
  }

  // ServedConnection.
  info(): SessionInfo {
    return {
      id: this.tsih !== 0 ? `iscsi:${this.isid}:${this.tsih}` : this.id,
      initiator: this.initiatorName === '' ? null : this.initiatorName,
      peer: `${this.socket.remoteAddress ?? '?'}:${this.socket.remotePort ?? '?'}`,
      provider: 'iscsi',
      port: this.ctx.env.portName,
      connection: this.cid,
      state: this.phase,
      credits: this.maxCmdSN - this.expCmdSN + 1,
      inFlight: this.running.size,
      ops: this.io.ops,
      readBytes: this.io.readBytes,
      writeBytes: this.io.writeBytes,
      errors: this.io.errors,
      native: noNative('iSCSI connections are served in JavaScript'),
      since: this.since.toISOString(),
      loggedInAt: this.loggedInAt?.toISOString() ?? null,
    };
  }

  get loggedIn(): boolean {
    return this.phase !== 'login' && this.nexus !== null;
  }
  get isActive(): boolean {
    return this.phase === 'full' && !this.discovery;
  }
  settled(lun: number): Promise<void> {
    const running = [...this.running.values()].filter((r) => r.task.lun === lun).map((r) => r.done);
    return Promise.race([Promise.allSettled(running).then(() => undefined), this.closed]);
  }
  refreshLuns(): void {
    if (this.phase === 'full' && this.nexus) this.mapLuns(this.ctx.env.lunsFor(this.initiatorName));
  }
  async drain(timeoutMs: number): Promise<void> {
    if (this.phase !== 'full') return this.end('shutting down');
    this.draining = true;
    if (this.running.size > 0) await Promise.race([new Promise<void>((r) => this.idle.push(r)), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    await this.requestLogout('target shutting down');
  }
  fence(why: string): void {
    this.detach(this.end(why));
  }

  logout(_kind: LogoutKind | number = 'admin', why = 'administrative logout'): Promise<void> {
    if (this.phase !== 'full') return this.end(why);
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

  private meta(): Record<string, unknown> {
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
    const depth = Math.max(1, this.ctx.env.limits.queueDepth);
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
      this.onLogin(h, pdu.data);
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

  private onLogin(h: Buffer, data: Buffer): void {
    const transit = (h[1] & 0x80) !== 0;
    const cont = (h[1] & 0x40) !== 0;
    const csg = ((h[1] >> 2) & 3) as Stage | 2;
    const nsg = (h[1] & 3) as Stage | 2;
    if (h[3] > 0) throw new LoginRefusal(LoginStatus.UNSUPPORTED_VERSION, `version-min ${h[3]}; rblkd speaks version 0`);
    if (transit && cont) throw new LoginRefusal(LoginStatus.INITIATOR_ERROR, 'T and C both set');
    if (csg === 2 || (transit && (nsg === 2 || nsg <= csg))) throw new LoginRefusal(LoginStatus.INITIATOR_ERROR, `bad stage transition ${csg} -> ${nsg}`);
    const isid = h.toString('hex', 8, 14);
    if (!this.loginStarted) {
      this.loginStarted = true;
      this.isid = isid;
      this.tsih = h.readUInt16BE(14);
      this.cid = h.readUInt16BE(20);
      this.expCmdSN = word(h, 24);
      this.maxCmdSN = snAdd(this.expCmdSN, Math.max(1, this.ctx.env.limits.queueDepth) - 1);
      this.statSN = word(h, 28);
    } else if (isid !== this.isid) throw new LoginRefusal(LoginStatus.INITIATOR_ERROR, 'ISID changed during login');
    if (csg !== this.stage && !(this.stage === 0 && csg === 1 && this.chapStep === 'none')) {
      throw new LoginRefusal(LoginStatus.INVALID_DURING_LOGIN, `login PDU for stage ${csg} while in stage ${this.stage}`);
    }
    this.stage = csg;
    this.loginTextBytes += data.length;
    if (this.loginTextBytes > MAX_LOGIN_TEXT) throw new LoginRefusal(LoginStatus.OUT_OF_RESOURCES, 'login text too long');
    this.loginText.push(Buffer.from(data));
    if (cont) {
      // RFC 7143 §6.6: an empty response asks for the rest of the text.
      this.loginResponse(h, false, this.stage, []);
      return;
    }
    const pairs = parseText(Buffer.concat(this.loginText));
    this.loginText = [];
    this.loginTextBytes = 0;
    const keys = new Map(pairs);
    this.log.debug(`iSCSI login stage ${csg}${transit ? ` -> ${nsg}` : ''}: ${pairs.map(([k, v]) => (k.startsWith('CHAP_R') || k === 'CHAP_C' ? k : `${k}=${v}`)).join(' ')}`, this.meta());
    if (this.initiatorName === '') this.firstLogin(keys);

    const answer: [string, string][] = [];
    if (!this.answeredTpgt) {
      // RFC 7143 §13.9: the first Login Response of a new session names the portal group.
      if (!this.discovery) answer.push(['TargetPortalGroupTag', '1']);
      this.answeredTpgt = true;
    }
    let mayTransit = true;
    if (csg === 0) mayTransit = this.security(keys, answer);
    else {
      if (!this.authenticated) {
        // Skipping the security stage is only a login without authentication.
        if (this.needsAuth()) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'authentication required, and the initiator skipped the security stage');
        this.authenticated = true;
      }
    }
    // Operational keys may come in either stage (the security stage's are login and CHAP keys, which negotiate() skips).
    const ops = negotiate(pairs, this.params, this.ctx.offer, csg === 1 && !this.operationalAnswered);
    if (csg === 1) this.operationalAnswered = true;
    answer.push(...ops.filter(([k]) => !answer.some(([a]) => a === k)));
    if (!transit || !mayTransit) {
      this.loginResponse(h, false, this.stage, answer);
      return;
    }
    if (nsg === 3) return this.finishLogin(h, answer);
    this.stage = nsg as Stage;
    this.loginResponse(h, true, csg, answer, nsg);
  }

  private answeredTpgt = false;

  private needsAuth(): boolean {
    return this.ctx.env.authRequired || this.ctx.env.secretFor(this.initiatorName) !== null;
  }

  private firstLogin(keys: Map<string, string>): void {
    const name = keys.get('InitiatorName');
    if (name === undefined || name === '') throw new LoginRefusal(LoginStatus.MISSING_PARAMETER, 'no InitiatorName');
    if (name.length > 223) throw new LoginRefusal(LoginStatus.INITIATOR_ERROR, 'InitiatorName longer than 223 bytes');
    this.initiatorName = name;
    this.log = withMeta(this.ctx.env.log, this.meta());
    const type = keys.get('SessionType') ?? 'Normal';
    if (type !== 'Normal' && type !== 'Discovery') throw new LoginRefusal(LoginStatus.SESSION_TYPE_NOT_SUPPORTED, `SessionType=${type}`);
    this.discovery = type === 'Discovery';
    if (!this.discovery) {
      const target = keys.get('TargetName');
      if (target === undefined) throw new LoginRefusal(LoginStatus.MISSING_PARAMETER, 'no TargetName in a Normal session');
      if (target !== this.ctx.env.targetName) throw new LoginRefusal(LoginStatus.NOT_FOUND, `unknown target name ${JSON.stringify(target)}`);
      const admitted = this.ctx.env.admitSession();
      if (admitted === 'full') throw new LoginRefusal(LoginStatus.OUT_OF_RESOURCES, 'max_sessions reached');
      if (admitted === 'draining') throw new LoginRefusal(LoginStatus.SERVICE_UNAVAILABLE, 'shutting down');
    } else if (this.ctx.env.admitSession() === 'draining') throw new LoginRefusal(LoginStatus.SERVICE_UNAVAILABLE, 'shutting down');
    if (this.tsih !== 0) {
      const old = this.ctx.registry.find(name, this.isid);
      if (!old || old.tsih !== this.tsih) throw new LoginRefusal(LoginStatus.SESSION_DOES_NOT_EXIST, `no session with TSIH ${this.tsih}`);
    }
  }

  /** The security stage: AuthMethod, then CHAP (RFC 7143 §12.1.3). Returns whether the stage may end now. */
  private security(keys: Map<string, string>, answer: [string, string][]): boolean {
    const method = keys.get('AuthMethod');
    if (this.chapStep === 'none') {
      if (method === undefined) {
        if (this.needsAuth()) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'authentication required, and no AuthMethod offered');
        this.authenticated = true;
        return true;
      }
      const offered = method.split(',');
      const wantChap = this.needsAuth() || !offered.includes('None');
      if (wantChap && !offered.includes('CHAP')) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, `authentication required, and AuthMethod=${method} has no CHAP`);
      if (!wantChap) {
        answer.push(['AuthMethod', 'None']);
        this.authNone = true;
        this.authenticated = true;
        this.chapStep = 'done';
        return true;
      }
      answer.push(['AuthMethod', 'CHAP']);
      this.chapStep = 'method';
      // The initiator may send CHAP_A in the same PDU.
      if (!keys.has('CHAP_A')) return false;
    }
    if (this.chapStep === 'method') {
      const algorithms = keys.get('CHAP_A');
      if (algorithms === undefined) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'no CHAP_A after AuthMethod=CHAP');
      if (!algorithms.split(',').includes(CHAP_MD5)) {
        answer.push(['CHAP_A', 'Reject']);
        throw new LoginRefusal(LoginStatus.AUTH_FAILURE, `CHAP_A=${algorithms} has no MD5 (5)`);
      }
      this.chap = newChallenge();
      answer.push(['CHAP_A', CHAP_MD5], ['CHAP_I', String(this.chap.id)], ['CHAP_C', encodeBinary(this.chap.challenge)]);
      this.chapStep = 'challenged';
      return false;
    }
    if (this.chapStep === 'challenged') {
      const n = keys.get('CHAP_N');
      const r = keys.get('CHAP_R');
      if (n === undefined || r === undefined) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'no CHAP_N and CHAP_R after the challenge');
      const secret = this.ctx.env.secretFor(this.initiatorName);
      // A name without a secret is checked against a random one, so its refusal looks like a wrong secret's (docs/protocol.md §10).
      const ok = verifyResponse(this.chap!, secret ?? UNKNOWN_SECRET, decodeBinary(r, 'CHAP_R'));
      if (secret === null || !ok) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, secret === null ? 'no secret is configured for this initiator' : `CHAP response of ${n} is wrong`);
      const mi = keys.get('CHAP_I');
      const mc = keys.get('CHAP_C');
      if (mi !== undefined || mc !== undefined) {
        // Mutual CHAP: the initiator authenticates the target.
        if (mi === undefined || mc === undefined) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'mutual CHAP needs both CHAP_I and CHAP_C');
        const id = Number(mi);
        if (!/^[0-9]+$/.test(mi) || id > 255) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, `CHAP_I=${mi}`);
        const challenge = decodeBinary(mc, 'CHAP_C');
        // RFC 7143 §12.1.3: a target's own challenge sent back is a reflection attack.
        if (challenge.equals(this.chap!.challenge)) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'the initiator reflected the target challenge');
        answer.push(['CHAP_N', this.ctx.env.targetName], ['CHAP_R', encodeBinary(chapResponse(id, secret, challenge))]);
      }
      this.chapStep = 'done';
      this.authenticated = true;
      this.log.info(`iSCSI CHAP authentication accepted${mi !== undefined ? ' (mutual)' : ''}`, { chapName: n });
      return true;
    }
    return this.authenticated;
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
    if (!this.authenticated) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'login ended before authentication');
    if (!this.discovery) {
      const luns = this.ctx.env.lunsFor(this.initiatorName);
      if (luns.size === 0) throw new LoginRefusal(LoginStatus.AUTHORIZATION_FAILURE, 'no volume is visible to this initiator');
      // Session reinstatement (RFC 7143 §6.3.5): the same initiator name and ISID replace the old session.
      const old = this.ctx.registry.find(this.initiatorName, this.isid);
      if (old && old !== this) {
        this.log.info(`iSCSI session reinstatement: closing the old session (TSIH ${old.tsih})`);
        old.reinstated();
      }
      if (this.tsih === 0) this.tsih = this.ctx.registry.nextTsih();
      this.ctx.registry.add(this);
      this.nexus = { sessionId: `${this.id}`, initiator: `${this.initiatorName},i,0x${this.isid}`, targetPort: this.ctx.env.portName };
      this.mapLuns(luns);
      this.ctx.env.scsi.login(this.nexus);
    } else {
      if (this.tsih === 0) this.tsih = this.ctx.registry.nextTsih();
      this.nexus = { sessionId: this.id, initiator: this.initiatorName };
    }
    if (answer.length === 0 || !this.operationalAnswered) {
      if (!answer.some(([k]) => k === 'MaxRecvDataSegmentLength')) answer.push(['MaxRecvDataSegmentLength', String(this.params.targetMaxRecvDataSegment)]);
    }
    this.log = withMeta(this.ctx.env.log, this.meta());
    this.loginResponse(req, true, this.stage, answer, 3);
    // Digests and the declared segment length apply from the first PDU after the last Login Response.
    this.phase = 'full';
    this.loggedInAt = new Date();
    this.reader.headerDigest = this.params.headerDigest === 'CRC32C';
    this.reader.dataDigest = this.params.dataDigest === 'CRC32C';
    this.reader.maxDataSegment = this.params.targetMaxRecvDataSegment;
    if (this.timer) clearTimeout(this.timer);
    this.startKeepAlive();
    const p = this.params;
    this.log.info(
      `iSCSI ${this.discovery ? 'discovery ' : ''}session logged in${this.authNone || !this.chap ? '' : ' (CHAP)'}: ${this.luns.size} LUN(s), ` +
        `HeaderDigest=${p.headerDigest} DataDigest=${p.dataDigest} MaxRecvDataSegmentLength=${p.initiatorMaxRecvDataSegment}/${p.targetMaxRecvDataSegment} ` +
        `MaxBurstLength=${p.maxBurstLength} FirstBurstLength=${p.firstBurstLength} ImmediateData=${p.immediateData ? 'Yes' : 'No'} InitialR2T=${p.initialR2T ? 'Yes' : 'No'}`,
    );
  }

  /** Another login of the same initiator name and ISID took this session over. */
  reinstated(): void {
    this.ctx.registry.remove(this);
    this.detach(this.end('reinstated by a new login of the same initiator and ISID'));
  }

  private mapLuns(luns: ReadonlyMap<number, MappedLun>): void {
    this.luns = luns;
    ({ scopes: this.scopes, unmapped: this.unmapped } = requestScopes(this.nexus!, luns, this.ctx.env, this.log, this.io));
  }

  private startKeepAlive(): void {
    const ka = this.ctx.env.limits.keepAliveMs;
    if (ka <= 0) return;
    // A silent initiator gets a NOP-In ping (RFC 7143 §11.19); silence for another interval ends the connection.
    this.timer = setInterval(() => {
      const quiet = Date.now() - this.lastHeard;
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
    }, Math.max(50, Math.floor(ka / 2)));
    this.timer.unref();
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
        const name = this.ctx.env.targetName;
        const named = value === 'All' ? this.discovery : value === '' || value === name;
        if (named && this.ctx.env.lunsFor(this.initiatorName).size > 0) {
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
        await Promise.allSettled([...this.running.values()].map((r) => r.done));
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
    if (itt === RESERVED_TAG || this.running.has(itt)) throw new ProtocolError(`ITT 0x${itt.toString(16)} is reserved or already in use`, RejectReason.PROTOCOL_ERROR);
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
    const request = new ScsiRequest(task, this.scopes.get(lun) ?? this.unmapped!, Buffer.from(cdb), { direction, length: edtl, otherDirection: 'moves-nothing' });
    const r: Running = { task, request, done: Promise.resolve() };
    this.running.set(itt, r);
    r.done = request.run();
  }

  /** Draining or too many immediate commands: BUSY without running (SAM-5 5.3.1). */
  private busy(task: IscsiTask): void {
    const r = { task, request: null as unknown as ScsiRequest<TaskBuffer>, done: Promise.resolve() };
    this.running.set(task.itt, r);
    r.done = task.complete(ScsiStatus.BUSY, undefined, { dataOut: task.direction === 'out' ? task.edtl : 0, dataIn: task.direction === 'in' ? task.edtl : 0 });
  }

  private onDataOut(pdu: ReceivedPdu): void {
    const h = pdu.bhs;
    const r = this.running.get(ittOf(h));
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
    const r = this.running.get(task.itt);
    if (!r || r.task !== task) return;
    this.running.delete(task.itt);
    this.rememberDone(task.itt);
    if (task.immediate) this.immediateTasks--;
    else this.windowed--;
    if (this.running.size === 0) for (const w of this.idle.splice(0)) w();
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

  // ---- Task management (RFC 7143 §11.5) ----

  private onTaskManagement(h: Buffer): void {
    const fn = h[1] & 0x7f;
    const itt = ittOf(h);
    const lun = lunOf(h);
    const ref = word(h, 20);
    const refCmdSN = word(h, 32);
    const run = async (): Promise<number> => {
      const lunScoped = fn === TmfFunction.ABORT_TASK || fn === TmfFunction.ABORT_TASK_SET || fn === TmfFunction.CLEAR_TASK_SET || fn === TmfFunction.LOGICAL_UNIT_RESET;
      const mapped = this.luns.get(lun);
      if (lunScoped && !mapped) return TmfResponse.NO_LUN;
      switch (fn) {
        case TmfFunction.ABORT_TASK: {
          const r = this.running.get(ref);
          // RFC 7143 §11.5.1: a RefCmdSN in the window that never arrived counts as received and
          // aborted (Function Complete); a task that ran and was answered does not exist any more.
          if (!r || r.task.lun !== lun) return snLess(refCmdSN, this.expCmdSN) && !this.recentlyDone.has(ref) ? TmfResponse.COMPLETE : TmfResponse.NO_TASK;
          await this.abort([r]);
          // Past its last abort point it ran to the end and answered: for the
          // initiator that task completed, so there was none to abort (RFC 7143 §11.6.1).
          return r.task.answered ? TmfResponse.NO_TASK : TmfResponse.COMPLETE;
        }
        case TmfFunction.ABORT_TASK_SET:
        case TmfFunction.CLEAR_TASK_SET:
          await this.abort([...this.running.values()].filter((r) => r.task.lun === lun));
          return TmfResponse.COMPLETE;
        case TmfFunction.LOGICAL_UNIT_RESET:
          await this.abort([...this.running.values()].filter((r) => r.task.lun === lun));
          // SAM-5 6.3.3: other nexuses see 29/00 on their next command.
          mapped!.lu.reset();
          this.log.info(`LUN ${lun} reset`);
          return TmfResponse.COMPLETE;
        case TmfFunction.TARGET_WARM_RESET:
        case TmfFunction.TARGET_COLD_RESET:
          await this.abort([...this.running.values()]);
          for (const m of this.luns.values()) m.lu.reset();
          this.log.info(`target ${fn === TmfFunction.TARGET_COLD_RESET ? 'cold' : 'warm'} reset of this session's LUNs`);
          return TmfResponse.COMPLETE;
        case TmfFunction.TASK_REASSIGN:
          return TmfResponse.NO_REASSIGNMENT;
        default:
          return TmfResponse.NOT_SUPPORTED;
      }
    };
    this.detach(
      run().then((response) => {
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

  private async abort(tasks: Running[]): Promise<void> {
    for (const r of tasks) {
      r.task.silenced = true;
      r.request?.abort();
      r.task.cancel('aborted by task management', false);
    }
    await Promise.allSettled(tasks.map((r) => r.done));
  }

  // ---- The end ----

  /** For work nobody awaits: a failure is a bug here, and ends this connection, logged, instead of reaching the daemon. */
  private detach(p: Promise<unknown>): void {
    p.catch((e: unknown) => {
      this.log.error(`iSCSI connection failed: ${errorText(e)}`, this.meta());
      if (this.phase !== 'closed') this.end('internal error').catch(() => undefined);
    });
  }

  private end(why: string): Promise<void> {
    this.ending ??= this.endOnce(why);
    return this.ending;
  }

  private async endOnce(why: string): Promise<void> {
    this.phase = 'closing';
    this.reader.stop();
    this.ctx.registry.remove(this);
    for (const r of this.running.values()) {
      r.request?.abort();
      r.task.cancel(why, true);
    }
    // What is still inside a backend fences later commands on its blocks, so
    // that a task the initiator retries elsewhere cannot land before it
    // (LogicalUnit.fenceLost, docs/target.md "A lost connection's commands").
    if (this.nexus && !this.discovery) for (const { lu } of this.luns.values()) lu.fenceLost(this.nexus);
    this.socket.destroy();
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
    this.phase = 'closed';
    if (this.timer) {
      clearTimeout(this.timer);
      clearInterval(this.timer);
    }
    if (this.nexus && !this.discovery) this.ctx.env.scsi.logout(this.nexus);
    this.running.clear();
    this.held.clear();
    this.log.info(`iSCSI connection ended: ${why}`, this.meta());
    this.closedResolve();
    this.onEnd?.(this);
  }
}

/** O (0x04) for an overflow, U (0x02) for an underflow (RFC 7143 §11.4.5). */
function residualFlags(residual: number): number {
  return residual > 0 ? 0x02 : residual < 0 ? 0x04 : 0;
}

/** Stands in for the secret of a name that has none: random, known to nobody. */
const UNKNOWN_SECRET = randomBytes(16);

