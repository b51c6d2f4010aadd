// One initiator connection on the target, from accept to disconnect
// (docs/protocol.md §4): login with optional mutual HMAC authentication, then
// commands, task management, keep-alive and logout. Every capsule is decoded
// strictly; any violation ends this connection alone, with a logged reason
// (§15), and nothing else notices.
import { randomBytes, randomInt } from 'node:crypto';
import { getSystemErrorName } from 'node:util';
import {
  capsuleBuffer,
  DataFormat,
  decodeCapsule,
  FENCE_VERSION,
  GATEWAY_FENCE_VERSION,
  LoginRejectReason,
  LogoutReason,
  MAX_TRANSFER_LENGTH,
  newNonce,
  Opcode,
  REMOTE_DATA_VERSION,
  ProtocolError,
  PROTOCOL_LIMITS,
  sessionLimits,
  targetProof,
  TaskFunction,
  TaskResponse,
  verifyInitiatorProof,
  type Capsule,
  type CommandCapsule,
  type LoginRequest,
  type LoginResponse,
  type LogoutReason as LogoutReasonCode,
  type Residual,
  type ResponseCapsule,
  type TaskManagement,
  type WireLimits,
} from '../../protocol/wire/index.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { errorText } from '../error-text.js';
import { backendFailure, IO_CLASSES, LATENCY_BUCKETS_S, NO_RESIDUALS, ScsiRequest, nexusKey, type LogicalUnit, type Residuals } from '../scsi/index.js';
import type { ConnectionFastPath, DataBuffer, FastPathStats, TargetConnection } from '../transport/transport.js';
import { isConnectionLoss } from '../transport/connection-loss.js';
import { CapsuleCommand, offerOf, type CommandHost } from './command.js';
import { noNative, type LogoutKind, type NativeInfo, type ConnectionEnvironment, type ConnectionFactory } from '../connection/environment.js';
import { FrontEndConnection, type ConnectionFacts } from '../connection/front-end-connection.js';

/**
 * Session ids (LOGIN_RSP) count up from a random start, so that an id an
 * initiator remembers from an earlier rblkd process names no connection of
 * this one: FENCE CONNECTION (docs/protocol.md §14.1) must not end a stranger.
 * Below 2^53, as logs print them as numbers.
 */
let nextSessionId = BigInt(randomInt(1, 2 ** 20)) << 32n;
/** Stands in for the secret of a name that has none (§10): random, known to nobody. */
const UNKNOWN_NAME_SECRET = randomBytes(32);
const EMPTY = Buffer.alloc(0);
const IO_CLASS_READ = IO_CLASSES.indexOf('read');
const IO_CLASS_WRITE = IO_CLASSES.indexOf('write');

/** Largest target-to-initiator capsule rblk sends: RSP with 252 bytes of sense is 284. */
const TARGET_CAPSULE_NEED = 512;

type State = 'login' | 'challenged' | 'active' | 'closing' | 'closed';

export class ProtocolViolation extends Error {
  constructor(
    message: string,
    readonly logoutReason: number = LogoutReason.PROTOCOL_ERROR,
  ) {
    super(message);
  }
}

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
  private fast: ConnectionFastPath | null = null;
  /** Per mapped LUN: leaves the LU's fast-path gate. */
  private readonly fastBindings = new Map<number, () => void>();
  /** Why this connection has no fast path at all (null while it has one, or before login). */
  private fastOff: string | null = null;
  /** What the fast path answered GOOD on this connection, for `rblkd ctl sessions`. */
  private readonly nativeIo = { readBytes: 0, writeBytes: 0 };
  /** Per LUN the fast path has served: its last collect, and the collector's removal. */
  private readonly fastCollectors = new Map<number, () => void>();
  /** takeCounts' scratch: six totals and two histograms. */
  private readonly fastCounts = new Float64Array(6 + 2 * (LATENCY_BUCKETS_S.length + 1));

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
    for (const lun of this.fastCollectors.keys()) {
      const m = this.luns.get(lun);
      if (this.fast !== null && m !== undefined) this.collectFast(this.fast, lun, m.lu);
    }
    return { id: this.id, peer: this.conn.peer, provider: this.conn.provider, connection: this.conn.id, state: this.state, credits: this.credits, native: this.nativeInfo() };
  }

  /** Whether the fast path serves this connection, why not where it does not, and what it did. */
  private nativeInfo(): NativeInfo {
    const fast = this.fast;
    if (fast === null) return noNative(this.fastOff ?? (this.nexus === null ? 'not logged in' : 'no fast path'));
    const stats = fast.stats;
    const why: string[] = [];
    let served = 0;
    for (const [lun, { lu }] of this.luns) {
      const reason = this.fastBlocker(lu);
      if (reason === null) served++;
      else why.push(`LUN ${lun} (${lu.name}): ${reason}`);
    }
    if (this.luns.size === 0) why.push('no LUN mapped');
    return {
      active: served > 0,
      reason: why.length > 0 ? why.join('; ') : null,
      reactor: stats.reactor >= 0 ? stats.reactor : null,
      commands: stats.taken,
      readBytes: this.nativeIo.readBytes,
      writeBytes: this.nativeIo.writeBytes,
    };
  }

  /** Why this LUN's READs and WRITEs go to JavaScript now, or null when they run natively (the conditions of bindFastPath's allow and the LU's gate). */
  private fastBlocker(lu: LogicalUnit): string | null {
    const target = lu.backend.fastPathTarget;
    if (target === undefined) return 'its backend has no native path';
    if (target === null) return 'its backend cannot take native I/O now (fenced, or being reopened)';
    if (this.draining || this.state === 'closing' || this.state === 'closed') return 'the connection is ending';
    return this.nexus === null ? 'not logged in' : lu.fastPath.blocker(nexusKey(this.nexus));
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
    return this.fast?.stats ?? null;
  }
  /** Whether LOGIN_RSP was granted (it stays true while the connection ends). */
  get loggedIn(): boolean {
    return this.nexus !== null;
  }
  /** A removed volume waits for the fast path's commands on its LUN too, revoked first. */
  protected override nativeSettled(lun: number): Promise<void> | null {
    if (!this.fast) return null;
    this.fast.revoke(lun);
    return this.fast.idle(lun);
  }

  private onCapsule(buf: Buffer): void {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.lastHeard = Date.now();
    let capsule: Capsule;
    try {
      capsule = decodeCapsule(buf, { from: 'initiator', limits: this.limits });
    } catch (e) {
      const msg = e instanceof ProtocolError ? `${e.reason}: ${e.message}` : String(e);
      this.detach(this.fail(new ProtocolViolation(`undecodable capsule (${msg})`)), 'protocol violation');
      return;
    }
    try {
      this.dispatch(capsule);
    } catch (e) {
      this.detach(this.fail(e instanceof ProtocolViolation ? e : new ProtocolViolation(String(e))), 'protocol violation');
    }
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
        this.onTaskManagement(c);
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

  // §7: LOGIN_REQ → [LOGIN_CHALLENGE → LOGIN_AUTH] → LOGIN_RSP or LOGIN_REJ.
  private onLoginRequest(req: LoginRequest): void {
    this.login = req;
    this.log = this.env.log;
    const m = { initiator: req.initiatorName, connection: this.conn.id, peer: this.conn.peer };
    this.log.debug(
      `LOGIN_REQ: target ${JSON.stringify(req.targetName)}, ${req.credits} credits, capsules ${req.maxItCapsule}/${req.maxTiCapsule}, immediate data ${req.immediateDataSize}${req.authRequired ? ', initiator requires authentication' : ''}`,
      m,
    );
    if (req.targetName !== this.env.targetName) {
      this.log.warn(`login refused: unknown target name ${JSON.stringify(req.targetName)}`, m);
      return this.reject(LoginRejectReason.UNABLE_TO_ASSOCIATE);
    }
    if (req.maxItCapsule > this.conn.maxCapsule) return this.reject(LoginRejectReason.CAPSULE_TOO_LARGE);
    if (req.maxTiCapsule < TARGET_CAPSULE_NEED) return this.reject(LoginRejectReason.CAPSULE_TOO_LARGE);
    const admitted = this.env.admitSession();
    if (admitted !== 'ok') {
      this.log.warn(`login refused: ${admitted === 'full' ? 'max_sessions reached' : 'shutting down'}`, m);
      return this.reject(admitted === 'full' ? LoginRejectReason.NO_RESOURCES : LoginRejectReason.SHUTTING_DOWN);
    }
    // §10: whether a name is known, has a secret, or sees a volume is told to
    // nobody before it authenticates. Every login that needs authentication
    // is challenged, known name or not, and every wrong answer is the same
    // AUTH_FAILED after the same HMAC work, as CHAP targets do.
    if (this.env.secretFor(req.initiatorName) !== null || this.env.authRequired || req.authRequired) {
      this.targetNonce = newNonce();
      this.state = 'challenged';
      this.log.debug('sending LOGIN_CHALLENGE', m);
      this.detach(this.sendCapsule({ op: Opcode.LOGIN_CHALLENGE, tag: req.tag, targetNonce: this.targetNonce }), 'LOGIN_CHALLENGE');
      return;
    }
    // No authentication: the name is all the target has, and the ACL decides.
    if (!this.admitsSomeVolume(m)) return;
    this.grant(null);
  }

  /** ACCESS DENIED for an initiator that can see no volume; told only to a name that authenticated, or when none must. */
  private admitsSomeVolume(m: Record<string, unknown>): boolean {
    if (this.env.lunsFor(this.login!.initiatorName).size > 0) return true;
    this.log.warn('login refused: no volume is visible to this initiator', m);
    this.reject(LoginRejectReason.ACCESS_DENIED);
    return false;
  }

  private onLoginAuth(initiatorNonce: Buffer, proof: Buffer): void {
    const req = this.login!;
    const secret = this.env.secretFor(req.initiatorName);
    const transcript = {
      initiatorName: req.initiatorName,
      targetName: this.env.targetName,
      targetNonce: this.targetNonce!,
      initiatorNonce: Buffer.from(initiatorNonce),
    };
    // A name with no secret is checked against a random one, so that its
    // refusal costs what a wrong secret's does.
    const matches = verifyInitiatorProof(secret ?? UNKNOWN_NAME_SECRET, transcript, proof);
    const m = { initiator: req.initiatorName, connection: this.conn.id, peer: this.conn.peer };
    if (secret === null) {
      this.log.warn('login refused: authentication required and no secret is configured for this initiator (answered as authentication failed)', m);
      return this.reject(LoginRejectReason.AUTH_FAILED);
    }
    if (!matches) {
      this.log.warn('login refused: authentication failed (wrong secret or tampered exchange)', m);
      return this.reject(LoginRejectReason.AUTH_FAILED);
    }
    this.log.debug('LOGIN_AUTH: the initiator proved its secret', m);
    if (!this.admitsSomeVolume(m)) return;
    this.grant(targetProof(secret, transcript));
  }

  private grant(proof: Buffer | null): void {
    const req = this.login!;
    const l = this.env.limits;
    const credits = Math.max(1, Math.min(req.credits, l.queueDepth, this.conn.recvBuffers - 3));
    try {
      // §11: the credits' receive buffers are posted before LOGIN_RSP grants them.
      this.conn.openReceiveRing();
    } catch (e) {
      this.log.warn(`login refused: no memory for the receive ring (${e instanceof Error ? e.message : String(e)})`, this.meta());
      return this.reject(LoginRejectReason.NO_RESOURCES);
    }
    const rsp: LoginResponse = {
      op: Opcode.LOGIN_RSP,
      tag: req.tag,
      sessionId: this.sessionId,
      maxItCapsule: Math.min(req.maxItCapsule, this.conn.maxCapsule),
      maxTiCapsule: Math.min(req.maxTiCapsule, 4096),
      immediateDataSize: Math.min(req.immediateDataSize, l.inCapsuleData, Math.min(req.maxItCapsule, this.conn.maxCapsule) - 48),
      maxTransfer: Math.min(l.maxIo, MAX_TRANSFER_LENGTH),
      credits,
      maxDescriptors: l.maxDescriptors,
      keepAliveMs: l.keepAliveMs,
      targetProof: proof,
    };
    this.credits = credits;
    this.limits = sessionLimits(rsp, 'target');
    this.nexus = { sessionId: String(this.sessionId), initiator: req.initiatorName, targetPort: this.env.portName };
    this.fixLogFields();
    this.startFastPath(rsp);
    this.mapLuns(this.env.lunsFor(req.initiatorName));
    this.env.scsi.login(this.nexus);
    this.state = 'active';
    this.loggedInAt = new Date();
    this.stopTimer();
    this.keepAlive();
    this.log.info(`logged in${proof ? ' (authenticated)' : ''}: ${credits} credits, ${this.luns.size} LUN(s)`, { provider: this.conn.provider });
    this.detach(this.sendCapsule(rsp), 'LOGIN_RSP');
  }

  private startFastPath(rsp: LoginResponse): void {
    if (this.env.fastPath === false) {
      this.fastOff = 'fast_path is off in the configuration';
      return;
    }
    if (this.conn.startFastPath === undefined) {
      this.fastOff = `the ${this.conn.provider} transport has no fast path`;
      return;
    }
    try {
      this.fast = this.conn.startFastPath({
        credits: rsp.credits,
        maxCapsule: this.limits.maxCapsule,
        maxTransfer: this.limits.maxTransfer,
        maxImmediate: this.limits.maxImmediate,
        // §12.1 on the fast path as on the JS path (command.ts): the same condition.
        remoteData: this.host.remoteData,
        latencyBuckets: LATENCY_BUCKETS_S,
      });
    } catch (e) {
      // Everything still works without it, through JavaScript.
      this.log.warn(`no native fast path for this session: ${errorText(e)}`);
      this.fastOff = `the fast path could not start: ${errorText(e)}`;
      this.fast = null;
    }
    if (this.fast === null) return;
    this.fast.onFailed = (tag, lun, kind, errno, length) => this.onFastFailed(tag, lun, kind, errno, length);
    // Native requests that outlive the connection (a slow device, a cluster away): their blocks are not known here,
    // so each volume the fast path served waits for them whole (docs/target.md "A lost connection's commands").
    this.fast.onOrphans = (settled) => {
      const lus = new Set([...this.luns.values()].filter(({ lu }) => lu.backend.fastPathTarget !== undefined).map(({ lu }) => lu));
      for (const lu of lus) lu.fenceUntil(settled);
      if (lus.size > 0) this.log.info(`connection lost with native requests still in the backend: ${[...lus].map((lu) => lu.name).join(', ')} wait for them`, this.meta());
    };
    this.syncFast();
  }

  /** The fast path's view of the connection's share of the credits: it takes nothing while JS holds a command. */
  private syncFast(): void {
    this.fast?.setCounters(this.outstanding.size + this.outstandingTasks, this.credits);
  }

  /** Binds each mapped LUN whose backend the fast path can reach to its LU's gate (target/scsi/fast-path-gate.ts). */
  private bindFastPath(): void {
    for (const unbind of this.fastBindings.values()) unbind();
    this.fastBindings.clear();
    const fast = this.fast;
    if (fast === null || this.nexus === null) return;
    const key = nexusKey(this.nexus);
    for (const [lun, { lu, access }] of this.luns) {
      if (lu.backend.fastPathTarget === undefined) continue;
      const allow = (): void => {
        const target = lu.backend.fastPathTarget ?? null;
        if (target === null || this.draining || this.state === 'closing' || this.state === 'closed') return fast.revoke(lun);
        fast.setLun(lun, {
          fd: target.fd,
          align: target.align,
          blockSize: lu.blockSize,
          blocks: lu.blocks,
          maxBlocks: Math.min(lu.limits.maxTransferBlocks, Math.floor(this.env.limits.maxIo / lu.blockSize)),
          readable: true,
          writable: access === 'rw' && !lu.readOnly,
          writeThrough: !lu.modes.wce,
          ...(target.rbd !== undefined ? { rbdApi: target.rbd.api, rbdImage: target.rbd.image } : {}),
        });
      };
      this.fastBindings.set(lun, lu.fastPath.bind({ nexusKey: key, allow, revoke: () => fast.revoke(lun), idle: () => fast.idle(lun) }));
      // The fast path's GOOD answers count where the request core counts
      // (target/scsi/request/io-stats.ts). Kept until the connection has ended,
      // so that commands answered after the LUN was revoked are counted too.
      if (!this.fastCollectors.has(lun)) {
        const collect = (): void => this.collectFast(fast, lun, lu);
        const remove = lu.stats.addCollector(collect);
        this.fastCollectors.set(lun, () => {
          collect();
          remove();
        });
      }
    }
  }

  /** The connection has ended and nothing of it runs natively any more: the last counts, then no collectors. */
  private finishFastCounts(): void {
    for (const done of this.fastCollectors.values()) done();
    this.fastCollectors.clear();
  }

  /** Moves what the fast path counted on one LUN into the LU's and the connection's counters. */
  private collectFast(fast: ConnectionFastPath, lun: number, lu: LogicalUnit): void {
    const out = this.fastCounts;
    if (fast.takeCounts(lun, out) === 0) return;
    const nb = LATENCY_BUCKETS_S.length + 1;
    for (const d of [0, 1]) {
      const ops = out[3 * d]!;
      if (ops === 0) continue;
      lu.stats.recordBatch(d === 0 ? IO_CLASS_READ : IO_CLASS_WRITE, ops, out[3 * d + 1]!, 0, out[3 * d + 2]!, out.subarray(6 + d * nb, 6 + (d + 1) * nb));
    }
    this.io.recordBatch(out[0]! + out[3]!, out[1]!, out[4]!);
    this.nativeIo.readBytes += out[1]!;
    this.nativeIo.writeBytes += out[4]!;
  }

  private unbindFastPath(): void {
    for (const unbind of this.fastBindings.values()) unbind();
    this.fastBindings.clear();
  }

  /** Waits for every fast-path command of this connection (each LUN revoked first). */
  private fastIdle(): Promise<void> {
    const fast = this.fast;
    if (fast === null) return Promise.resolve();
    return Promise.all([...this.luns.keys()].map((lun) => (fast.revoke(lun), fast.idle(lun)))).then(() => undefined);
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
    this.bindFastPath();
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
    return this.outstanding.has(tag) || (this.fast?.hasTag(tag) ?? false);
  }

  private inUse(): number {
    return this.outstanding.size + this.outstandingTasks + (this.fast?.inFlight() ?? 0);
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

  // §14.1: abort what was asked, send each aborted command's RSP, then TSK_RSP.
  private onTaskManagement(t: TaskManagement): void {
    if (t.function === TaskFunction.FENCE_CONNECTION) return this.fenceOther(t);
    if (t.function === TaskFunction.FENCE_GATEWAY) return this.fenceGateway(t);
    if (this.tagInUse(t.tag)) throw new ProtocolViolation(`tag ${t.tag} is already outstanding`);
    if (this.inUse() >= this.credits) throw new ProtocolViolation('credit overrun', LogoutReason.CREDIT_OVERRUN);
    this.outstandingTasks++;
    this.syncFast();
    // While a task management function runs, the LU's fast path is held off:
    // what it aborts or resets must not start there meanwhile (docs/target.md "Fast path").
    const lu = this.luns.get(t.lun)?.lu;
    const run = lu && this.fast ? lu.fastPath.hold(() => this.runTask(t)) : this.runTask(t);
    this.detach(
      run.finally(() => {
        this.outstandingTasks--;
        this.syncFast();
      }),
      'task management',
    );
  }

  /**
   * FENCE CONNECTION (§14.1, version 3): the initiator lost another of its
   * connections and is about to reissue that one's commands here. The target
   * may not have seen that loss yet; ending the connection now, and fencing
   * what of it is still in a backend, keeps the first copies from landing
   * after the reissued ones. Answered once the fence is in place.
   */
  private fenceOther(t: TaskManagement): void {
    if (this.conn.version < FENCE_VERSION) throw new ProtocolViolation(`FENCE CONNECTION on a version ${this.conn.version} connection (it needs version ${FENCE_VERSION})`);
    if (this.tagInUse(t.tag)) throw new ProtocolViolation(`tag ${t.tag} is already outstanding`);
    if (this.inUse() >= this.credits) throw new ProtocolViolation('credit overrun', LogoutReason.CREDIT_OVERRUN);
    const id = String(t.taskTag);
    let response: TaskResponse = TaskResponse.COMPLETE;
    if (id !== String(this.sessionId)) {
      const r = this.env.fenceConnection(id, this.login!.initiatorName, `fenced by the initiator from session ${this.sessionId} (it lost this connection)`);
      if (r === 'refused') response = TaskResponse.FAILED;
      this.log.info(`FENCE CONNECTION of session ${id}: ${r}`, this.meta());
    }
    this.outstandingTasks++;
    this.syncFast();
    this.detach(
      this.sendCapsule({ op: Opcode.TSK_RSP, tag: t.tag, creditDelta: 1, response }).finally(() => {
        this.outstandingTasks--;
        this.syncFast();
      }),
      'fence connection',
    );
  }

  /**
   * FENCE GATEWAY (§14.1, version 4): the initiator lost commands on another
   * gateway of the LUN's volume, the one of target port group `taskTag`, and
   * is about to reissue them here. That gateway may be frozen or cut off with
   * them in hand; it is fenced out of the store they share before the answer
   * (LogicalUnit.fenceGateway), so none of them lands after the reissued ones.
   */
  private fenceGateway(t: TaskManagement): void {
    if (this.conn.version < GATEWAY_FENCE_VERSION) throw new ProtocolViolation(`FENCE GATEWAY on a version ${this.conn.version} connection (it needs version ${GATEWAY_FENCE_VERSION})`);
    if (this.tagInUse(t.tag)) throw new ProtocolViolation(`tag ${t.tag} is already outstanding`);
    if (this.inUse() >= this.credits) throw new ProtocolViolation('credit overrun', LogoutReason.CREDIT_OVERRUN);
    const lu = this.luns.get(t.lun)?.lu;
    const group = Number(t.taskTag);
    this.outstandingTasks++;
    this.syncFast();
    const run = async (): Promise<void> => {
      let response: TaskResponse = TaskResponse.INCORRECT_LUN;
      if (lu !== undefined) {
        const r = await lu.fenceGateway(group);
        response = r.ok ? TaskResponse.COMPLETE : TaskResponse.FAILED;
        this.log[r.ok ? 'info' : 'warn'](`FENCE GATEWAY of target port group ${group} on LUN ${t.lun}: ${r.what}`, this.meta());
      }
      if (this.state !== 'active' && this.state !== 'closing') return;
      await this.sendCapsule({ op: Opcode.TSK_RSP, tag: t.tag, creditDelta: 1, response });
    };
    this.detach(
      run().finally(() => {
        this.outstandingTasks--;
        this.syncFast();
      }),
      'fence gateway',
    );
  }

  private async runTask(t: TaskManagement): Promise<void> {
    this.log.debug(`TSK_MGMT ${taskName(t.function)} on LUN ${t.lun}${t.function === TaskFunction.ABORT_TASK ? ` for tag ${t.taskTag}` : ''} (tag ${t.tag})`);
    const mapped = this.luns.get(t.lun);
    let response: number = TaskResponse.COMPLETE;
    if (!mapped) response = TaskResponse.INCORRECT_LUN;
    else if (t.function === TaskFunction.ABORT_TASK) {
      const s = this.outstanding.get(t.taskTag);
      if (s && s.lun === t.lun) {
        s.request?.abort();
        await s.done;
      }
    } else if (t.function === TaskFunction.ABORT_TASK_SET) {
      const mine = [...this.outstanding.values()].filter((s) => s.lun === t.lun);
      for (const s of mine) s.request?.abort();
      await Promise.all(mine.map((s) => s.done));
    } else if (t.function === TaskFunction.LUN_RESET) {
      const mine = [...this.outstanding.values()].filter((s) => s.lun === t.lun);
      for (const s of mine) s.request?.abort();
      await Promise.all(mine.map((s) => s.done));
      // SAM-5 6.3.3: every nexus, this one included, sees 29/00 on its next command.
      mapped.lu.reset();
      this.log.info(`LUN ${t.lun} reset`);
    } else {
      response = TaskResponse.NOT_SUPPORTED;
    }
    if (this.state !== 'active' && this.state !== 'closing') return;
    this.log.debug(`TSK_RSP ${taskResponseName(response)} (tag ${t.tag})`);
    await this.sendCapsule({ op: Opcode.TSK_RSP, tag: t.tag, creditDelta: 1, response: response as TaskResponse });
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
    return this.fastIdle();
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
    this.unbindFastPath();
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
      this.abortAll();
      await Promise.allSettled([...this.outstanding.values()].map((s) => s.done));
    }
    this.state = 'closed';
    this.unbindFastPath();
    this.finishFastCounts();
    this.stopTimer();
    if (this.nexus) this.env.scsi.logout(this.nexus);
    this.outstanding.clear();
    // Counts include what the fast path served (finishFastCounts above).
    const { ops, readBytes, writeBytes, errors } = this.io;
    this.log.info(`session ended: ${why}`, { ...this.meta(), commands: ops, readBytes, writeBytes, errors, nativeCommands: this.fast?.stats.taken ?? 0 });
    this.finish();
  }
}


function errnoName(errno: number): string {
  try {
    return getSystemErrorName(-errno);
  } catch {
    return `errno ${errno}`;
  }
}

function taskName(f: number): string {
  for (const [k, v] of Object.entries(TaskFunction)) if (v === f) return k;
  return `function 0x${f.toString(16)}`;
}

function taskResponseName(r: number): string {
  for (const [k, v] of Object.entries(TaskResponse)) if (v === r) return k;
  return `0x${r.toString(16)}`;
}

function opName(op: number): string {
  for (const [k, v] of Object.entries(Opcode)) if (v === op) return k;
  return `0x${op.toString(16)}`;
}

/** rblk's ConnectionFactory, for TargetServer: one RblkConnection per connection. */
export const rblkConnections: ConnectionFactory = (conn, env) => new RblkConnection(conn, env);
