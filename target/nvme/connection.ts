// One NVMe/TCP connection: one queue (NVMe TCP Transport 1.0 §3.3; NVMe-oF 1.1
// §3.3: each queue is its own connection), a ServedConnection of the
// TargetServer once its Fabrics Connect succeeds (docs/nvme.md "Queues and
// sessions"). Its life (the end, fence, drain, what `rblkd ctl sessions`
// shows, its log) is the one every front end's connection shares
// (FrontEndConnection, target/connection/front-end-connection.ts); its PDUs
// are framed, checked and written by its PduChannel (pdu-channel.ts). Here:
// the queue, which runs capsules (Fabrics commands here, admin commands in
// controller.ts, NVM I/O in io.ts), moves write data in-capsule or by
// R2T/H2CData and read data by C2HData, and completes each command once.
// Nothing thrown here escapes to the daemon.
import type { Socket } from 'node:net';
import { cdw, FabricsType, SglId, Status, writeCqe, type NvmeStatus } from '../../protocol/nvme/command.js';
import { c2hData, Fes, HLEN, PduType, r2t, type CommonHeader } from '../../protocol/nvme/pdu.js';
import { errorText } from '../error-text.js';
import { nexusKey, type LogicalUnit } from '../scsi/index.js';
import { noNative, type ConnectionEnvironment, type LogoutKind } from '../connection/environment.js';
import { FrontEndConnection, type ConnectionFacts, type OutstandingCommand } from '../connection/front-end-connection.js';
import { DhchapController } from './auth.js';
import { Controller, inCapsuleBytes, type QueueConnection } from './controller.js';
import { connectQueue } from './fabrics.js';
import type { Fatal } from './framing.js';
import { flushAll, fusedCompareWrite, prepareIo, type Completion, type IoContext, type PreparedIo } from './io.js';
import { PduChannel } from './pdu-channel.js';
import type { Subsystem } from './subsystem.js';

/** The largest C2HData PDU sent. */
const MAX_C2H_DATA = 128 * 1024;
/** In-capsule data accepted on any queue: Linux sends admin capsules of up to 8 KiB (Fabrics Connect data among them). */
const ADMIN_IN_CAPSULE = 8192;
/** Commands whose R2T data is being received at once; the others wait for a buffer (memory per connection). */
const MAX_R2T_COMMANDS = 4;
/** Transfers of commands that completed before their data came (a fused half aborted) whose late H2CData is still taken, and dropped. */
const MAX_RETIRED_R2TS = 64;
/**
 * How long a fused first half waits for its second (Base 2.0 §3.4.2: the
 * second must be the next command submitted). A host submits both together, so
 * anything this late is a host that will not send it: the first half is aborted
 * with Missing Fused Command rather than held, unanswered, for the queue's life.
 */
const FUSED_PARTNER_MS = 1000;
/** After a graceful close (socket.end), how long the host has to close its side before the socket is destroyed. */
const CLOSE_GRACE_MS = 1000;
/** The LUN of a Flush of every namespace (NSID FFFFFFFFh): it runs on each of them (runsOn). */
const EVERY_LUN = -2;
/** A CapsuleResp's length, written straight into a header of its own (CH and CQE, no copy of a CQE). */
const CAPSULE_RESP_LENGTH = HLEN[PduType.CapsuleResp];

export interface NvmeConnectionContext {
  readonly env: ConnectionEnvironment;
  readonly subsystem: Subsystem;
  readonly portName: string;
  /** A discovery-only listener's queue: Connect only to the discovery subsystem. */
  readonly discoveryOnly?: boolean;
}

class Cmd implements OutstandingCommand {
  /** NVMe commands are not aborted one by one: a queue's commands end with it. */
  readonly request = null;
  buf: Buffer | null = null;
  received = 0;
  ttag = -1;
  digestError = false;
  /** The fused pair it is half of (FUSE 01b or 10b), if any. */
  pair?: Pair;
  #done: Promise<void> | null = null;
  #resolve: (() => void) | null = null;
  #finished = false;

  constructor(
    readonly cid: number,
    readonly sqe: Buffer,
    readonly prepared: PreparedIo,
    /** The LUN of the namespace it runs on, EVERY_LUN (a Flush of every namespace), or -1 (admin and Fabrics commands). */
    readonly lun: number,
  ) {}

  /** Settles when the command has completed; made only when someone waits (settled, a drain), which most commands never see. */
  get done(): Promise<void> {
    this.#done ??= this.#finished ? Promise.resolve() : new Promise<void>((r) => (this.#resolve = r));
    return this.#done;
  }

  finish(): void {
    this.#finished = true;
    this.#resolve?.();
  }
}

/** A fused Compare and Write (Base 2.0 §3.4.2): both halves' data, then one atomic run. */
interface Pair {
  readonly first: Cmd;
  second: Cmd | null;
  data: [Buffer | null, Buffer | null];
  broken: boolean;
}

let connections = 0;

export class NvmeTcpConnection extends FrontEndConnection<number, Cmd> implements QueueConnection {
  readonly connection = ++connections;
  qid = -1;
  #state: 'ic' | 'connect' | 'ready' | 'ending' = 'ic';
  readonly #channel: PduChannel;
  #sqsize = 0;
  #sqhd = 0;
  #sqfcDisabled = false;
  #controller: Controller | null = null;
  #hostnqn: string | null = null;
  /** DH-HMAC-CHAP for this queue (target/nvme/auth.ts), when its Connect set AUTHREQ.ATR. */
  #auth: DhchapController | null = null;
  readonly #r2ts = new Map<number, Cmd>();
  readonly #r2tQueue: Cmd[] = [];
  /** By TTAG: R2Ts of commands that completed first; their slots went to the next (#retireR2T). */
  readonly #retired = new Map<number, Cmd>();
  /** The first half of a fused pair, until the next command arrives. */
  #fusedFirst: Cmd | null = null;
  #fusedTimer: NodeJS.Timeout | null = null;
  #ttag = 0;
  /** Why the connection is closing gracefully (close), for the end that follows the socket's close. */
  #closing: string | null = null;
  readonly #peer: string;
  readonly #ioCtx: IoContext;

  constructor(
    private readonly socket: Socket,
    private readonly ctx: NvmeConnectionContext,
  ) {
    super(ctx.env);
    this.#peer = `${socket.remoteAddress ?? 'unknown'}:${socket.remotePort ?? 0}`;
    this.fixLogFields();
    const self = this;
    this.#ioCtx = {
      get nexus() {
        return self.nexus!;
      },
      get maxIo() {
        return ctx.env.limits.maxIo;
      },
      get cntlid() {
        return self.#controller?.cntlid ?? 0xffff;
      },
      get hostid() {
        return self.#controller?.hostid ?? Buffer.alloc(16);
      },
      record: (cls, bytes, error) => this.io.record(cls, bytes, error),
    };
    const inCapsuleMax = Math.max(inCapsuleBytes(ctx.env), ADMIN_IN_CAPSULE);
    this.#channel = new PduChannel(socket, {
      inCapsuleMax,
      get log() {
        return self.log;
      },
      initialized: () => (this.#state = 'connect'),
      pdu: (h, pdu, data, digestOk) => this.#onPdu(h, pdu, data, digestOk),
      abort: (why) => this.detach(this.end(why), why),
      terminated: (why) => this.close(why),
    });
    socket.on('error', (e) => this.log.debug(`NVMe/TCP connection error: ${e.message}`));
    socket.on('close', () => this.detach(this.end(this.#closing ?? 'connection closed'), 'close'));
    // One clock from accept to a granted Connect (limits.login_timeout_ms), as for the other front ends.
    this.armLoginTimer(() => {
      this.log.warn(`NVMe/TCP connection sent no Fabrics Connect within ${ctx.env.limits.loginTimeoutMs} ms; closing it`);
      this.detach(this.end('login timeout'), 'login timeout');
    });
  }

  get id(): string {
    return this.#controller ? `nvme-${this.#controller.cntlid}.${this.qid}` : `c${this.connection}`;
  }

  get loggedIn(): boolean {
    return this.loggedInAt !== null;
  }

  get isActive(): boolean {
    return this.loggedIn && !this.hasEnded && this.#state !== 'ending';
  }

  get initiator(): string | null {
    return this.#hostnqn;
  }

  /** QueueConnection.nexusKey: its host's I_T nexus (host NQN and listener) once connected, as its reservations name it. */
  get nexusKey(): string | null {
    return this.nexus === null ? null : nexusKey(this.nexus);
  }

  /** QueueConnection.close: the queue ends, its socket closed after what is queued is sent. */
  close(why: string): void {
    if (this.hasEnded || this.#closing !== null) return;
    this.#closing = why;
    this.#state = 'ending';
    this.#channel.stop();
    this.socket.end();
    setTimeout(() => this.detach(this.end(why), 'close'), CLOSE_GRACE_MS).unref();
  }

  /** Namespaces are the controller's (docs/nvme.md "Queues and sessions"): a reload refreshes them there, for all its queues. */
  override refreshLuns(): void {
    this.#controller?.refreshNamespaces();
  }

  // ---- FrontEndConnection ----

  protected get serving(): boolean {
    return this.#state === 'ready' && !this.hasEnded;
  }

  protected facts(): ConnectionFacts {
    return {
      id: this.id,
      peer: this.#peer,
      provider: 'nvme-tcp',
      connection: this.connection,
      state: this.#state !== 'ready' ? this.#state : this.#auth?.authenticated === false ? 'authenticating' : this.qid === 0 ? 'admin queue' : `I/O queue ${this.qid}`,
      credits: this.loggedIn ? this.#sqsize + 1 : 0,
      native: noNative('NVMe/TCP connections are served in JavaScript'),
    };
  }

  protected meta(): Record<string, unknown> {
    const c = this.#controller;
    return { connection: this.connection, peer: this.#peer, port: this.ctx.portName, ...(c ? { host: this.#hostnqn, controller: c.cntlid, qid: this.qid } : {}) };
  }

  /**
   * NVMe/TCP has no target-initiated logout: once the commands have run the
   * queue's connection ends, and the host reconnects or gives up. A drain
   * has waited for them already.
   */
  protected async askLogout(kind: LogoutKind | number, why: string): Promise<void> {
    if (!this.draining) {
      this.draining = true;
      await this.untilIdle(kind === 'shutdown' ? 2000 : 5000);
    }
    this.close(why);
    await this.closed;
  }

  protected detach(p: Promise<unknown>, what: string): void {
    p.catch((e: unknown) => {
      this.log.error(`NVMe/TCP ${what} failed: ${errorText(e)}`);
      this.socket.destroy();
    });
  }

  /** A held Asynchronous Event Request is not work in progress: it would wait for an event, not for storage. */
  protected override holdsDrain(c: Cmd): boolean {
    return !(this.qid === 0 && c.sqe[0] === 0x0c);
  }

  protected override runsOn(c: Cmd, lun: number): boolean {
    return c.lun === lun || c.lun === EVERY_LUN;
  }

  protected override *reachedUnits(): Iterable<LogicalUnit> {
    if (this.#controller) for (const ns of this.#controller.namespaces.values()) yield ns.lu;
  }

  /** At once: the socket destroyed, the commands still in a backend fencing later ones, the queue out of its controller. */
  protected endOnce(why: string): Promise<void> {
    this.#state = 'ending';
    this.#channel.stop();
    this.socket.destroy();
    if (this.#fusedTimer) clearTimeout(this.#fusedTimer);
    const c = this.#controller;
    if (c) {
      if (c.queues.get(this.qid) === this) c.queues.delete(this.qid);
      // A command still inside a backend fences later ones on its blocks (docs/target.md "A lost connection's commands").
      this.fenceLostCommands();
      // The admin queue's end is the controller's (NVMe-oF 1.1 §3.5).
      if (this.qid === 0) c.end(`admin queue ended: ${why}`);
    }
    // Commands still running complete into nothing (complete); nobody waits for them any more.
    for (const cmd of this.outstanding.values()) cmd.finish();
    this.outstanding.clear();
    this.log.debug(`NVMe/TCP connection ended: ${why}`);
    this.finish();
    return Promise.resolve();
  }

  // ---- commands ----

  #onPdu(h: CommonHeader, pdu: Buffer, data: Buffer | null, digestOk: boolean): Fatal | null {
    return h.type === PduType.CapsuleCmd ? this.#capsule(pdu, data, digestOk) : this.#h2cData(pdu, data, digestOk);
  }

  #capsule(pdu: Buffer, data: Buffer | null, digestOk: boolean): Fatal | null {
    // A copy: the PDU is a view of the socket's chunk, and the command outlives it. From the pool, not a new ArrayBuffer.
    const sqe = Buffer.allocUnsafe(64);
    pdu.copy(sqe, 0, 8, 72);
    const cid = sqe.readUInt16LE(2);
    const connect = sqe[0] === 0x7f && sqe[4] === FabricsType.Connect;
    if (this.#state === 'ready') this.#sqhd = (this.#sqhd + 1) % (this.#sqsize + 1);
    if (this.outstanding.has(cid)) return this.#respond(cid, { status: Status.CommandIdConflict });
    if (this.outstanding.size >= (this.#state === 'ready' ? this.#sqsize + 1 : 1)) {
      return { fes: Fes.PduSequenceError, fei: 0, why: `more commands than the queue's ${this.#sqsize + 1} entries` };
    }
    if (!digestOk) return this.#respond(cid, { status: Status.TransientTransportError });
    if (this.#state === 'connect' && !connect) return this.#respond(cid, { status: Status.CommandSequenceError });
    const p = this.#prepare(sqe);
    if ('status' in p) return this.#respond(cid, p);
    const cmd = new Cmd(cid, sqe, p, this.#lunOf(sqe));
    this.outstanding.set(cid, cmd);
    this.#fuse(cmd);
    if (this.outstanding.get(cid) !== cmd) return null;
    // SGL1 (SQE bytes 24-39): address 24-31, length 32-35, identifier byte 39 (Base 2.0 §4.3.2; TCP 1.0 §3.3.1).
    // The address read as two words: a BigInt per command cost more than the check.
    const sglAddressZero = sqe.readUInt32LE(24) === 0 && sqe.readUInt32LE(28) === 0;
    const sglLength = sqe.readUInt32LE(32);
    const sglId = sqe[39];
    if (p.dir === 'h2c' && p.length > 0) {
      if (data !== null) {
        if (sglId !== SglId.InCapsule) this.#complete(cmd, { status: Status.SglTypeInvalid });
        else if (!sglAddressZero) this.#complete(cmd, { status: Status.SglOffsetInvalid });
        else if (sglLength !== p.length || data.length < p.length) this.#complete(cmd, { status: Status.SglDataLengthInvalid });
        else this.#ready(cmd, data.subarray(0, p.length));
      } else if (sglId !== SglId.TransportData) this.#complete(cmd, { status: Status.SglTypeInvalid });
      else if (sglLength !== p.length) this.#complete(cmd, { status: Status.SglDataLengthInvalid });
      else this.#startR2T(cmd);
    } else if (p.dir === 'c2h' && p.length > 0) {
      if (sglId !== SglId.TransportData) this.#complete(cmd, { status: Status.SglTypeInvalid });
      // SGLS bit 16 (a longer SGL than the data) is clear in Identify Controller: an I/O command's SGL
      // is exactly its data (Base 2.0 §4.3.2, Data SGL Length Invalid). Admin data may be shorter than
      // the host's buffer (a log page smaller than NUMD asks for), so there it need only hold it.
      else if (sglLength < p.length || (this.qid !== 0 && sglLength !== p.length)) this.#complete(cmd, { status: Status.SglDataLengthInvalid });
      else this.#run(cmd, null);
    } else this.#run(cmd, null);
    return null;
  }

  /** The LUN an I/O command runs on; EVERY_LUN for a Flush of every namespace; -1 for the rest. */
  #lunOf(sqe: Buffer): number {
    if (this.qid <= 0 || sqe[0] === 0x7f) return -1;
    const nsid = sqe.readUInt32LE(4);
    if (sqe[0] === 0x00 && nsid === 0xffffffff) return EVERY_LUN;
    return this.#controller?.namespaces.get(nsid)?.lun ?? -1;
  }

  #prepare(sqe: Buffer): PreparedIo | { status: NvmeStatus } {
    const authCmd = sqe[0] === 0x7f && (sqe[4] === FabricsType.AuthSend || sqe[4] === FabricsType.AuthReceive);
    if (this.#auth && !this.#auth.authenticated && !authCmd) return { status: Status.AuthenticationRequired };
    if (sqe[0] === 0x7f) return this.#fabrics(sqe);
    const c = this.#controller!;
    if (!c.ready || c.ended) return { status: Status.CommandSequenceError };
    if (this.qid === 0) return c.prepareAdmin(sqe);
    const nsid = sqe.readUInt32LE(4);
    if (this.draining) return { status: Status.NamespaceNotReady };
    if (sqe[0] === 0x00 && nsid === 0xffffffff) {
      const all = [...c.namespaces.values()];
      return { length: 0, dir: 'none', run: () => flushAll(all, this.#ioCtx) };
    }
    const ns = c.namespaces.get(nsid);
    if (ns === undefined) return { status: Status.InvalidNamespace };
    return prepareIo(sqe, ns, this.#ioCtx);
  }

  /** Fabrics commands (NVMe-oF 1.1 §3): FCTYPE at SQE byte 4. */
  #fabrics(sqe: Buffer): PreparedIo | { status: NvmeStatus } {
    const now = (c: Completion): PreparedIo => ({ length: 0, dir: 'none', run: () => Promise.resolve(c) });
    switch (sqe[4]) {
      case FabricsType.Connect:
        if (this.#state !== 'connect') return { status: Status.CommandSequenceError };
        return { length: 1024, dir: 'h2c', run: (d) => Promise.resolve(this.#connect(sqe, d!)) };
      case FabricsType.PropertyGet:
      case FabricsType.PropertySet: {
        // ATTRIB byte 40 bits 2:0 (0: 4 bytes, 1: 8 bytes), OFST bytes 44-47, VALUE bytes 48-55 (§3.4, §3.5). Admin queue only.
        if (this.qid !== 0) return { status: Status.InvalidOpcode };
        const size8 = (sqe[40] & 7) === 1;
        const offset = cdw(sqe, 11);
        const c = this.#controller!;
        return now(sqe[4] === FabricsType.PropertyGet ? c.propertyGet(offset, size8) : c.propertySet(offset, size8, sqe.readBigUInt64LE(48)));
      }
      case FabricsType.Disconnect:
        // Disconnect (NVMe-oF 1.1 §3.2, I/O queues): complete it, then close the queue.
        if (this.qid === 0) return { status: Status.InvalidField };
        return { length: 0, dir: 'none', run: () => (setImmediate(() => this.close('Fabrics Disconnect')), Promise.resolve({ status: Status.Success })) };
      case FabricsType.AuthSend:
      case FabricsType.AuthReceive: {
        // Authentication Send/Receive (TP 8006): TL/AL at bytes 44-47; a queue without ATR has nothing to authenticate.
        const auth = this.#auth;
        if (auth === null) return { status: Status.CommandSequenceError };
        const len = DhchapController.checkCommand(sqe);
        if (typeof len !== 'number') return { status: len };
        if (sqe[4] === FabricsType.AuthSend) return { length: len, dir: 'h2c', run: (d) => Promise.resolve(auth.send(d!)) };
        return { length: len, dir: 'c2h', run: () => Promise.resolve(auth.receive(len)) };
      }
      default:
        return { status: Status.InvalidOpcode };
    }
  }

  /** Connect (NVMe-oF 1.1 §3.3), decided in fabrics.ts; granted, this connection becomes the queue. */
  #connect(sqe: Buffer, d: Buffer): Completion {
    const r = connectQueue(sqe, d, { env: this.ctx.env, subsystem: this.ctx.subsystem, log: this.log, queue: this, discoveryOnly: this.ctx.discoveryOnly === true });
    if (!('grant' in r)) return r;
    const { controller: c, qid, sqsize, sqfcDisabled, hostnqn, auth } = r.grant;
    this.qid = qid;
    this.#sqsize = sqsize;
    this.#sqhd = 1 % (sqsize + 1);
    this.#sqfcDisabled = sqfcDisabled;
    this.#controller = c;
    this.#hostnqn = hostnqn;
    this.nexus = { sessionId: this.id, initiator: hostnqn, targetPort: this.ctx.portName };
    this.fixLogFields();
    if (auth) this.#auth = new DhchapController({ key: auth, hostnqn, subnqn: this.ctx.subsystem.nqn, log: this.log });
    this.#state = 'ready';
    this.loggedInAt = new Date();
    this.stopTimer();
    if (this.#auth) this.#authDeadline();
    this.log.info(`NVMe/TCP ${qid === 0 ? 'admin' : 'I/O'} queue connected to ${c.discovery ? 'the discovery controller' : this.ctx.subsystem.nqn}`, { sqsize: sqsize + 1 });
    return r.completion;
  }

  /** An authenticating queue has login_timeout_ms from its Connect to succeed (docs/nvme.md "Authentication"). */
  #authDeadline(): void {
    this.armLoginTimer(() => {
      if (this.#auth?.authenticated === true) return;
      this.log.warn(`NVMe queue did not authenticate within ${this.ctx.env.limits.loginTimeoutMs} ms of its Connect; closing it`);
      this.detach(this.end('authentication timeout'), 'authentication timeout');
    });
  }

  /**
   * FUSE (CDW0 byte 1 bits 1:0, Base 2.0 §3.4.2): a Compare with 01b waits for
   * the next command, which must be a Write with 10b on the same blocks. A
   * first half without its second gets Command Aborted due to Missing Fused
   * Command, as does a second half without a first.
   */
  #fuse(cmd: Cmd): void {
    const fuse = cmd.sqe[1] & 3;
    const first = this.#fusedFirst;
    this.#fusedFirst = null;
    if (this.#fusedTimer) clearTimeout(this.#fusedTimer);
    this.#fusedTimer = null;
    if (first && fuse !== 2) {
      first.pair!.broken = true;
      this.#complete(first, { status: Status.AbortMissingFused });
    }
    if (fuse === 1) {
      if (this.qid <= 0 || cmd.sqe[0] !== 0x05) return this.#fail(cmd, Status.InvalidField);
      cmd.pair = { first: cmd, second: null, data: [null, null], broken: false };
      this.#fusedFirst = cmd;
      this.#fusedTimer = setTimeout(() => {
        this.#fusedTimer = null;
        if (this.#fusedFirst !== cmd) return;
        this.#fusedFirst = null;
        cmd.pair!.broken = true;
        this.#complete(cmd, { status: Status.AbortMissingFused });
      }, FUSED_PARTNER_MS);
      this.#fusedTimer.unref();
    } else if (fuse === 2) {
      if (!first || first.pair!.broken) return this.#fail(cmd, first ? Status.AbortFailedFused : Status.AbortMissingFused);
      const same = cmd.sqe[0] === 0x01 && cmd.sqe.readUInt32LE(4) === first.sqe.readUInt32LE(4) && cmd.sqe.subarray(40, 52).equals(first.sqe.subarray(40, 52)) && (cmd.sqe.readUInt16LE(48) === first.sqe.readUInt16LE(48));
      if (!same) {
        first.pair!.broken = true;
        this.#complete(first, { status: Status.InvalidField });
        return this.#fail(cmd, Status.AbortFailedFused);
      }
      first.pair!.second = cmd;
      cmd.pair = first.pair;
    } else if (fuse === 3) this.#fail(cmd, Status.InvalidField);
  }

  /** Answers a command at once; what arrives for it later is dropped. */
  #fail(cmd: Cmd, status: NvmeStatus): void {
    cmd.pair = { first: cmd, second: null, data: [null, null], broken: true };
    this.#complete(cmd, { status });
  }

  /** A command's data is here: it runs, or its fused pair does once both halves have theirs. */
  #ready(cmd: Cmd, data: Buffer | null): void {
    const pair = cmd.pair;
    if (!pair) return this.#run(cmd, data);
    if (pair.broken) return;
    pair.data[pair.first === cmd ? 0 : 1] = data;
    const second = pair.second;
    if (second === null || pair.data[0] === null || pair.data[1] === null) return;
    const ns = this.#controller?.namespaces.get(second.sqe.readUInt32LE(4));
    if (!ns) {
      this.#complete(pair.first, { status: Status.InvalidNamespace });
      this.#complete(second, { status: Status.AbortFailedFused });
      return;
    }
    // From here the pair completes together; no half ends the other any more.
    pair.broken = true;
    const [cmp, wr] = [pair.data[0], pair.data[1]];
    void fusedCompareWrite(ns, second.sqe, cmp, wr, this.#ioCtx).then(
      ([a, b]) => {
        this.#complete(pair.first, a);
        this.#complete(second, b);
      },
      (e: unknown) => {
        this.log.error(`NVMe fused Compare and Write failed: ${e instanceof Error ? e.message : String(e)}`);
        this.#complete(pair.first, { status: Status.InternalError });
        this.#complete(second, { status: Status.AbortFailedFused });
      },
    );
  }

  #run(cmd: Cmd, data: Buffer | null): void {
    void this.#running(cmd, data);
  }

  /** One async function per command rather than a then() with two closures: nothing it awaits throws past it. */
  async #running(cmd: Cmd, data: Buffer | null): Promise<void> {
    let c: Completion;
    try {
      c = await cmd.prepared.run(data);
    } catch (e) {
      this.log.error(`NVMe command 0x${cmd.sqe[0].toString(16)} failed: ${e instanceof Error ? e.message : String(e)}`);
      c = { status: Status.InternalError };
    }
    this.#complete(cmd, c);
  }

  #startR2T(cmd: Cmd): void {
    if (this.#r2ts.size >= MAX_R2T_COMMANDS) {
      this.#r2tQueue.push(cmd);
      return;
    }
    do this.#ttag = (this.#ttag + 1) & 0xffff;
    while (this.#r2ts.has(this.#ttag));
    this.#retired.delete(this.#ttag);
    cmd.ttag = this.#ttag;
    cmd.buf = Buffer.allocUnsafe(cmd.prepared.length);
    this.#r2ts.set(cmd.ttag, cmd);
    // One R2T for the whole transfer; the host splits it into H2CData PDUs of at most MAXH2CDATA (§3.6.2.10, §3.3.3).
    this.#channel.send(r2t(cmd.cid, cmd.ttag, 0, cmd.prepared.length));
  }

  /** H2CData (§3.6.2.8): CCCID 8-9, TTAG 10-11, DATAO 12-15, DATAL 16-19, for an R2T we sent, in order, within it. */
  #h2cData(pdu: Buffer, data: Buffer | null, digestOk: boolean): Fatal | null {
    const cccid = pdu.readUInt16LE(8);
    const ttag = pdu.readUInt16LE(10);
    const datao = pdu.readUInt32LE(12);
    const datal = pdu.readUInt32LE(16);
    const retired = this.#retired.get(ttag);
    const cmd = this.#r2ts.get(ttag) ?? retired;
    if (cmd === undefined) return { fes: Fes.InvalidHeaderField, fei: 10, why: `H2CData for TTAG ${ttag}, which no R2T gave` };
    if (cmd.cid !== cccid) return { fes: Fes.InvalidHeaderField, fei: 8, why: `H2CData CCCID ${cccid} for TTAG ${ttag} of command ${cmd.cid}` };
    if (datal !== (data?.length ?? 0) || datal === 0) return { fes: Fes.InvalidHeaderField, fei: 16, why: `H2CData DATAL ${datal} with ${data?.length ?? 0} bytes of data` };
    if (datao !== cmd.received || datao + datal > cmd.prepared.length) {
      return { fes: Fes.DataTransferOutOfRange, fei: 12, why: `H2CData at ${datao}+${datal} outside the R2T (expected offset ${cmd.received} of ${cmd.prepared.length})` };
    }
    if (cmd === retired) {
      // Data the host sent before it heard the command end: taken in order, and dropped.
      cmd.received += datal;
      if (cmd.received === cmd.prepared.length) this.#retired.delete(ttag);
      return null;
    }
    data!.copy(cmd.buf!, datao);
    cmd.received += datal;
    if (!digestOk) cmd.digestError = true;
    if (cmd.received < cmd.prepared.length) return null;
    this.#freeR2T(ttag);
    // A data digest error is not fatal: the command completes with Transient Transport Error (§3.6.2.6 / Base 2.0 §4.6.1.2.1).
    if (cmd.digestError) this.#complete(cmd, { status: Status.TransientTransportError });
    else this.#ready(cmd, cmd.buf);
    return null;
  }

  /**
   * A command that completes while its R2T is open or queued (a fused half that ended early) gives
   * its slot to the next: a host that has its completion sends no more data for it, and the slot
   * would be held for good. Data already on its way is still taken for a while, and dropped.
   */
  #retireR2T(cmd: Cmd): void {
    const queued = this.#r2tQueue.indexOf(cmd);
    if (queued >= 0) this.#r2tQueue.splice(queued, 1);
    if (cmd.ttag < 0 || this.#r2ts.get(cmd.ttag) !== cmd) return;
    cmd.buf = null;
    this.#retired.set(cmd.ttag, cmd);
    if (this.#retired.size > MAX_RETIRED_R2TS) this.#retired.delete(this.#retired.keys().next().value!);
    this.#freeR2T(cmd.ttag);
  }

  /** An R2T's slot is free (its data all came, or its command ended): the next waiting write gets it. */
  #freeR2T(ttag: number): void {
    this.#r2ts.delete(ttag);
    const next = this.#r2tQueue.shift();
    if (next) this.#startR2T(next);
  }

  #complete(cmd: Cmd, c: Completion): void {
    // Each command completes once; a fused half that ends early ends its partner (Base 2.0 §3.4.2).
    if (this.outstanding.get(cmd.cid) !== cmd) {
      c.release?.();
      return;
    }
    this.outstanding.delete(cmd.cid);
    cmd.finish();
    this.#retireR2T(cmd);
    this.wakeIfIdle();
    const pair = cmd.pair;
    if (pair && !pair.broken) {
      pair.broken = true;
      if (this.#fusedFirst === cmd) this.#fusedFirst = null;
      const partner = pair.first === cmd ? pair.second : pair.first;
      if (partner) this.#complete(partner, { status: Status.AbortFailedFused });
    }
    if (this.hasEnded || this.#state === 'ending') {
      c.release?.();
      return;
    }
    const ok = c.status.sc === 0 && c.status.sct === 0;
    if (ok && c.data && c.data.length > 0) {
      const total = Math.min(c.data.length, cmd.sqe.readUInt32LE(32));
      for (let off = 0; off < total; off += MAX_C2H_DATA) {
        const n = Math.min(MAX_C2H_DATA, total - off);
        const last = off + n === total;
        const success = last && this.#sqfcDisabled;
        // The data's memory goes back (c.release) once the socket has written its last piece.
        this.#channel.send(c2hData(cmd.cid, off, n, last, success), n === c.data.length ? c.data : c.data.subarray(off, off + n), last ? c.release : undefined);
      }
      if (this.#sqfcDisabled) return;
    } else c.release?.();
    this.#respond(cmd.cid, c);
  }

  /** CapsuleResp (§3.6.2.7) with the CQE: SQHD, SQID, CID, status (phase 0 on fabrics, NVMe-oF 1.1 §2.2). */
  #respond(cid: number, c: Completion | { status: NvmeStatus }): null {
    const cq = c as Completion;
    const h = Buffer.allocUnsafe(CAPSULE_RESP_LENGTH);
    h.writeUInt32LE(PduType.CapsuleResp, 0);
    writeCqe(h, 8, { cid, sqid: Math.max(0, this.qid), sqhd: this.#sqhd, status: c.status, dw0: cq.dw0, dw1: cq.dw1 });
    this.#channel.send(h);
    return null;
  }
}
