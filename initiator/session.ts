// A session with one target: one or more connections (channels) to it,
// commands spread over them, reissued after a lost connection while the
// session reconnects, and failed only when it stays unreachable for the loss
// timeout. docs/initiator.md describes the behaviour; this file implements it.
// Over 600 lines for that reason: reissue after a loss touches every command in
// flight on every channel, so the dispatch, the reconnect loop and the reissue
// share one set of maps and are kept in one class rather than split across
// files that would each need them.
import { EventEmitter } from 'node:events';
import type { EndpointWakeups } from '../native/binding.js';
import { decodeSense, type Sense } from '../protocol/scsi/sense.js';
import { ASYMMETRIC_ACCESS_STATE_CHANGED, ALUA_STANDBY, ALUA_TRANSITIONING, ALUA_UNAVAILABLE, SenseKey } from '../protocol/scsi/sense-codes.js';
import { ScsiStatus } from '../protocol/scsi/status.js';
import { Channel, type Attempt, type ChannelHost, type RecoveryEvent } from './channel.js';
import { LoginError, TransportError } from './connection.js';
import { listLuns, lunVolumeName, probeLun, type VolumeInfo } from './discovery.js';
import { errorForStatus, RblkError } from './errors.js';
import { FastIo, promiseFor, type FastIoOwner, type FastIoSession } from './fast-io.js';
import type { ResolvedOptions } from './options.js';
import { aluaOf, identify, identityMismatch, Path, type PathIdentity, type PathInfo } from './paths.js';
import { RegisteredBuffer } from './registered-buffer.js';
import { registeredOf, type ScsiRequest, type ScsiResponse } from './scsi-request.js';
import { FabricInitiatorTransport } from './transport/fabric-transport.js';
import type { InitiatorTransport } from './transport/transport.js';
import { Volume } from './volume.js';
import type { AttentionListener, VolumeHost } from './volume-host.js';

export type { AttentionListener } from './volume-host.js';
import { delay } from './wait.js';

/**
 * - `connecting`: logging in for the first time.
 * - `connected`: at least one connection is up.
 * - `reconnecting`: every connection is down; commands wait (up to the loss timeout).
 * - `lost`: down for longer than the loss timeout; commands fail CONNECTION_LOST
 *   at once while reconnecting goes on in the background.
 * - `closed`: after close().
 */
export type SessionState = 'connecting' | 'connected' | 'reconnecting' | 'lost' | 'closed';

export interface SessionEvents {
  /** The session's state changed. */
  state: [state: SessionState, previous: SessionState];
  /** A reconnect attempt failed, or a connection ended for good. Emitted only while someone listens. */
  error: [error: Error];
  /** A recovery step: ABORT TASK, LOGICAL UNIT RESET, dropping a connection, a failed keep-alive probe. */
  recovery: [event: RecoveryEvent];
  /** A unit attention was reported (and absorbed) on a LUN (SAM-5 5.14). */
  unitAttention: [lun: number, sense: Sense];
  /** A path (one gateway of a multipath session) changed: up, down, checked, rejected, its ALUA state, or whether it carries the I/O. */
  path: [info: PathInfo];
}

/** One connection of the session, as `session.connections` describes it. */
export interface ConnectionInfo {
  index: number;
  up: boolean;
  /** The target's session id for the current connection. */
  sessionId?: bigint;
  provider?: string;
  /** Which of `session.paths` it belongs to. */
  path: number;
}


/** Where one command may go, and where its last try went (multipath). */
interface Route {
  /** Only this path (the session's own identity and ALUA checks). */
  readonly pin?: Path;
  /** Paths that refused it (standby, unavailable, busy): others first. */
  avoid?: Set<Path>;
  /** The path of the last try. */
  path?: Path;
}

interface Exchange {
  readonly req: ScsiRequest;
  readonly route: Route;
  /** Connections the command was lost with, sent and unanswered: fenced before it is sent again on their path (Channel.fenceLost). */
  lost?: { readonly sessionId: bigint; readonly path: number }[];
  resolve(r: ScsiResponse): void;
  reject(e: Error): void;
}

/** Unit attentions in a row that one command absorbs: more than the target queues per nexus (8). */
const MAX_ATTENTIONS = 16;
/** Pooled records of fastIo kept for reuse: more than any queue depth keeps in flight. */
const MAX_POOLED = 1024;
/** TASK ABORTED answers (from our own LUN resets) one idempotent command absorbs. */
const MAX_ABORTED = 3;
const BUSY_DELAY_MS = 10;
/** Moves of one command between paths (standby, unavailable, busy answers) before its answer is the error. */
const MOVES_PER_PATH = 4;

function isSense(s: Sense | undefined, c: { key: number; asc: number; ascq: number }): boolean {
  return s !== undefined && s.key === c.key && s.asc === c.asc && s.ascq === c.ascq;
}

function loginFailure(e: unknown, o: ResolvedOptions): RblkError {
  const where = `${o.targetName} at ${o.address}:${o.port}`;
  if (e instanceof LoginError) {
    return new RblkError(e.code === 'AUTH_FAILED' ? 'AUTH_FAILED' : 'LOGIN_FAILED', `cannot log in to ${where}: ${e.message}`, { cause: e });
  }
  return new RblkError('LOGIN_FAILED', `cannot log in to ${where}: ${(e as Error).message}`, { cause: e });
}

/**
 * A logged-in session with an rblk target. Get one from {@link connect}.
 * Commands are spread over its connections; see docs/initiator.md for the
 * timeout and recovery rules.
 */
export class Session extends EventEmitter<SessionEvents> implements ChannelHost, VolumeHost, FastIoSession {
  /** The options in effect, defaults applied (the secret shows as `[secret]`). */
  readonly options: ResolvedOptions;
  /** @internal */
  readonly transport: InitiatorTransport;
  #state: SessionState = 'connecting';
  private readonly channels: Channel[];
  private readonly dead = new Set<Channel>();
  /** Channels lost and not yet back: their return counts as a reconnect. */
  private readonly wentDown = new Set<Channel>();
  #reconnects = 0;
  private waiting: Exchange[] = [];
  /** Records of the common read and write (fast-io.ts), reused. */
  private readonly ioPool: FastIo[] = [];
  private lossTimer: NodeJS.Timeout | null = null;
  private active = 0;
  private readonly idle: (() => void)[] = [];
  private closing: Promise<void> | null = null;
  private next = 0;
  /** Zero-copy memory handed out by allocate() and not yet released: the session's, across its connections. */
  private readonly buffers = new Set<RegisteredBuffer>();
  private knownMaxTransfer: number;
  private readonly watchers = new Map<number, Set<AttentionListener>>();
  /** One per gateway (options.paths); a single-path session has one, verified from the start. */
  private readonly pathList: Path[];
  private readonly multipath: boolean;
  /** What the first path verified showed: every other path must be the same device. */
  private reference: PathIdentity | null = null;
  private pathTimer: NodeJS.Timeout | null = null;
  private readonly pathSeen = new Map<Path, string>();

  private constructor(options: ResolvedOptions) {
    super();
    this.options = options;
    this.transport = options.transport ?? new FabricInitiatorTransport();
    this.pathList = options.paths.map((p, i) => new Path(i, p));
    this.multipath = this.pathList.length > 1;
    this.channels = [];
    for (const path of this.pathList) {
      path.verified = !this.multipath;
      for (let c = 0; c < options.connections; c++) {
        const ch = new Channel(this.channels.length, this, path.where, path.index);
        path.channels.push(ch);
        this.channels.push(ch);
      }
    }
    this.knownMaxTransfer = options.maxIo;
  }

  /** @internal Logs in every connection; use {@link connect}. */
  static async open(options: ResolvedOptions): Promise<Session> {
    const s = new Session(options);
    const opened = await Promise.allSettled(s.channels.map((ch) => ch.open()));
    const failed = opened.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed && (!s.multipath || !s.channels.some((ch) => ch.isUp))) {
      await s.close();
      throw loginFailure(failed.reason, options);
    }
    if (s.multipath) {
      // A gateway down at the start is one path missing, not a failed login: it is tried again in the background.
      opened.forEach((r, i) => {
        if (r.status === 'fulfilled') return;
        const ch = s.channels[i];
        s.pathList[ch.pathIndex].lastReason = (r.reason as Error).message;
        ch.retryInBackground();
      });
      // In order, so that the first path that answers is the reference identity.
      for (const p of s.pathList) await s.checkPath(p);
      if (!s.pathList.some((p) => p.usable)) {
        const why = s.pathList.map((p) => `${p.where.address}:${p.where.port}: ${p.rejected ?? p.lastReason ?? 'not verified'}`).join('; ');
        await s.close();
        throw new RblkError('LOGIN_FAILED', `no path to ${options.targetName} could be used (${why})`);
      }
      s.pathTimer = setInterval(() => s.checkPaths(), options.pathCheckMs);
      s.pathTimer.unref();
    }
    s.noteLimits();
    s.setState('connected');
    s.pathsChanged();
    return s;
  }

  /** Each path (gateway) of the session, in the order named: its state, ALUA state and group (docs/initiator.md "Multipath"). */
  get paths(): PathInfo[] {
    const preferred = this.preferredPath();
    return this.pathList.map((p) => p.info(p === preferred));
  }

  /** The path I/O goes to now: usable, best ALUA state, first named among equals. */
  private preferredPath(avoid?: ReadonlySet<Path>): Path | undefined {
    let best: Path | undefined;
    let fallback: Path | undefined;
    for (const p of this.pathList) {
      if (!p.usable) continue;
      if (avoid?.has(p)) {
        if (fallback === undefined || p.rank < fallback.rank) fallback = p;
      } else if (best === undefined || p.rank < best.rank) {
        best = p;
      }
    }
    return best ?? fallback;
  }

  /** Emits `path` for every path whose description changed. */
  private pathsChanged(): void {
    if (!this.multipath) return;
    for (const info of this.paths) {
      const p = this.pathList[info.index];
      const text = JSON.stringify(info);
      if (this.pathSeen.get(p) === text) continue;
      this.pathSeen.set(p, text);
      this.emit('path', info);
    }
  }

  /** The background re-check: every path that is up is asked again for its identity (when it came back) and its ALUA state. */
  private checkPaths(): void {
    for (const p of this.pathList) void this.checkPath(p);
  }

  /**
   * Verifies that a path reaches the session's device (VPD 83h), then reads
   * its ALUA state. Never rejects: a failure leaves the path as it was, for
   * the next check. One check per path at a time.
   */
  private checkPath(p: Path): Promise<void> {
    if (p.checking) return p.checking;
    if (!this.multipath || this.closing || p.rejected !== undefined || !p.up) return Promise.resolve();
    const run = (req: ScsiRequest): Promise<ScsiResponse> => this.commandOn(p, req);
    p.checking = (async () => {
      try {
        if (!p.verified) {
          const id = await identify(run);
          if (this.reference === null) {
            this.reference = id;
          } else {
            const why = identityMismatch(this.reference, id);
            if (why !== undefined) {
              this.rejectPath(p, why);
              return;
            }
          }
          p.identity = id;
          p.verified = true;
        }
        const id = p.identity;
        const lun = id?.luns.keys().next();
        if (id && lun && lun.done !== true) {
          const a = await aluaOf(run, lun.value, id.groups.get(lun.value));
          p.alua = a.alua;
          p.group = a.group;
        }
      } catch (e) {
        // A path that went down meanwhile keeps the reason its connection gave.
        if (p.up) p.lastReason = e instanceof Error ? e.message : String(e);
      } finally {
        p.checking = null;
        this.pathsChanged();
        // Commands that waited for a usable path (only unverified ones were up) go now.
        if (this.preferredPath() !== undefined) for (const x of this.waiting.splice(0)) this.dispatch(x);
      }
    })();
    return p.checking;
  }

  private rejectPath(p: Path, why: string): void {
    p.rejected = why;
    this.report(new RblkError('INVALID', `path ${p.where.address}:${p.where.port} is not used: ${why}`));
    for (const ch of p.channels) ch.close().catch(() => undefined);
  }

  /** Where the session is: see {@link SessionState}. */
  get state(): SessionState {
    return this.#state;
  }

  /** Largest transfer of one command: the target's grant and `maxIo`, whichever is smaller. */
  get maxTransfer(): number {
    return this.knownMaxTransfer;
  }

  /** Each connection of the session: up or not, and the target's session id for it. */
  get connections(): ConnectionInfo[] {
    return this.channels.map((ch) => {
      const c = ch.connection;
      return c && ch.isUp
        ? { index: ch.index, up: true, sessionId: c.sessionId, provider: c.provider, path: ch.pathIndex }
        : { index: ch.index, up: false, path: ch.pathIndex };
    });
  }

  /** @internal Commands the native queue carried (ConnectOptions.fastPath), over the session's life. */
  get fastPathCommands(): number {
    let n = 0;
    for (const ch of this.channels) n += ch.fastCommands;
    return n;
  }

  /** @internal WRITEs the native queue sent as immediate data, over the current connections. */
  get fastPathImmediateWrites(): number {
    let n = 0;
    for (const ch of this.channels) n += ch.connection?.immediateWrites ?? 0;
    return n;
  }

  /** @internal Messages of several CMDs (trains, docs/protocol.md §5.1) the native queue sent, over the current connections. */
  get fastPathTrains(): number {
    let n = 0;
    for (const ch of this.channels) n += ch.connection?.trains ?? 0;
    return n;
  }

  /** @internal Submits of several messages the native queue sent corked (docs/transport.md "Corked bursts"), over the current connections. */
  get fastPathCorkedSubmits(): number {
    let n = 0;
    for (const ch of this.channels) n += ch.connection?.corkedSubmits ?? 0;
    return n;
  }

  /** @internal Each connection's endpoint wake-ups and spins (ConnectOptions.busyPollMicros), where its transport has an endpoint. */
  get endpointWakeups(): EndpointWakeups[] {
    const out: EndpointWakeups[] = [];
    for (const ch of this.channels) {
      const w = ch.connection?.conn.wakeups;
      if (w !== undefined) out.push(w);
    }
    return out;
  }

  private setState(next: SessionState): void {
    const previous = this.#state;
    if (previous === next) return;
    this.#state = next;
    this.emit('state', next, previous);
  }

  private report(e: Error): void {
    if (this.listenerCount('error') > 0) this.emit('error', e);
  }

  private noteLimits(): void {
    let m = this.options.maxIo;
    let any = false;
    for (const ch of this.channels) {
      const c = ch.connection;
      if (c && ch.isUp) {
        m = Math.min(m, c.maxTransfer);
        any = true;
      }
    }
    if (any) this.knownMaxTransfer = m;
  }

  // ChannelHost

  /** @internal */
  get isClosing(): boolean {
    return this.closing !== null;
  }

  /** @internal */
  get needsConnection(): boolean {
    return this.waiting.length > 0 || this.#state === 'reconnecting';
  }

  /** Connections re-established after a loss since connect(): 0 when nothing was lost. */
  get reconnects(): number {
    return this.#reconnects;
  }

  /** @internal */
  channelUp(ch: Channel): void {
    this.dead.delete(ch);
    if (this.wentDown.delete(ch)) this.#reconnects++;
    if (this.closing) return;
    this.noteLimits();
    if (this.lossTimer) clearTimeout(this.lossTimer);
    this.lossTimer = null;
    this.setState('connected');
    const path = this.pathList[ch.pathIndex];
    // A gateway back after a loss is checked before it carries I/O again (it could be another device now).
    if (this.multipath) void this.checkPath(path);
    this.pathsChanged();
    for (const x of this.waiting.splice(0)) this.dispatch(x);
  }

  /** @internal */
  channelDown(ch: Channel, reason: string, reconnecting: boolean): void {
    if (this.closing) return;
    this.wentDown.add(ch);
    const path = this.pathList[ch.pathIndex];
    path.lastReason = reason;
    if (this.multipath && !path.up) path.verified = false;
    this.pathsChanged();
    if (!reconnecting) {
      this.dead.add(ch);
      this.report(new RblkError('CONNECTION_LOST', `connection ${ch.index} to ${this.where()} ended for good: ${reason}`));
    }
    if (this.channels.some((c) => c.isUp)) return;
    if (this.dead.size === this.channels.length) {
      this.becomeLost(`every connection ended: ${reason}`);
      return;
    }
    if (this.#state === 'lost') return;
    this.setState('reconnecting');
    if (this.lossTimer === null) {
      this.lossTimer = setTimeout(() => this.becomeLost(`no connection for ${this.options.lossTimeoutMs} ms (last: ${reason})`), this.options.lossTimeoutMs);
    }
  }

  /** @internal */
  reconnectFailed(ch: Channel, error: Error): void {
    this.report(new RblkError('CONNECTION_LOST', `reconnecting connection ${ch.index} to ${this.where()} failed: ${error.message}`, { cause: error }));
  }

  /** @internal */
  recovery(event: RecoveryEvent): void {
    this.emit('recovery', event);
  }

  /** @internal */
  probeLun(): number {
    const first = this.watchers.keys().next();
    return first.done ? 0 : first.value;
  }

  /** @internal */
  probeAnswered(lun: number, status: number, sense: Buffer): void {
    const s = status === ScsiStatus.CHECK_CONDITION ? decodeSense(sense) : undefined;
    if (s?.key === SenseKey.UNIT_ATTENTION) this.attention(lun, s);
  }

  private where(): string {
    return this.options.paths.map((p) => `${p.address}:${p.port}`).join(',');
  }

  private becomeLost(why: string): void {
    if (this.lossTimer) clearTimeout(this.lossTimer);
    this.lossTimer = null;
    if (this.closing) return;
    this.setState('lost');
    for (const x of this.waiting.splice(0)) x.reject(new RblkError('CONNECTION_LOST', `${x.req.what}: the session to ${this.where()} is lost (${why})`));
  }

  // Commands

  /** The least loaded connection of the route's path (the preferred path unless pinned), round robin among equals. */
  private pick(route?: Route): Channel | undefined {
    const path = route?.pin ?? this.preferredPath(route?.avoid);
    if (path === undefined) return undefined;
    let best: Channel | undefined;
    const chans = path.channels;
    const n = chans.length;
    for (let i = 0; i < n; i++) {
      const ch = chans[(this.next + i) % n];
      if (ch.isUp && (best === undefined || ch.load < best.load)) best = ch;
    }
    this.next = (this.next + 1) % n;
    return best;
  }

  /** Sends a request once (reissuing it after a lost connection when allowed); any SCSI status resolves. */
  private execute(req: ScsiRequest, route: Route = {}, lost?: Exchange['lost']): Promise<ScsiResponse> {
    return new Promise<ScsiResponse>((resolve, reject) => {
      this.active++;
      const done = (): void => this.ended();
      this.dispatch({
        req,
        route,
        lost,
        resolve: (r) => {
          done();
          resolve(r);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
    });
  }

  /** A command ended: close() waits for the last. */
  private ended(): void {
    if (--this.active === 0) for (const w of this.idle.splice(0)) w();
  }

  /**
   * @internal The common read and write (fast-io.ts): one READ or WRITE of
   * registered memory through the native queue, with one promise and a pooled
   * record. Null when it cannot go that way now (several paths, the session
   * not connected, no queue or credit): the caller takes the general path.
   */
  fastIo(owner: FastIoOwner, write: boolean, fua: boolean, offset: number, length: number, reg: RegisteredBuffer, regOffset: number, result: Buffer | undefined): Promise<Buffer | undefined> | null {
    if (this.closing !== null || this.multipath || this.#state !== 'connected' || this.waiting.length > 0) return null;
    const ch = this.pick();
    if (ch === undefined) return null;
    const io = this.ioPool.pop() ?? new FastIo(this);
    io.owner = owner;
    io.lun = owner.lun;
    io.write = write;
    io.fua = fua;
    io.offset = offset;
    io.length = length;
    io.lba = offset / owner.blockSize;
    io.blocks = length / owner.blockSize;
    io.reg = reg;
    io.regOffset = regOffset;
    io.result = result;
    // The promise first: nothing may complete the command before it has somewhere to go.
    const p = promiseFor(io);
    if (!ch.submitFast(io)) {
      io.reset();
      this.ioPool.push(io);
      return null;
    }
    this.active++;
    return p;
  }

  /** @internal A command of fastIo answered. */
  fastAnswered(io: FastIo, status: number, sense: Buffer, underflow: number): void {
    if (status === ScsiStatus.GOOD && !io.timedOut) {
      if (!io.write && underflow !== 0) {
        io.reject(new RblkError('IO_ERROR', `${io.owner!.what('read', io.offset, io.length)}: the target returned ${io.length - underflow} of ${io.length} bytes`));
      } else io.resolve(io.result);
      this.fastRecycle(io);
      this.ended();
      return;
    }
    if (io.timedOut && status === ScsiStatus.TASK_ABORTED) {
      io.reject(this.timeout(io.owner!.what(io.write ? 'write' : 'read', io.offset, io.length), 'aborted'));
      this.ended();
      return;
    }
    // Not plainly GOOD: Session.command goes on from this answer, as if the general path had sent it.
    this.fastResume(io, Promise.resolve({ status, sense, dataIn: io.write ? 0 : io.length - underflow }));
  }

  /** @internal A command of fastIo was not posted with its batch: the general path sends it, never sent before. */
  fastUnposted(io: FastIo): void {
    const req = io.owner!.requestFor(io);
    this.fastResume(io, this.execute(req, {}), req);
  }

  /** @internal A command of fastIo failed: as attempt() does for the general path. */
  fastFailed(io: FastIo, e: Error): void {
    const what = (): string => io.owner!.what(io.write ? 'write' : 'read', io.offset, io.length);
    if (!(e instanceof TransportError)) io.reject(e);
    else if (io.timedOut) io.reject(this.timeout(what(), 'its connection was dropped to recover'));
    else {
      // Sent and lost with its connection: reissued (READ and WRITE are idempotent), fenced first where it goes next.
      const req = io.owner!.requestFor(io);
      this.fastResume(io, this.execute(req, {}, [{ sessionId: io.conn!.sessionId, path: io.pathIndex }]), req);
      return;
    }
    this.ended();
  }

  /** The general path takes over a command of fastIo, whose first answer (or reissue) is `first`. */
  private fastResume(io: FastIo, first: Promise<ScsiResponse>, req: ScsiRequest = io.owner!.requestFor(io)): void {
    const { resolve, reject, result, write, length } = io;
    const what = req.what;
    this.command(req, first).then((r) => {
      if (!write && r.dataIn !== length) reject(new RblkError('IO_ERROR', `${what}: the target returned ${r.dataIn} of ${length} bytes`));
      else resolve(result);
    }, reject);
    // command() counts itself from here (execute), so close() still waits for it.
    this.ended();
    if (!io.timedOut) this.fastRecycle(io);
  }

  /** Back to the pool, unless the recovery ladder may still hold it (a timed-out command). */
  private fastRecycle(io: FastIo): void {
    if (io.timedOut) return;
    io.reset();
    if (this.ioPool.length < MAX_POOLED) this.ioPool.push(io);
  }

  private dispatch(x: Exchange): void {
    if (this.closing) {
      x.reject(new RblkError('CONNECTION_LOST', `${x.req.what}: the session is closed`));
      return;
    }
    // A registered buffer released while its command waited or was being reissued: nothing to carry.
    if (registeredOf(x.req)?.valid === false) {
      x.reject(new RblkError('BUFFER_RELEASED', `${x.req.what}: the registered buffer was released; allocate a new one`));
      return;
    }
    const ch = this.pick(x.route);
    if (ch !== undefined) {
      this.attempt(ch, x).catch((e: unknown) => x.reject(e instanceof Error ? e : new Error(String(e))));
      return;
    }
    if (x.route.pin !== undefined) {
      x.reject(new RblkError('CONNECTION_LOST', `${x.req.what}: path ${x.route.pin.where.address}:${x.route.pin.where.port} is down`));
      return;
    }
    if (this.#state === 'lost') {
      x.reject(new RblkError('CONNECTION_LOST', `${x.req.what}: the session to ${this.where()} is lost`));
      return;
    }
    this.waiting.push(x);
  }

  private async attempt(ch: Channel, x: Exchange): Promise<void> {
    const att: Attempt = { sent: false, timedOut: false, settled: false };
    const what = x.req.what;
    x.route.path = this.pathList[ch.pathIndex];
    try {
      for (const l of x.lost ?? []) {
        if (l.path === ch.pathIndex) await ch.fenceLost(l.sessionId);
        else {
          // Another gateway (docs/initiator.md "Multipath"): fenced through this one, when it says which group it is.
          const group = this.pathList[l.path].group;
          if (group !== undefined) await ch.fenceGateway(x.req.lun, group, l.sessionId);
        }
      }
      const r = await ch.send(x.req, att);
      if (att.timedOut && r.status === ScsiStatus.TASK_ABORTED) x.reject(this.timeout(what, 'aborted'));
      else x.resolve(r);
    } catch (e) {
      if (!(e instanceof TransportError)) x.reject(e as Error);
      else if (att.timedOut) x.reject(this.timeout(what, 'its connection was dropped to recover'));
      else if (att.sent && !x.req.idempotent)
        x.reject(new RblkError('CONNECTION_LOST', `${what}: the connection was lost with the command outstanding; it is not reissued because it is not idempotent`, { cause: e }));
      else {
        if (att.sent && att.conn !== undefined) (x.lost ??= []).push({ sessionId: att.conn.sessionId, path: ch.pathIndex });
        this.dispatch(x);
      }
    }
  }

  private timeout(what: string, how: string): RblkError {
    return new RblkError('TIMEOUT', `${what}: no response within ${this.options.commandTimeoutMs} ms; ${how}`);
  }

  /**
   * Runs one SCSI command to completion: unit attentions are absorbed and the
   * command sent again, BUSY and TASK SET FULL are retried with a growing delay
   * (busyRetries times), and any other status other than GOOD rejects with an
   * {@link RblkError}. Resolves with the response (data-in placed as asked).
   * The building block of Volume; also a pass-through for other commands.
   */
  async command(req: ScsiRequest, first?: Promise<ScsiResponse>): Promise<ScsiResponse> {
    let attentions = 0;
    let busy = 0;
    let aborted = 0;
    let moves = 0;
    const route: Route = {};
    for (;;) {
      // `first`: the answer of a try the common read and write made (fastIo), taken up from there.
      const r = await (first ?? this.execute(req, route));
      first = undefined;
      if (r.status === ScsiStatus.GOOD || r.status === ScsiStatus.CONDITION_MET) return r;
      const sense = r.status === ScsiStatus.CHECK_CONDITION ? decodeSense(r.sense) : undefined;
      const path = route.path;
      // SAM-5 5.14: a unit attention means the command was not run; report it and run it again.
      if (sense?.key === SenseKey.UNIT_ATTENTION && attentions++ < MAX_ATTENTIONS) {
        this.attention(req.lun, sense);
        // SPC-4 5.15.2.5: that gateway's ALUA state changed; read it before choosing where the command goes.
        if (this.multipath && path && isSense(sense, ASYMMETRIC_ACCESS_STATE_CHANGED)) await this.checkPath(path);
        continue;
      }
      // A gateway that refuses the command for its ALUA state (SPC-4 5.15.2.4), or is draining
      // (BUSY): the command goes to another path, and this one is asked its state again.
      if (this.multipath && path && moves < MOVES_PER_PATH * this.pathList.length) {
        const alua = isSense(sense, ALUA_STANDBY) ? 'standby' : isSense(sense, ALUA_UNAVAILABLE) || isSense(sense, ALUA_TRANSITIONING) ? 'unavailable' : undefined;
        const busyHere = r.status === ScsiStatus.BUSY || r.status === ScsiStatus.TASK_SET_FULL;
        if (alua !== undefined || busyHere) {
          moves++;
          if (alua !== undefined && path.alua !== alua) {
            path.alua = alua;
            this.pathsChanged();
            void this.checkPath(path);
          }
          const avoid = (route.avoid ??= new Set());
          avoid.add(path);
          const elsewhere = this.preferredPath(avoid);
          if (elsewhere !== undefined && !avoid.has(elsewhere)) continue;
          if (alua !== undefined) {
            // Nowhere else to go: wait a little for a path's state to change, then try the best again.
            await delay(BUSY_DELAY_MS * 2 ** Math.min(moves, 6));
            route.avoid = undefined;
            continue;
          }
        }
      }
      const transient = r.status === ScsiStatus.BUSY || r.status === ScsiStatus.TASK_SET_FULL || sense?.key === SenseKey.ABORTED_COMMAND;
      if (transient && busy < this.options.busyRetries) {
        await delay(BUSY_DELAY_MS * 2 ** busy++);
        continue;
      }
      // TASK ABORTED that we did not ask for: a LOGICAL UNIT RESET we sent for another command.
      if (r.status === ScsiStatus.TASK_ABORTED && req.idempotent && aborted++ < MAX_ABORTED) continue;
      throw errorForStatus(req.what, r.status, r.sense);
    }
  }

  private attention(lun: number, sense: Sense): void {
    this.emit('unitAttention', lun, sense);
    for (const l of this.watchers.get(lun) ?? []) l.onUnitAttention(sense);
  }

  /**
   * One command on one path, for the path checks: unit attentions absorbed,
   * any other status but GOOD rejects; no moving to another path.
   */
  private async commandOn(p: Path, req: ScsiRequest): Promise<ScsiResponse> {
    let attentions = 0;
    for (;;) {
      const r = await this.execute(req, { pin: p });
      if (r.status === ScsiStatus.GOOD) return r;
      const sense = r.status === ScsiStatus.CHECK_CONDITION ? decodeSense(r.sense) : undefined;
      if (sense?.key === SenseKey.UNIT_ATTENTION && attentions++ < MAX_ATTENTIONS) {
        this.attention(req.lun, sense);
        continue;
      }
      throw errorForStatus(req.what, r.status, r.sense);
    }
  }

  /** @internal Volumes hear the unit attentions of their LUN. */
  watch(lun: number, l: AttentionListener): () => void {
    let set = this.watchers.get(lun);
    if (set === undefined) this.watchers.set(lun, (set = new Set()));
    set.add(l);
    return () => {
      set.delete(l);
      if (set.size === 0) this.watchers.delete(lun);
    };
  }

  // Volumes

  /**
   * Lists the volumes this initiator may see: REPORT LUNS, then INQUIRY, VPD
   * pages 80h, 83h, B0h, B2h, READ CAPACITY(16) and MODE SENSE for each.
   */
  async volumes(): Promise<VolumeInfo[]> {
    const run = (r: ScsiRequest): Promise<ScsiResponse> => this.command(r);
    const out: VolumeInfo[] = [];
    for (const lun of await listLuns(run)) {
      const p = await probeLun(run, lun);
      if (p) out.push(p.info);
    }
    return out;
  }

  /**
   * Opens a volume by name or LUN; with no argument, the volume named in the
   * URL. Rejects with RblkError 'INVALID' when there is no such volume.
   */
  async open(nameOrLun?: string | number): Promise<Volume> {
    const target = nameOrLun ?? this.options.volume;
    if (target === undefined) throw new RangeError('open() needs a volume name or LUN (the URL named none)');
    const run = (r: ScsiRequest): Promise<ScsiResponse> => this.command(r);
    let lun: number;
    if (typeof target === 'number') {
      if (!Number.isInteger(target) || target < 0 || target > 0x3fff) throw new RangeError(`LUN ${target} is outside 0..16383`);
      lun = target;
    } else {
      // By name from INQUIRY and VPD 83h alone (discovery.ts): another LU's
      // reservation or state cannot stop this one from opening.
      const names: string[] = [];
      let found: number | undefined;
      for (const l of await listLuns(run)) {
        const name = await lunVolumeName(run, l);
        if (name === undefined) continue;
        names.push(name);
        if (name === target) {
          found = l;
          break;
        }
      }
      if (found === undefined) {
        throw new RblkError('INVALID', `no volume named "${target}" at ${this.where()} (visible: ${names.join(', ') || 'none'})`);
      }
      lun = found;
    }
    const probe = await probeLun(run, lun);
    if (probe === undefined) throw new RblkError('INVALID', `LUN ${lun} at ${this.where()} holds no volume`);
    return new Volume(this, probe);
  }

  /**
   * Registered memory for zero-copy I/O, on one of the session's connections
   * (round robin). See {@link RegisteredBuffer} for its lifetime.
   */
  allocate(size: number): RegisteredBuffer {
    if (!Number.isSafeInteger(size) || size <= 0) throw new RangeError(`allocate(${size}): the size must be a positive integer`);
    if (this.closing) throw new RblkError('CONNECTION_LOST', 'allocate: the session is closed');
    const b = new RegisteredBuffer(this.transport.memory(size), size, (gone) => this.buffers.delete(gone));
    this.buffers.add(b);
    // Registered on a connection that is up now, so a failure to register (memory
    // limits, RLIMIT_MEMLOCK) shows here rather than on the first I/O.
    const ch = this.pick();
    const conn = ch?.connection;
    if (conn != null && !conn.isClosed) {
      try {
        b.remoteAt(conn, 0);
      } catch (e) {
        b.release();
        throw e;
      }
    }
    return b;
  }

  /**
   * Waits for the commands in flight, fails those waiting for a connection,
   * logs every connection out and stops reconnecting. Idempotent.
   */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closing = (async () => {
      if (this.pathTimer) clearInterval(this.pathTimer);
      this.pathTimer = null;
      if (this.lossTimer) clearTimeout(this.lossTimer);
      this.lossTimer = null;
      for (const x of this.waiting.splice(0)) x.reject(new RblkError('CONNECTION_LOST', `${x.req.what}: the session was closed`));
      if (this.active > 0) await new Promise<void>((r) => this.idle.push(r));
      await Promise.all(this.channels.map((ch) => ch.close()));
      for (const b of [...this.buffers]) b.release();
      this.setState('closed');
    })();
    return this.closing;
  }

  /** The same as {@link close}: logs out after the commands in flight. */
  logout(): Promise<void> {
    return this.close();
  }

  /** `await using session = await connect(url)`: close() when the scope ends. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
