// One initiator connection on the target, from accept to disconnect
// (docs/protocol.md §4): login with optional mutual HMAC authentication, then
// commands, task management, keep-alive and logout. Every capsule is decoded
// strictly; any violation ends this connection alone, with a logged reason
// (§15), and nothing else notices. What every front end's connection shares
// (its end, LUN map, outstanding commands, drain, keep-alive timer, ctl info)
// is FrontEndConnection's (target/connection/front-end-connection.ts); the
// login steps are login.ts, task management task-management.ts, and the
// native fast path's binding fast-path.ts.
import { randomInt } from 'node:crypto';
import {
  capsuleBuffer,
  DataFormat,
  decodeCapsule,
  LoginRejectReason,
  LogoutReason,
  Opcode,
  REMOTE_DATA_VERSION,
  ProtocolError,
  PROTOCOL_LIMITS,
  sessionLimits,
  splitTrain,
  TRAIN_VERSION,
  type Capsule,
  type CommandCapsule,
  type LoginRequest,
  type LogoutReason as LogoutReasonCode,
  type Residual,
  type ResponseCapsule,
  type WireLimits,
} from '../../protocol/wire/index.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { errorText } from '../error-text.js';
import { backendFailure, NO_RESIDUALS, ScsiRequest, type Residuals } from '../scsi/index.js';
import type { DataBuffer, FastPathStats, TargetConnection } from '../transport/transport.js';
import { isConnectionLoss } from '../transport/connection-loss.js';
import type { LogoutKind, ConnectionEnvironment } from '../connection/environment.js';
import type { TransportFrontEnd } from '../server.js';
import { FrontEndConnection, type ConnectionFacts } from '../connection/front-end-connection.js';
import { CapsuleCommand, offerOf, type CommandHost } from './command.js';
import { errnoName, RblkFastPath } from './fast-path.js';
import { listenRblk } from './listen.js';
import { loginAuthStep, loginFields, loginRequestStep, loginResponse, type LoginContext, type LoginStep } from './login.js';
import { onTaskManagement, type TaskManagementHost } from './task-management.js';
import { opName, ProtocolViolation } from './violation.js';

/**
 * Session ids (LOGIN_RSP) count up from a random start, so that an id an
 * initiator remembers from an earlier rblkd process names no connection of
 * this one: FENCE CONNECTION (docs/protocol.md §14.1) must not end a stranger.
 * Below 2^53, as logs print them as numbers.
 */
let nextSessionId = BigInt(randomInt(1, 2 ** 20)) << 32n;
const EMPTY = Buffer.alloc(0);

type State = 'login' | 'challenged' | 'active' | 'closing' | 'closed';

/** A command between its CMD and its RSP. */
interface Outstanding<B extends DataBuffer> {
  readonly lun: number;
  /** Absent for a command answered BUSY without running. */
  readonly request: ScsiRequest<B> | null;
  /** Settles when the command has responded (or given up). */
  done: Promise<void>;
}

export class RblkConnection<B extends DataBuffer = DataBuffer> extends FrontEndConnection<bigint, Outstanding<B>> {
  readonly sessionId = nextSessionId++;
  private state: State = 'login';
  private limits: WireLimits;
  private login: LoginRequest | null = null;
  private targetNonce: Buffer | null = null;
  private credits = 0;
  private readonly host: CommandHost<B>;
  private outstandingTasks = 0;
  private keepAliveOutstanding = false;
  /** The transport has said the connection is gone (onLost or onClose): a failed transfer after that is no violation. */
  private transportGone = false;
  /** The connection's native fast path, when it has one and fast_path is on (docs/target.md "Fast path"). */
  private readonly fast: RblkFastPath;
  /** What task management (task-management.ts) reads and does of this connection. */
  private readonly tasks: TaskManagementHost;

  constructor(
    readonly conn: TargetConnection<B>,
    env: ConnectionEnvironment,
  ) {
    super(env);
    this.host = {
      conn,
      respond: (tag, status, sense, residuals) => this.respond(tag, status, sense, residuals),
      // §12.1: only from version 2 on, and where the transport carries remote CQ data.
      remoteData: conn.version >= REMOTE_DATA_VERSION && conn.remoteData,
      answeredByWrite: (tag) => this.answeredByWrite(tag),
      fail: (why, cause) => this.transferFailed(why, cause),
    };
    // The getters below read the connection's fields as they are at each call.
    const self = this;
    this.fast = new RblkFastPath({
      conn,
      env,
      get log() {
        return self.log;
      },
      meta: () => this.meta(),
      get luns() {
        return self.luns;
      },
      get nexus() {
        return self.nexus;
      },
      io: this.io,
      get ending() {
        return self.draining || self.endingOrEnded();
      },
      failed: (tag, lun, kind, errno, length) => this.onFastFailed(tag, lun, kind, errno, length),
    });
    this.tasks = {
      conn,
      env,
      get log() {
        return self.log;
      },
      meta: () => this.meta(),
      sessionId: this.sessionId,
      get initiatorName() {
        return self.login!.initiatorName;
      },
      get luns() {
        return self.luns;
      },
      outstanding: this.outstanding,
      get fastPath() {
        return self.fast.running;
      },
      admit: (tag) => this.admitTask(tag),
      track: (start, what) => this.trackTask(start, what),
      get answering() {
        return self.state === 'active' || self.state === 'closing';
      },
      sendCapsule: (c) => this.sendCapsule(c),
    };
    this.limits = { ...PROTOCOL_LIMITS, maxCapsule: conn.maxCapsule };
    // §4: login must complete within the login timeout. Armed before
    // onCapsule is set: setting it delivers capsules that arrived early (the
    // fabric transport holds them), so the whole login can run right there,
    // and this timer must not then replace the keep-alive timer it started.
    this.armLoginTimer(() => {
      if (this.state === 'login' || this.state === 'challenged') this.detach(this.fail(new ProtocolViolation('login did not complete in time')), 'login timeout');
    });
    conn.onClose = (reason) => {
      this.transportGone = true;
      this.log.debug(`transport closed the connection: ${reason}`, this.meta());
      this.detach(this.ended(reason), 'connection close');
    };
    conn.onLost = () => {
      this.transportGone = true;
      this.abortAll();
    };
    conn.onCapsule = (buf) => this.onCapsule(buf);
  }

  get id(): string {
    return this.nexus ? String(this.sessionId) : `c${this.conn.id}`;
  }

  protected facts(): ConnectionFacts {
    // What the fast path counted so far, into io before info() reads it.
    this.fast.collectAll();
    return { id: this.id, peer: this.conn.peer, provider: this.conn.provider, connection: this.conn.id, state: this.state, credits: this.credits, native: this.fast.info() };
  }

  get initiator(): string | null {
    return this.login?.initiatorName ?? null;
  }
  get isActive(): boolean {
    return this.state === 'active';
  }
  protected get serving(): boolean {
    return this.state === 'active';
  }
  /** What the native fast path has done on this connection, or null without one (docs/target.md "Fast path"). */
  get fastPathStats(): FastPathStats | null {
    return this.fast.stats;
  }
  /** Whether LOGIN_RSP was granted (it stays true while the connection ends). */
  get loggedIn(): boolean {
    return this.nexus !== null;
  }
  /** A removed volume waits for the fast path's commands on its LUN too, revoked first. */
  protected override nativeSettled(lun: number): Promise<void> | null {
    return this.fast.settled(lun);
  }

  private onCapsule(buf: Buffer): void {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.lastHeard = performance.now();
    // Version 5: a logged-in initiator may send several CMDs in one message
    // (§5.1). Each is decoded and dispatched as if it had come alone, in order.
    let capsules: Buffer[] = [buf];
    try {
      if (this.conn.version >= TRAIN_VERSION && this.state === 'active') capsules = splitTrain(buf);
    } catch (e) {
      this.undecodable(e);
      return;
    }
    for (const piece of capsules) {
      if (this.state !== 'active' && capsules.length > 1) return;
      let capsule: Capsule;
      try {
        capsule = decodeCapsule(piece, { from: 'initiator', limits: this.limits });
      } catch (e) {
        this.undecodable(e);
        return;
      }
      try {
        this.dispatch(capsule);
      } catch (e) {
        this.detach(this.fail(e instanceof ProtocolViolation ? e : new ProtocolViolation(String(e))), 'protocol violation');
        return;
      }
    }
  }

  private undecodable(e: unknown): void {
    const msg = e instanceof ProtocolError ? `${e.reason}: ${e.message}` : String(e);
    this.detach(this.fail(new ProtocolViolation(`undecodable capsule (${msg})`)), 'protocol violation');
  }

  private dispatch(c: Capsule): void {
    switch (this.state) {
      case 'login':
        if (c.op !== Opcode.LOGIN_REQ) throw new ProtocolViolation(`unexpected ${opName(c.op)} before login`, LogoutReason.UNEXPECTED_CAPSULE);
        this.onLoginRequest(c);
        return;
      case 'challenged':
        if (c.op !== Opcode.LOGIN_AUTH || c.tag !== this.login?.tag)
          throw new ProtocolViolation(`expected LOGIN_AUTH, got ${opName(c.op)}`, LogoutReason.UNEXPECTED_CAPSULE);
        this.onLoginAuth(c.initiatorNonce, c.initiatorProof);
        return;
      case 'active':
        break;
      default:
        return;
    }
    switch (c.op) {
      case Opcode.CMD:
        this.onCommand(c);
        return;
      case Opcode.TSK_MGMT:
        onTaskManagement(this.tasks, c);
        return;
      case Opcode.KEEPALIVE:
        if (this.keepAliveOutstanding) throw new ProtocolViolation('a second KEEPALIVE while one is outstanding', LogoutReason.CREDIT_OVERRUN);
        this.keepAliveOutstanding = true;
        this.detach(
          this.sendCapsule({ op: Opcode.KEEPALIVE_RSP, tag: c.tag }).finally(() => (this.keepAliveOutstanding = false)),
          'KEEPALIVE_RSP',
        );
        return;
      case Opcode.CRED_RSP:
        // rblk never sends CRED_REQ, so none can be outstanding (§11).
        throw new ProtocolViolation('CRED_RSP with no CRED_REQ outstanding', LogoutReason.CREDIT_OVERRUN);
      case Opcode.I_LOGOUT:
        this.log.info('initiator logged out', this.meta());
        this.detach(this.end('initiator logout'), 'logout');
        return;
      default:
        throw new ProtocolViolation(`unexpected ${opName(c.op)} in a logged-in session`, LogoutReason.UNEXPECTED_CAPSULE);
    }
  }

  // §7: LOGIN_REQ → [LOGIN_CHALLENGE → LOGIN_AUTH] → LOGIN_RSP or LOGIN_REJ (login.ts decides each step).
  private onLoginRequest(req: LoginRequest): void {
    this.login = req;
    this.log = this.env.log;
    this.loginStep(loginRequestStep(req, this.loginContext()));
  }

  private onLoginAuth(initiatorNonce: Buffer, proof: Buffer): void {
    this.loginStep(loginAuthStep(this.login!, this.targetNonce!, initiatorNonce, proof, this.loginContext()));
  }

  private loginContext(): LoginContext {
    return { env: this.env, conn: this.conn, log: this.log };
  }

  private loginStep(step: LoginStep): void {
    if ('reject' in step) return this.reject(step.reject);
    if ('grant' in step) return this.grant(step.grant);
    const req = this.login!;
    this.targetNonce = step.challenge;
    this.state = 'challenged';
    this.log.debug('sending LOGIN_CHALLENGE', loginFields(req, this.conn));
    this.detach(this.sendCapsule({ op: Opcode.LOGIN_CHALLENGE, tag: req.tag, targetNonce: this.targetNonce }), 'LOGIN_CHALLENGE');
  }

  private grant(proof: Buffer | null): void {
    const req = this.login!;
    try {
      // §11: the credits' receive buffers are posted before LOGIN_RSP grants them.
      this.conn.openReceiveRing();
    } catch (e) {
      this.log.warn(`login refused: no memory for the receive ring (${e instanceof Error ? e.message : String(e)})`, this.meta());
      return this.reject(LoginRejectReason.NO_RESOURCES);
    }
    const rsp = loginResponse(req, this.sessionId, this.conn, this.env.limits, proof);
    const credits = rsp.credits;
    this.credits = credits;
    this.limits = sessionLimits(rsp, 'target');
    this.nexus = { sessionId: String(this.sessionId), initiator: req.initiatorName, targetPort: this.env.portName };
    this.fixLogFields();
    this.fast.start({
      credits,
      maxCapsule: this.limits.maxCapsule,
      maxTransfer: this.limits.maxTransfer,
      maxImmediate: this.limits.maxImmediate,
      remoteData: this.host.remoteData,
    });
    this.syncFast();
    this.mapLuns(this.env.lunsFor(req.initiatorName));
    this.env.scsi.login(this.nexus);
    this.state = 'active';
    this.loggedInAt = new Date();
    this.stopTimer();
    this.keepAlive();
    this.log.info(`logged in${proof ? ' (authenticated)' : ''}: ${credits} credits, ${this.luns.size} LUN(s)`, { provider: this.conn.provider });
    this.detach(this.sendCapsule(rsp), 'LOGIN_RSP');
  }

  /** The fast path's view of the connection's share of the credits: it takes nothing while JS holds a command. */
  private syncFast(): void {
    this.fast.sync(this.outstanding.size + this.outstandingTasks, this.credits);
  }

  /**
   * A command the fast path gave back. A backend error is answered here, from
   * the one errno-to-sense table (target/scsi/sense-map.ts); a failed RDMA or
   * send breaks the connection, as it does for any command (§12).
   */
  private onFastFailed(tag: bigint, lun: number, kind: 'read' | 'write' | 'transfer', errno: number, length: number): void {
    const mapped = this.luns.get(lun);
    if (kind === 'transfer' || mapped === undefined) {
      this.host.fail(`an RDMA transfer or send for tag ${tag} failed on the fast path: ${errnoName(errno)}`, errno);
      return;
    }
    // What the error proves counts even when nobody is left to answer (rbd: EBLOCKLISTED fences the volume first).
    mapped.lu.backend.fastPathFailed?.(errnoName(errno));
    if (this.state !== 'active' && this.state !== 'closing') return;
    const c = backendFailure(mapped.lu, kind, errnoName(errno), String(this.sessionId));
    const entry: Outstanding<B> = { lun, request: null, done: Promise.resolve() };
    this.outstanding.set(tag, entry);
    this.syncFast();
    // As the request core answers a failed READ: nothing moved, the whole offer is the residual.
    entry.done = this.respond(tag, c.status, c.sense, kind === 'read' ? { dataOut: 0, dataIn: length } : NO_RESIDUALS);
  }

  private reject(reason: LoginRejectReason): void {
    const req = this.login;
    this.state = 'closing';
    this.detach(
      this.sendCapsule({ op: Opcode.LOGIN_REJ, tag: req?.tag ?? 0n, reason, maxItCapsule: this.conn.maxCapsule }).then(() => this.end('login rejected')),
      'LOGIN_REJ',
    );
  }

  protected override lunsMapped(): void {
    this.fast.bind();
  }

  private keepAlive(): void {
    // §13: silence for 2 × keepAliveMs ends the connection.
    this.startKeepAlive((quiet, ka) => {
      if (quiet > 2 * ka) {
        this.log.warn(`no capsule for ${quiet} ms: the initiator is gone`);
        this.detach(this.logoutAndEnd(LogoutReason.INACTIVE, 'keep-alive timeout'), 'keep-alive timeout');
      }
    });
  }

  /**
   * Capsules the native fast path served never reach onCapsule; the
   * transport's count of everything received does see them, so a connection
   * busy only with native commands is heard (docs/architecture.md "What the
   * control plane sees of native work").
   */
  protected override receivedCount(): number {
    return this.conn.received;
  }

  /** Commands running on the fast path count against the credits and own their tags too. */
  private tagInUse(tag: bigint): boolean {
    return this.outstanding.has(tag) || this.fast.hasTag(tag);
  }

  private inUse(): number {
    return this.outstanding.size + this.outstandingTasks + this.fast.inFlight();
  }

  /** A task management function takes a tag and a credit as a command does. */
  private admitTask(tag: bigint): void {
    if (this.tagInUse(tag)) throw new ProtocolViolation(`tag ${tag} is already outstanding`);
    if (this.inUse() >= this.credits) throw new ProtocolViolation('credit overrun', LogoutReason.CREDIT_OVERRUN);
  }

  /** A task management function holds its credit from now until it has answered. */
  private trackTask(start: () => Promise<void>, what: string): void {
    this.outstandingTasks++;
    this.syncFast();
    this.detach(
      start().finally(() => {
        this.outstandingTasks--;
        this.syncFast();
      }),
      what,
    );
  }

  private onCommand(c: CommandCapsule): void {
    if (this.tagInUse(c.tag)) throw new ProtocolViolation(`tag ${c.tag} is already outstanding`);
    if (this.inUse() >= this.credits) throw new ProtocolViolation('credit overrun', LogoutReason.CREDIT_OVERRUN);
    if (this.draining) {
      // Draining: finish what is running, refuse new work with BUSY (SAM-5 5.3.1).
      const busy: Outstanding<B> = { lun: c.lun, request: null, done: Promise.resolve() };
      this.outstanding.set(c.tag, busy);
      this.syncFast();
      busy.done = this.respond(c.tag, ScsiStatus.BUSY, undefined, NO_RESIDUALS);
      return;
    }
    // The capsule is a view of a receive buffer that is reposted when this
    // returns: keep copies of what outlives it (the CDB, immediate data).
    const cdb = Buffer.from(c.cdb);
    const data = c.data.format === DataFormat.IMMEDIATE ? { format: c.data.format, data: Buffer.from(c.data.data) } : c.data;
    const request = new ScsiRequest(new CapsuleCommand(this.host, c.tag, data), this.scopeOf(c.lun), cdb, offerOf(c.direction, data));
    const command: Outstanding<B> = { lun: c.lun, request, done: Promise.resolve() };
    this.outstanding.set(c.tag, command);
    this.syncFast();
    command.done = request.run();
  }

  /** A command answered by its data write's remote CQ data (§12.1): its credit is back, as with an RSP's delta of 1. */
  private answeredByWrite(tag: bigint): boolean {
    if (!this.outstanding.has(tag) || this.state === 'closed') return false;
    this.outstanding.delete(tag);
    // As respond() does: the fast path takes nothing while JS holds a command.
    this.syncFast();
    this.wakeIfIdle();
    return true;
  }

  private async respond(tag: bigint, status: number, sense: Buffer | undefined, residuals: Residuals): Promise<void> {
    if (!this.outstanding.has(tag) || this.state === 'closed') return;
    this.outstanding.delete(tag);
    this.syncFast();
    const residual = (n: number): Residual | null => (n === 0 ? null : { kind: n > 0 ? 'under' : 'over', count: Math.abs(n) });
    const rsp: ResponseCapsule = {
      op: Opcode.RSP,
      tag,
      creditDelta: 1,
      status,
      sense: sense ?? EMPTY,
      dataOutResidual: residual(residuals.dataOut),
      dataInResidual: residual(residuals.dataIn),
    };
    await this.sendCapsule(rsp);
    this.wakeIfIdle();
  }

  /**
   * Sends a capsule. It never throws and never rejects: a send that fails,
   * whether the native post throws at once (fi_inject on sockets fails with
   * FI_ENOENT when the peer has just disconnected) or its completion fails
   * later, means the connection is unusable, so it ends with the
   * reason logged (docs/protocol.md §15) and the caller carries on.
   */
  private async sendCapsule(c: Capsule): Promise<void> {
    if (this.state === 'closed') return;
    try {
      await this.conn.send(capsuleBuffer(c));
    } catch (e) {
      // While closing, the peer may well be gone already, and whoever set
      // 'closing' ends the connection with its own reason.
      // (A method, not a comparison: TypeScript keeps the narrowing from before the await.)
      if (this.endingOrEnded()) return;
      // An initiator that went away is a lost connection, not a fault to warn about (transport/connection-loss.ts).
      if (isConnectionLoss(e, this.transportGone)) this.log.info(`connection lost: could not send ${opName(c.op)} (tag ${c.tag}): ${errorText(e)}`, this.meta());
      else this.log.warn(`could not send ${opName(c.op)} (tag ${c.tag}), ending the session: ${errorText(e)}`, this.meta());
      this.detach(this.end(`send failed: ${errorText(e)}`), 'end after a failed send');
    }
  }

  private endingOrEnded(): boolean {
    return this.state === 'closing' || this.state === 'closed';
  }

  /**
   * For work nobody awaits (a reply sent from a receive callback, a timer's
   * logout). Each such promise is written not to reject; if one does anyway,
   * that is a bug here, and it ends this connection, logged at error, instead of
   * reaching the daemon's unhandled-rejection handler, which would exit
   * (docs/operations.md "Errors nobody caught") and drop every other connection.
   */
  protected detach(p: Promise<unknown>, what: string): void {
    p.catch((e: unknown) => {
      this.log.error(`${what} failed: ${errorText(e)}`, this.meta());
      if (this.state !== 'closed')
        this.end(`internal error in ${what}`).catch((e2: unknown) => this.log.error(`ending the session failed: ${errorText(e2)}`, this.meta()));
    });
  }

  protected meta(): Record<string, unknown> {
    // Every line about a connection carries the peer, so a journal search by address finds them all.
    // `session` only once the login has granted the id (docs/operations.md "Logs"): a refused login has none.
    return { ...(this.nexus ? { session: Number(this.sessionId) } : {}), initiator: this.login?.initiatorName, connection: this.conn.id, peer: this.conn.peer };
  }

  /**
   * A transfer or send of this connection failed (§12): the initiator went away
   * (transport/connection-loss.ts decides), or it broke the protocol. A loss is
   * logged once at info and ends the connection as a disconnect does; an ending
   * already under way says nothing more, as fail() does.
   */
  private transferFailed(why: string, cause: unknown): void {
    if (this.state === 'closing' || this.state === 'closed') return;
    if (!isConnectionLoss(cause, this.transportGone)) {
      this.detach(this.fail(new ProtocolViolation(why)), 'protocol violation');
      return;
    }
    this.log.info(`connection lost: ${why}`, this.meta());
    this.detach(this.end('connection lost'), 'connection loss');
  }

  /** A protocol violation: log it, tell the initiator (best effort), disconnect (§15). */
  private async fail(v: ProtocolViolation): Promise<void> {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.log.warn(`protocol violation, disconnecting: ${v.message}`, this.meta());
    if (this.state === 'active') return this.logoutAndEnd(v.logoutReason, v.message);
    const tag = this.login?.tag ?? 0n;
    this.state = 'closing';
    await this.sendCapsule({ op: Opcode.LOGIN_REJ, tag, reason: LoginRejectReason.PROTOCOL_ERROR, maxItCapsule: this.conn.maxCapsule });
    await this.end(v.message);
  }

  private async logoutAndEnd(reason: number, why: string): Promise<void> {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.state = 'closing';
    // Stop outstanding commands before they touch the initiator's memory again.
    this.abortAll();
    await this.sendCapsule({ op: Opcode.T_LOGOUT, tag: 0n, reason: reason as LogoutReasonCode });
    await this.end(why);
  }

  /** A drain waits for the fast path's commands too (each LUN revoked first). */
  protected override nativeIdle(): Promise<void> {
    return this.fast.idle();
  }

  /** T_LOGOUT with the reason (drain: shutting down; forced logout, a removed volume: administrative), then disconnect. */
  protected askLogout(kind: LogoutKind | number, why: string): Promise<void> {
    const reason = kind === 'shutdown' ? LogoutReason.SHUTDOWN : kind === 'admin' ? LogoutReason.ADMIN : kind;
    return this.logoutAndEnd(reason, why);
  }

  /**
   * The connection is ending: every command of it answers TASK ABORTED at its
   * next abort point, and what of it is still inside a backend fences later
   * commands on its blocks (LogicalUnit.fenceLost). The initiator reissues its
   * unanswered commands on another connection; this keeps such a copy, and
   * anything written after it, from landing before the first one
   * (docs/target.md "A lost connection's commands").
   */
  private abortAll(): void {
    for (const s of this.outstanding.values()) s.request?.abort();
    const fenced = this.fenceLostCommands();
    if (fenced > 0) this.log.info(`connection lost with ${fenced} command${fenced === 1 ? '' : 's'} still in the backend: later commands on those blocks wait for them`, this.meta());
  }

  protected async endOnce(why: string): Promise<void> {
    this.state = 'closing';
    this.fast.dropParked();
    this.fast.unbind();
    this.abortAll();
    // Commands settle (their RMA fails once the connection is down); wait so
    // nothing touches target memory after the pool may be released.
    const running = [...this.outstanding.values()].map((s) => s.done);
    try {
      await this.conn.close(why);
    } catch (e) {
      // The connection ends all the same; what the transport could not release is its to report.
      this.log.warn(`closing the connection failed: ${errorText(e)}`, this.meta());
    }
    await Promise.allSettled(running);
    await this.ended(why);
  }

  private async ended(why: string): Promise<void> {
    if (this.state === 'closed') return;
    if (this.state !== 'closing') {
      // The peer went away first: abort and wait as end() does.
      this.state = 'closing';
      this.fast.dropParked();
      this.abortAll();
      await Promise.allSettled([...this.outstanding.values()].map((s) => s.done));
    }
    this.state = 'closed';
    this.fast.unbind();
    this.fast.finishCounts();
    this.stopTimer();
    if (this.nexus) this.env.scsi.logout(this.nexus);
    this.outstanding.clear();
    // Counts include what the fast path served (fast.finishCounts above).
    const { ops, readBytes, writeBytes, errors } = this.io;
    this.log.info(`session ended: ${why}`, { ...this.meta(), commands: ops, readBytes, writeBytes, errors, nativeCommands: this.fast.servedCommands });
    this.finish();
  }
}

/** rblk for TargetServer: its ports on a TargetTransport (listen.ts), one RblkConnection per connection. */
export const rblkConnections: TransportFrontEnd = {
  listen: (host, o) => listenRblk(host, o, (conn, env) => new RblkConnection(conn, env)),
};
