// The life every served connection shares, whichever protocol it speaks
// (docs/architecture.md "A front end's connection"): its end (once, whoever
// asks first), its LUN map and the request scopes over it, its commands
// between arrival and answer per LUN (what settled(lun) and drain wait for),
// the drain skeleton, fence, the login and keep-alive timers, what `rblkd ctl
// sessions` shows of it, and its log. A front end's connection (rblk's
// RblkConnection, iSCSI's IscsiConnection) extends FrontEndConnection and adds
// only what its protocol says: how commands arrive and are answered, login,
// task management, how an initiator is told to log out, and what keep-alive
// sends. NVMe/TCP's NvmeTcpConnection (one queue per connection) extends it
// too; its namespaces and keep-alive are its controller's, not the connection's.
import { SessionIo, type LogicalUnit, type Nexus, type RequestScope } from '../scsi/index.js';
import { requestScopes, withMeta, type ConnectionEnvironment, type LogoutKind, type MappedLun, type NativeInfo, type ServedConnection, type SessionInfo, type TargetLogger } from './environment.js';

/** A command between its arrival and its answer, as the base tracks it. */
export interface OutstandingCommand {
  readonly lun: number;
  /** What aborts it at its next abort point; null for one answered (BUSY) without running. */
  readonly request: { abort(): void } | null;
  /** Settles when the command has answered (or given up). */
  done: Promise<void>;
}

/** The protocol's part of `rblkd ctl sessions`' line for a connection (FrontEndConnection.info adds the rest). */
export interface ConnectionFacts {
  /** SessionInfo.id: the id the protocol granted at login, or a stand-in before. */
  readonly id: string;
  readonly peer: string;
  readonly provider: string;
  /** The transport connection's number, as the protocol's logs name it. */
  readonly connection: number;
  readonly state: string;
  /** The command window granted (credits, CmdSN window). */
  readonly credits: number;
  readonly native: NativeInfo;
}

export abstract class FrontEndConnection<Tag = unknown, C extends OutstandingCommand = OutstandingCommand> implements ServedConnection {
  abstract readonly id: string;
  abstract get loggedIn(): boolean;
  abstract get isActive(): boolean;
  /** The initiator's name once it has said it, else null. */
  abstract get initiator(): string | null;
  /** Called once when the connection has ended and released everything. */
  onEnd: ((connection: ServedConnection) => void) | null = null;
  /** Commands, bytes and errors, counted by the request core (and by a fast path, by batch). */
  readonly io = new SessionIo();
  /** The connection's log: the daemon's, with the connection's fields fixed once it has them (fixLogFields). */
  protected log: TargetLogger;
  /** The I_T nexus, from a granted login on. */
  protected nexus: Nexus | null = null;
  /** The LUNs the initiator sees and its access to each (mapLuns). */
  protected luns: ReadonlyMap<number, MappedLun> = new Map();
  /** Where each mapped LUN's commands run (the request core's scope): kept with `luns`, not rebuilt for every command. */
  protected scopes: ReadonlyMap<number, RequestScope> = new Map();
  /** The scope of a LUN this initiator cannot see: only INQUIRY, REPORT LUNS and REQUEST SENSE answer there. */
  protected unmapped: RequestScope | null = null;
  /** Commands between arrival and answer, by the protocol's tag. */
  protected readonly outstanding = new Map<Tag, C>();
  /** Draining: new commands are answered BUSY (SAM-5 5.3.1), running ones finish. */
  protected draining = false;
  /** The login timeout, then the keep-alive interval. */
  protected timer: NodeJS.Timeout | null = null;
  /** When the initiator was last heard from. */
  protected lastHeard = performance.now();
  protected loggedInAt: Date | null = null;
  private readonly since = new Date();
  private readonly idle: (() => void)[] = [];
  /** settled() calls still waiting: they end with the connection too. */
  private readonly settleWaits = new Set<() => void>();
  private ending: Promise<void> | null = null;
  private released = false;
  private readonly closedPromise: Promise<void>;
  private resolveClosed!: () => void;

  constructor(protected readonly env: ConnectionEnvironment) {
    this.log = env.log;
    this.closedPromise = new Promise((r) => (this.resolveClosed = r));
  }

  /** Resolves when the connection has ended. */
  get closed(): Promise<void> {
    return this.closedPromise;
  }

  /** Whether the connection has ended and released everything (onEnd was called). */
  protected get hasEnded(): boolean {
    return this.released;
  }

  // ---- What the protocol provides ----

  /** Logged in and neither ending nor ended: LUN maps refresh, drain and logout ask the initiator. */
  protected abstract get serving(): boolean;
  /** The protocol's part of info(). */
  protected abstract facts(): ConnectionFacts;
  /** The fields every log line about this connection carries. */
  protected abstract meta(): Record<string, unknown>;
  /** Closes the transport, waits for the commands and releases everything, then calls finish(): run once, by end(). */
  protected abstract endOnce(why: string): Promise<void>;
  /** Tells the initiator to log out, in the protocol's terms, and ends the connection. */
  protected abstract askLogout(kind: LogoutKind | number, why: string): Promise<void>;
  /**
   * For work nobody awaits (a reply sent from a receive callback, a timer's
   * logout): a rejection is a bug, and ends this connection, logged, instead of
   * reaching the daemon's unhandled-rejection handler (docs/operations.md
   * "Errors nobody caught").
   */
  protected abstract detach(p: Promise<unknown>, what: string): void;

  // ---- Hooks with a default ----

  /** After the LUN map changed (a fast path binds the new LUNs). */
  protected lunsMapped(): void {}
  /** What else a LUN's commands run on besides the outstanding ones (a fast path's own), to wait for in settled(). */
  protected nativeSettled(_lun: number): Promise<void> | null {
    return null;
  }
  /** What else a drain waits for besides the outstanding commands (a fast path's own), started when the drain starts. */
  protected nativeIdle(): Promise<void> | null {
    return null;
  }
  /** Whether a drain waits for this command (NVMe: not for a held Asynchronous Event Request, which waits for an event, not for storage). */
  protected holdsDrain(_c: C): boolean {
    return true;
  }
  /** Whether the command runs on this LUN, for settled(lun) (NVMe: a Flush of every namespace runs on all of them). */
  protected runsOn(c: C, lun: number): boolean {
    return c.lun === lun;
  }
  /** The logical units this connection's commands reach, which fenceLostCommands fences: those of its LUN map. */
  protected *reachedUnits(): Iterable<LogicalUnit> {
    for (const { lu } of this.luns.values()) yield lu;
  }
  /**
   * A count of everything the transport received, native work included, or
   * undefined: the keep-alive timer counts a change as activity
   * (docs/architecture.md "What the control plane sees of native work").
   */
  protected receivedCount(): number | undefined {
    return undefined;
  }

  // ---- ServedConnection ----

  /** For `rblkd ctl sessions` (SessionInfo; the field order is the JSON's). */
  info(): SessionInfo {
    const f = this.facts();
    return {
      id: f.id,
      initiator: this.initiator,
      peer: f.peer,
      provider: f.provider,
      port: this.env.portName,
      connection: f.connection,
      state: f.state,
      credits: f.credits,
      inFlight: this.outstanding.size,
      ops: this.io.ops,
      readBytes: this.io.readBytes,
      writeBytes: this.io.writeBytes,
      errors: this.io.errors,
      native: f.native,
      since: this.since.toISOString(),
      loggedInAt: this.loggedInAt?.toISOString() ?? null,
    };
  }

  /**
   * Resolves when every command outstanding on this LUN right now has
   * answered (or the connection ended): what a removed volume waits for.
   */
  settled(lun: number): Promise<void> {
    const running = [...this.outstanding.values()].filter((c) => this.runsOn(c, lun)).map((c) => c.done);
    const native = this.nativeSettled(lun);
    if (native !== null) running.push(native);
    if (this.released || running.length === 0) return Promise.resolve();
    // Not a race with closedPromise: that would leave a reaction on it per call
    // for the connection's life (every volume change of a long session).
    return new Promise<void>((resolve) => {
      this.settleWaits.add(resolve);
      void Promise.allSettled(running).then(() => {
        this.settleWaits.delete(resolve);
        resolve();
      });
    });
  }

  /** After a reload: recompute this connection's LUN map (removed LUNs vanish, added ones appear). */
  refreshLuns(): void {
    const initiator = this.initiator;
    if (this.serving && initiator !== null) this.mapLuns(this.env.lunsFor(initiator));
  }

  /** Drain (SIGTERM): new commands get BUSY, running ones finish (within timeoutMs), then the initiator is asked to log out. */
  async drain(timeoutMs: number): Promise<void> {
    if (this.hasEnded) return;
    if (!this.serving) return this.end('shutting down');
    this.draining = true;
    const native = this.nativeIdle();
    await this.untilIdle(timeoutMs);
    if (native !== null) await Promise.race([native, new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    await this.askLogout('shutdown', 'target shutting down');
  }

  /** Ends the connection administratively (a volume it used was removed, forced logout, target closing). */
  logout(kind: LogoutKind | number = 'admin', why = 'administrative logout'): Promise<void> {
    if (!this.serving) return this.end(why);
    return this.askLogout(kind, why);
  }

  /** Ends now, in silence (the initiator asked through another connection, or the server made room). */
  fence(why: string): void {
    if (this.hasEnded) return;
    this.detach(this.end(why), 'fence');
  }

  // ---- For the protocol ----

  /** Disconnects and releases; every caller gets the one ending (a failed send may race a logout). */
  protected end(why: string): Promise<void> {
    if (this.released) return this.closedPromise;
    this.ending ??= this.endOnce(why);
    return this.ending;
  }

  /** The connection has ended and released everything: closed resolves and onEnd runs, once. */
  protected finish(): void {
    if (this.released) return;
    this.released = true;
    this.stopTimer();
    this.resolveClosed();
    for (const w of this.settleWaits) w();
    this.settleWaits.clear();
    this.onEnd?.(this);
  }

  /** The log with this connection's fields on every line, from now on (call when they change: login). */
  protected fixLogFields(): void {
    this.log = withMeta(this.env.log, this.meta());
  }

  /** Sets the LUN map and the request scopes over it. */
  protected mapLuns(luns: ReadonlyMap<number, MappedLun>): void {
    this.luns = luns;
    ({ scopes: this.scopes, unmapped: this.unmapped } = requestScopes(this.nexus!, luns, this.env, this.log, this.io));
    this.lunsMapped();
  }

  /** The scope a command on `lun` runs in. */
  protected scopeOf(lun: number): RequestScope {
    return this.scopes.get(lun) ?? this.unmapped!;
  }

  /** Fences, on each mapped LUN, what of this connection's commands is still in a backend (LogicalUnit.fenceLost); how many. */
  protected fenceLostCommands(): number {
    if (this.nexus === null) return 0;
    let fenced = 0;
    for (const lu of this.reachedUnits()) fenced += lu.fenceLost(this.nexus);
    return fenced;
  }

  /** Wakes a drain waiting for the outstanding commands once there are none (holdsDrain). */
  protected wakeIfIdle(): void {
    if (this.idle.length > 0 && !this.commandsHoldDrain()) for (const w of this.idle.splice(0)) w();
  }

  /** Resolves when no command a drain waits for is outstanding (wakeIfIdle), the connection has ended, or after timeoutMs. */
  protected async untilIdle(timeoutMs: number): Promise<void> {
    if (this.commandsHoldDrain()) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([new Promise<void>((r) => this.idle.push(r)), this.closedPromise, new Promise((r) => (timer = setTimeout(r, timeoutMs).unref()))]);
      clearTimeout(timer);
    }
  }

  private commandsHoldDrain(): boolean {
    for (const c of this.outstanding.values()) if (this.holdsDrain(c)) return true;
    return false;
  }

  /** limits.login_timeout_ms from accept: `expired` runs if the login has not replaced this timer by then. */
  protected armLoginTimer(expired: () => void): void {
    this.timer = setTimeout(expired, this.env.limits.loginTimeoutMs);
  }

  /**
   * limits.keep_alive_ms from login: `tick` runs every half interval (50 ms at
   * least) with how long the initiator has been silent. Whatever the transport
   * received counts as heard (receivedCount), so a connection busy only with
   * native commands is not silent.
   */
  protected startKeepAlive(tick: (quietMs: number, keepAliveMs: number) => void): void {
    const ka = this.env.limits.keepAliveMs;
    if (ka <= 0) return;
    let received = this.receivedCount();
    this.timer = setInterval(() => {
      const now = this.receivedCount();
      if (now !== received) {
        received = now;
        this.lastHeard = performance.now();
      }
      tick(performance.now() - this.lastHeard, ka);
    }, Math.max(50, Math.floor(ka / 2)));
    this.timer.unref();
  }

  protected stopTimer(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      clearInterval(this.timer);
    }
  }
}
