// One connection of a session, across reconnects: it sends commands on its
// current Connection (protocol.md §9, §12), times them out and runs the
// recovery ladder (ABORT TASK, LOGICAL UNIT RESET, then a new connection;
// SAM-5 7.2, 7.7), probes an idle connection when asked to, and logs in again
// with jittered exponential backoff after the connection is lost.
import { testUnitReady } from '../protocol/scsi/cdb.js';
import { FENCE_VERSION, GATEWAY_FENCE_VERSION, LogoutReason, TaskFunction, TaskResponse } from '../protocol/wire/index.js';
import { reconnectDelay } from './backoff.js';
import { Connection, TransportError, type FastWaiter, type LoginOptions, type QueueAddressWords } from './connection.js';
import { Deadlines } from './deadlines.js';
import { LostSignal } from './lost-signal.js';
import type { FastIo, FastIoChannel } from './fast-io.js';
import { RblkError } from './errors.js';
import type { PathAddress, ResolvedOptions } from './options.js';
import { copyLive, MemoryReleased, queueAddressOf, RegisteredBuffer } from './registered-buffer.js';
import type { ScsiRequest, ScsiResponse } from './scsi-request.js';
import type { InitiatorTransport, IoBuffer } from './transport/transport.js';
import { nextTurn, Sleep, within } from './wait.js';

/** A step the session took to get a stuck command or a dead connection going again. */
export interface RecoveryEvent {
  action: 'abort-task' | 'lun-reset' | 'reconnect' | 'keep-alive' | 'fence-gateway';
  /** Index of the session's connection (0-based). */
  connection: number;
  lun?: number;
  /** The command's tag (ABORT TASK). */
  tag?: bigint;
  reason: string;
}

/** One try of one command on one connection. */
export interface Attempt {
  /** The CMD capsule went out (it has a tag). */
  sent: boolean;
  /** The command timeout fired; a TASK ABORTED answer means "timed out". */
  timedOut: boolean;
  /** The try has ended one way or the other. */
  settled: boolean;
  /** Once sent: where, for the recovery ladder when it times out. */
  conn?: Connection;
  lun?: number;
  tag?: bigint;
}

export interface ChannelHost {
  readonly options: ResolvedOptions;
  readonly transport: InitiatorTransport;
  /** The session is closing: stop reconnecting. */
  readonly isClosing: boolean;
  /** Commands are waiting for a connection, so backoff sleeps keep the process alive. */
  readonly needsConnection: boolean;
  channelUp(ch: Channel): void;
  channelDown(ch: Channel, reason: string, reconnecting: boolean): void;
  reconnectFailed(ch: Channel, error: Error): void;
  recovery(event: RecoveryEvent): void;
  /** The LUN a keep-alive probe goes to, and where its answer (perhaps a unit attention) is reported. */
  probeLun(): number;
  probeAnswered(lun: number, status: number, sense: Buffer): void;
}

/**
 * protocol.md §14.3: after T_LOGOUT for a protocol error, an unexpected capsule
 * or a credit overrun, logging in again would repeat the fault
 * (Connection.logoutReason holds the code).
 */
const NO_RECONNECT: ReadonlySet<number> = new Set([LogoutReason.PROTOCOL_ERROR, LogoutReason.UNEXPECTED_CAPSULE, LogoutReason.CREDIT_OVERRUN]);

/**
 * Reconnect attempts of one connection in flight at once: with a 1 s backoff
 * cap and the 10 s connect timeout, attempts into a partition would otherwise
 * pile up (each holds an endpoint and its receive buffers).
 */
const MAX_PENDING_ATTEMPTS = 4;

export class Channel implements FastIoChannel {
  private current: Connection | null = null;
  /** FENCE CONNECTION requests made, per connection and lost session id (fenceLost). */
  private readonly fences = new WeakMap<Connection, Map<bigint, Promise<void>>>();
  /** FENCE GATEWAY requests made, per connection and `lun/group/lost session id` (fenceGateway). */
  private readonly gatewayFences = new WeakMap<Connection, Map<string, Promise<void>>>();
  private lost = new LostSignal();
  private inflight = 0;
  private lastActive = performance.now();
  private readonly resets = new Map<number, Promise<boolean>>();
  private keepAlive: NodeJS.Timeout | null = null;
  private probing = false;
  private reconnecting = false;
  private closing = false;
  private readonly sleep = new Sleep();
  /** The command timeout of every command sent here: one timer, not one per command. */
  private readonly deadlines: Deadlines<Attempt>;

  constructor(
    readonly index: number,
    private readonly host: ChannelHost,
    /** The gateway this connection goes to (one of options.paths; docs/initiator.md "Multipath"). */
    readonly path: PathAddress = host.options.paths[0],
    /** Its index in options.paths. */
    readonly pathIndex = 0,
  ) {
    this.deadlines = new Deadlines(host.options.commandTimeoutMs, (att) => this.timedOut(att));
  }

  get connection(): Connection | null {
    return this.current;
  }
  get isUp(): boolean {
    return this.current !== null && !this.current.isClosed;
  }
  /** Commands the native queue carried here, on any of the channel's connections (tests, stats). */
  fastCommands = 0;
  /** Commands in flight here (for spreading load). */
  get load(): number {
    return this.inflight;
  }

  private loginOptions(): LoginOptions {
    const o = this.host.options;
    return {
      address: this.path.address,
      port: this.path.port,
      provider: o.provider,
      initiatorName: o.initiatorName,
      targetName: o.targetName,
      secret: o.secret?.reveal(),
      queueDepth: o.queueDepth,
      maxIo: o.maxIo,
      connectTimeoutMs: o.connectTimeoutMs,
      fastPath: o.fastPath,
      busyPollMicros: o.busyPollMicros,
    };
  }

  /** Connects and logs in; rejects with the Connection's LoginError. */
  async open(): Promise<void> {
    this.install(await Connection.open(this.host.transport, this.loginOptions()));
    if (!this.isUp) throw new TransportError('the connection closed right after login');
  }

  /** A first login failed, but other paths carry the session: keep trying this one in the background. */
  retryInBackground(): void {
    if (this.isUp || this.stopped) return;
    this.reconnect().catch((e: unknown) => this.host.reconnectFailed(this, asError(e)));
  }

  private install(conn: Connection): void {
    this.current = conn;
    this.lost = new LostSignal();
    this.lastActive = performance.now();
    conn.onClose = (reason) => this.onClose(conn, reason);
    this.startKeepAlive();
    if (conn.isClosed) this.onClose(conn, 'closed during login');
  }

  private onClose(conn: Connection, reason: string): void {
    if (conn !== this.current) return;
    this.current = null;
    this.lost.fail(new TransportError(`connection closed: ${reason}`));
    this.resets.clear();
    // Registered buffers are the session's: their registration here went with
    // the connection, and the next one registers them again on first use.
    if (this.closing) return;
    const reconnect = conn.logoutReason === null || !NO_RECONNECT.has(conn.logoutReason);
    this.host.channelDown(this, reason, reconnect);
    if (reconnect) this.reconnect().catch((e: unknown) => this.host.reconnectFailed(this, asError(e)));
  }

  private get stopped(): boolean {
    return this.closing || this.host.isClosing;
  }

  /**
   * Logs in again after a loss, on the backoff schedule (initiator/backoff.ts).
   * An attempt that ends (refused, rejected, logged in) is waited for; one
   * still hanging after maxDelayMs (a partition swallowing the SYN: it would
   * wait out connectMs) gets company: the next attempt starts beside it, so
   * that once the path heals a login gets through within about maxDelayMs.
   * At most MAX_PENDING_ATTEMPTS are in flight; the first to log in wins and
   * the others log out as they finish.
   */
  private async reconnect(): Promise<void> {
    if (this.reconnecting) return;
    this.reconnecting = true;
    const o = this.host.options;
    const pending = new Set<Promise<void>>();
    let n = 0;
    let hanging = false;
    try {
      while (!this.stopped && !this.isUp) {
        if (!hanging) await this.sleep.for(reconnectDelay(n++, o.reconnectInitialMs, o.reconnectMaxMs), this.host.needsConnection);
        if (this.stopped || this.isUp) return;
        const p: Promise<void> = this.attemptLogin()
          .catch((e: unknown) => this.host.reconnectFailed(this, e instanceof Error ? e : new Error(String(e))))
          .finally(() => pending.delete(p));
        pending.add(p);
        const patience = this.sleep.for(o.reconnectMaxMs, this.host.needsConnection).then(() => true);
        hanging = await Promise.race([p.then(() => false), patience]);
        if (!hanging) this.sleep.cancel();
        while (pending.size >= MAX_PENDING_ATTEMPTS && !this.stopped && !this.isUp) await Promise.race(pending);
      }
    } finally {
      this.reconnecting = false;
    }
  }

  /** One connect-and-login; installs the connection unless another attempt won or the channel closed. */
  private async attemptLogin(): Promise<void> {
    let conn: Connection;
    try {
      conn = await Connection.open(this.host.transport, this.loginOptions());
    } catch (e) {
      if (!this.stopped && !this.isUp) this.host.reconnectFailed(this, e as Error);
      return;
    }
    if (this.stopped || this.isUp) {
      await conn.logout();
      return;
    }
    this.install(conn);
    if (this.isUp) this.host.channelUp(this);
  }

  /** A pool chunk, unless the connection dies first (a closed pool never hands one out). */
  private fromPool(conn: Connection, length: number, lost: LostSignal): Promise<IoBuffer> {
    return lost.race(conn.allocate(length), (b) => b.release());
  }

  /**
   * Sends one command on the current connection and resolves with its
   * response. Rejects with a TransportError when the connection is (or goes)
   * down: the session decides whether to send it again.
   */
  async send(req: ScsiRequest, att: Attempt): Promise<ScsiResponse> {
    const conn = this.current;
    if (conn === null || conn.isClosed) throw new TransportError('the connection is down');
    if (req.rw !== undefined && conn.hasFastPath) {
      const fast = this.sendFast(conn, req, att);
      if (fast !== null) return fast;
    }
    const lost = this.lost;
    this.inflight++;
    let pooled: IoBuffer | null = null;
    try {
      let dataOut: Buffer | IoBuffer | undefined;
      let dataIn: IoBuffer | undefined;
      const out = req.dataOut;
      const into = req.dataIn;
      if (out?.kind === 'bytes') {
        // Small writes travel in the capsule (protocol.md §9.1 format 3): no RDMA READ at all.
        if (out.data.length <= conn.immediateDataSize) dataOut = out.data;
        else {
          pooled = await this.fromPool(conn, out.data.length, lost);
          copyLive(out.data, pooled.buffer, out.data.length, req.what);
          dataOut = pooled;
        }
      } else if (out?.kind === 'registered') {
        dataOut = out.buffer.view(conn, out.offset, out.length);
      }
      if (into?.kind === 'bytes' && into.into.length > 0) {
        pooled = await this.fromPool(conn, into.into.length, lost);
        dataIn = pooled;
      } else if (into?.kind === 'registered') {
        dataIn = into.buffer.view(conn, into.offset, into.length);
      }
      // A pool chunk is registered memory too: the native queue takes it as it takes the caller's (sendFast).
      const io = pooled !== null && req.rw !== undefined && conn.hasFastPath ? queueAddressOf(pooled) : null;
      const fast = io !== null ? this.viaQueue(conn, req, io, pooled!.buffer.length, att, false) : null;
      const r =
        fast !== null
          ? await fast
          : await conn.command({
              lun: req.lun,
              cdb: req.cdb,
              dataOut,
              dataIn,
              onTag: (tag) => {
                att.sent = true;
                this.arm(conn, req.lun, tag, att);
              },
            });
      if (into?.kind === 'bytes' && pooled !== null) copyLive(pooled.buffer, into.into, Math.min(r.dataIn, into.into.length), req.what);
      return { status: r.status, sense: r.sense, dataIn: r.dataIn };
    } catch (e) {
      // The pool went with the connection's domain before the connection
      // reported its loss: close it now, so the command is not reissued on it.
      if (e instanceof MemoryReleased && !conn.isClosed) void conn.close().catch(() => undefined);
      throw e;
    } finally {
      att.settled = true;
      this.deadlines.delete(att);
      pooled?.release();
      this.inflight--;
      this.lastActive = performance.now();
    }
  }

  /**
   * READ or WRITE on registered memory through the connection's native queue
   * (docs/initiator.md "Fast path"): no capsule built here, no promise per
   * layer. Null when the queue cannot take it now; send() then goes the
   * ordinary way, with the same outcome.
   */
  private sendFast(conn: Connection, req: ScsiRequest, att: Attempt): Promise<ScsiResponse> | null {
    const data = req.rw!.write ? req.dataOut : req.dataIn;
    if (data?.kind !== 'registered') return null;
    const at = data.buffer.remoteAt(conn, data.offset);
    if (at === null) return null;
    return this.viaQueue(conn, req, at, data.length, att, true);
  }

  /**
   * Hands a READ or WRITE whose data is `length` bytes at `at` (the target's
   * view of registered memory) to the native queue; null when it cannot take
   * it now. With `own`, the command's in-flight count and end are kept here
   * (sendFast); otherwise send()'s own bookkeeping does it (a pool chunk).
   */
  private viaQueue(conn: Connection, req: ScsiRequest, at: QueueAddressWords, length: number, att: Attempt, own: boolean): Promise<ScsiResponse> | null {
    const rw = req.rw!;
    let waiter!: FastWaiter;
    const p = new Promise<ScsiResponse>((resolve, reject) => {
      const end = (): void => {
        att.settled = true;
        this.deadlines.delete(att);
        if (!own) return;
        this.inflight--;
        this.lastActive = performance.now();
      };
      waiter = {
        done: (status, sense, underflow) => {
          end();
          resolve({ status, sense, dataIn: rw.write ? 0 : length - underflow });
        },
        fail: (e) => {
          end();
          reject(e);
        },
      };
    });
    const tag = conn.fastCommand(
      { lun: req.lun, write: rw.write, fua: rw.fua, lba: rw.lba, blocks: rw.blocks, length, ...at },
      waiter,
    );
    if (tag === null) return null;
    this.fastCommands++;
    if (own) this.inflight++;
    att.sent = true;
    this.arm(conn, req.lun, tag, att);
    return p;
  }

  /**
   * Sends a command of the common read and write (fast-io.ts) through the
   * native queue; false when it cannot go that way now (no queue, no credit,
   * memory not one region, or registering it failed), and then the general
   * path sends it, and meets any error in its own place.
   */
  submitFast(io: FastIo): boolean {
    const conn = this.current;
    if (conn === null || !conn.hasFastPath) return false;
    let r: Readonly<QueueAddressWords> | null;
    try {
      r = io.reg!.remoteBase(conn);
    } catch {
      return false;
    }
    if (r === null) return false;
    const lo = r.addressLo + io.regOffset;
    const hi = (r.addressHi + Math.floor(lo / 0x100000000)) >>> 0;
    if (!conn.fastQueue(io, hi, lo >>> 0, r.keyHi, r.keyLo)) return false;
    this.inflight++;
    io.channel = this;
    io.pathIndex = this.pathIndex;
    io.conn = conn;
    return true;
  }

  /** A command of submitFast went out with its batch: its deadline starts. */
  fastPosted(io: FastIo, tagWord: number): void {
    this.fastCommands++;
    io.tagWord = tagWord;
    io.sent = true;
    this.deadlines.add(io);
  }

  /** A command of submitFast did not go out with its batch: the session sends it the general way. */
  fastUnposted(io: FastIo): void {
    this.inflight--;
  }

  /** A command of submitFast ended (answered or failed): before the session hears of it. */
  fastEnded(io: FastIo): void {
    io.settled = true;
    this.deadlines.delete(io);
    this.inflight--;
    this.lastActive = performance.now();
  }

  private arm(conn: Connection, lun: number, tag: bigint, att: Attempt): void {
    att.conn = conn;
    att.lun = lun;
    att.tag = tag;
    this.deadlines.add(att);
  }

  /** Recovery ends, at worst, in closing the connection to reconnect; if even that fails, it is reported as such. */
  private timedOut(att: Attempt): void {
    const conn = att.conn!;
    this.recover(conn, att.lun!, att.tag!, att).catch((e: unknown) => this.host.reconnectFailed(this, asError(e)));
  }

  /**
   * The recovery ladder for a command with no response in time: ABORT TASK;
   * if that does not end it within abortMs, LOGICAL UNIT RESET; if that does
   * not either, drop the connection (its other commands are reissued on the
   * next one). The command itself then fails TIMEOUT.
   */
  private async recover(conn: Connection, lun: number, tag: bigint, att: Attempt): Promise<void> {
    if (att.settled || conn.isClosed) return;
    att.timedOut = true;
    const o = this.host.options;
    this.host.recovery({ action: 'abort-task', connection: this.index, lun, tag, reason: `no response within ${o.commandTimeoutMs} ms` });
    if (await this.taskManagement(conn, lun, TaskFunction.ABORT_TASK, tag)) await nextTurn();
    if (att.settled || conn.isClosed) return;
    this.host.recovery({ action: 'lun-reset', connection: this.index, lun, reason: `ABORT TASK did not end tag ${tag} within ${o.abortTimeoutMs} ms` });
    if (await this.lunReset(conn, lun)) await nextTurn();
    if (att.settled || conn.isClosed) return;
    this.host.recovery({ action: 'reconnect', connection: this.index, lun, reason: `LOGICAL UNIT RESET did not end tag ${tag} within ${o.abortTimeoutMs} ms` });
    await conn.close();
  }

  /**
   * Before commands lost with the connection of login session `sessionId` are
   * reissued here, on the same path: asks the target to end that connection
   * and fence what of it is still in a backend (TSK_MGMT FENCE CONNECTION,
   * docs/protocol.md §14.1), since it may not have seen the loss yet and a
   * first copy could otherwise land after the reissued one. Once per lost
   * session and connection. Nothing to ask when the lost connection is this
   * one, or this connection predates the function (version < 3). Rejects with
   * a TransportError when the answer does not come within abortTimeoutMs, so
   * that the command is dispatched again and the fence asked again.
   */
  fenceLost(sessionId: bigint): Promise<void> {
    const conn = this.current;
    if (conn === null || conn.isClosed) return Promise.reject(new TransportError('the connection is down'));
    if (conn.version < FENCE_VERSION || conn.sessionId === sessionId) return Promise.resolve();
    let asked = this.fences.get(conn);
    if (asked === undefined) {
      asked = new Map();
      this.fences.set(conn, asked);
    }
    let p = asked.get(sessionId);
    if (p === undefined) {
      const fenced = conn.taskManagement(0, TaskFunction.FENCE_CONNECTION, sessionId).then(
        (r) => {
          // FAILED: the target says that session is another initiator's (an id from before a
          // restart of it): nothing of ours to fence there.
          if (r !== TaskResponse.COMPLETE && r !== TaskResponse.FAILED) throw new TransportError(`FENCE CONNECTION of session ${sessionId} answered 0x${r.toString(16)}`);
        },
      );
      p = within(
        fenced.then(() => true),
        this.host.options.abortTimeoutMs,
        false,
      ).then((ok) => {
        if (!ok) throw new TransportError(`FENCE CONNECTION of session ${sessionId} was not answered within ${this.host.options.abortTimeoutMs} ms`);
      });
      const map = asked;
      p.catch(() => map.delete(sessionId));
      asked.set(sessionId, p);
    }
    return p;
  }

  /**
   * Before commands lost on another gateway are reissued here: asks this
   * gateway to fence that one, the gateway of target port group `group`, out
   * of the store of LUN `lun` (TSK_MGMT FENCE GATEWAY, docs/protocol.md §14.1).
   * The lost gateway may be frozen or cut off with the commands still in
   * hand; after the fence nothing of it lands after what this path writes.
   * Once per LUN, group and lost connection (`sessionId`). Nothing to ask
   * when this connection predates the function (version < 4). Rejects with
   * an RblkError when the target refuses or does not answer within the
   * command timeout: the command is then not reissued, since its first copy
   * could still land late; with a TransportError when this connection fails
   * meanwhile, so that the command is dispatched again and the fence asked again.
   */
  fenceGateway(lun: number, group: number, sessionId: bigint): Promise<void> {
    const conn = this.current;
    if (conn === null || conn.isClosed) return Promise.reject(new TransportError('the connection is down'));
    if (conn.version < GATEWAY_FENCE_VERSION) return Promise.resolve();
    let asked = this.gatewayFences.get(conn);
    if (asked === undefined) {
      asked = new Map();
      this.gatewayFences.set(conn, asked);
    }
    const key = `${lun}/${group}/${sessionId}`;
    let p = asked.get(key);
    if (p === undefined) {
      const ms = this.host.options.commandTimeoutMs;
      this.host.recovery({ action: 'fence-gateway', connection: this.index, lun, reason: `commands lost on the gateway of target port group ${group} are reissued here` });
      const fenced = conn.taskManagement(lun, TaskFunction.FENCE_GATEWAY, BigInt(group)).then((r) => {
        if (r !== TaskResponse.COMPLETE) {
          throw new RblkError('CONNECTION_LOST', `the gateway of target port group ${group} could not be fenced (FENCE GATEWAY answered 0x${r.toString(16)}), so commands lost there are not reissued: they could still land after newer writes`);
        }
      });
      p = (ms > 0 ? within(fenced.then(() => true), ms, false) : fenced.then(() => true)).then((ok) => {
        if (!ok) throw new RblkError('TIMEOUT', `FENCE GATEWAY of target port group ${group} was not answered within ${ms} ms; commands lost there are not reissued`);
      });
      const map = asked;
      p.catch(() => map.delete(key));
      asked.set(key, p);
    }
    return p;
  }

  /** True when the target answered FUNCTION COMPLETE within abortMs. */
  private taskManagement(conn: Connection, lun: number, fn: TaskFunction, tag = 0n): Promise<boolean> {
    const answer = conn.taskManagement(lun, fn, tag).then(
      (r) => r === TaskResponse.COMPLETE,
      () => false,
    );
    return within(answer, this.host.options.abortTimeoutMs, false);
  }

  /** One LOGICAL UNIT RESET per LUN at a time, however many commands timed out on it. */
  private lunReset(conn: Connection, lun: number): Promise<boolean> {
    let p = this.resets.get(lun);
    if (p === undefined) {
      p = this.taskManagement(conn, lun, TaskFunction.LUN_RESET).finally(() => this.resets.delete(lun));
      this.resets.set(lun, p);
    }
    return p;
  }

  private startKeepAlive(): void {
    const ms = this.host.options.keepAliveMs;
    if (ms <= 0 || this.keepAlive !== null) return;
    this.keepAlive = setInterval(() => {
      this.probe(ms).catch((e: unknown) => this.host.reconnectFailed(this, asError(e)));
    }, ms);
    this.keepAlive.unref();
  }

  /** TEST UNIT READY on an idle connection; no answer within ms drops it. */
  private async probe(ms: number): Promise<void> {
    const conn = this.current;
    if (conn === null || conn.isClosed || this.probing || this.inflight > 0 || performance.now() - this.lastActive < ms) return;
    this.probing = true;
    try {
      const lun = this.host.probeLun();
      const answer = conn.command({ lun, cdb: testUnitReady() }).then(
        (r) => r,
        () => null,
      );
      const r = await within(answer, ms, 'late' as const);
      if (r === 'late') {
        if (conn !== this.current) return;
        this.host.recovery({ action: 'keep-alive', connection: this.index, lun, reason: `TEST UNIT READY unanswered for ${ms} ms` });
        await conn.close();
      } else if (r !== null) {
        this.host.probeAnswered(lun, r.status, r.sense);
      }
    } finally {
      this.probing = false;
      this.lastActive = performance.now();
    }
  }

  /** Logs out (after the connection's own short wait) and stops reconnecting. */
  async close(): Promise<void> {
    this.closing = true;
    this.sleep.cancel();
    this.deadlines.clear();
    if (this.keepAlive !== null) clearInterval(this.keepAlive);
    this.keepAlive = null;
    const conn = this.current;
    if (conn !== null) await conn.logout();
  }
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
