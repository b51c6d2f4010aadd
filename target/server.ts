// The target without its daemon wrapping: exported volumes (LUNs over logical
// units), ports, and the connections served on them (its "sessions"). A front
// end opens a port through PortHost (listenWith): the server gives it the
// connections' environment, the pre-login limits and a place for its
// connections; TargetServer.listen does so for the front end over a
// TargetTransport it was built with (rblk's is rblkConnections, with its
// admission in target/rblk/listen.ts). rblkd (daemon.ts) builds one from the
// config; tests build one directly, over the loop or the fabric transport.
import type { Reactors } from '../native/reactors.js';
import { ScsiTarget, type Access, type LogicalUnit } from './scsi/index.js';
import type { MappedLun, ServedConnection, ConnectionEnvironment, SessionLimits, TargetLogger } from './connection/environment.js';
import type { TargetPort, TargetTransport } from './transport/transport.js';
import { ThrottledLog } from './throttled-log.js';
import { HeapTrimmer } from './heap-trimmer.js';
import { sourceOf } from './peer-source.js';

export interface ExportedVolume {
  readonly name: string;
  readonly lun: number;
  /** The NVMe namespace ID (config `nsid:`); absent: lun + 1 (docs/nvme.md "Configuration"). */
  readonly nsid?: number;
  readonly lu: LogicalUnit;
  /** The initiator's access to this volume, or null when it may not see it (LUN masking). */
  access(initiator: string): Access | null;
}

export interface ConnectionLimits {
  maxSessions: number;
  maxCapsule?: number;
  dataBuffers?: number;
  /**
   * Connections accepted that have not logged in yet (limits.pre_login_connections);
   * more are refused at connect. Absent: no limit.
   */
  preLoginConnections?: number;
  /**
   * Of those, how many one source address may hold (limits.pre_login_per_source),
   * counted over every listener, so that one peer cannot take them all
   * (docs/operations.md "Connection limits"). Absent: no per-source limit.
   */
  preLoginPerSource?: number;
  /**
   * How long a pre-login connection is left alone before a newer one from its
   * source may take its slot (evictStalePreLogin). Not a config key: tests
   * set it. Absent: PRE_LOGIN_GRACE_MS.
   */
  preLoginGraceMs?: number;
  /**
   * Bytes of receive buffers one session may register (limits.connection_memory):
   * the credits granted are lowered to fit. Absent: no limit.
   */
  connectionMemory?: number;
}

export interface TargetServerOptions {
  targetName: string;
  /** The NVMe subsystem NQN (config `nqn:`); absent: derived from targetName (target/nvme/subsystem.ts defaultNqn). */
  nqn?: string;
  limits: SessionLimits & ConnectionLimits;
  authRequired: boolean;
  /** Per-initiator secrets (auth.initiators). */
  secrets: ReadonlyMap<string, string>;
  log: TargetLogger;
  /** READ and WRITE on the native fast path where a session can (fast_path; on unless false). */
  fastPath?: boolean;
  /** Reactor threads that serve fast-path connections' data path (reactors; docs/target.md "Reactors"). */
  reactors?: Reactors | null;
  /** Spin on a fabric connection's CQ this long before the loop sleeps (busy_poll_us; docs/operations.md). 0 or absent: never. */
  busyPollMicros?: number;
  /**
   * The highest protocol version to speak (docs/protocol.md §3); default the
   * highest this code has. 1 behaves as a version-1 target does.
   */
  protocolVersion?: number;
}

/**
 * What a front end gets from the server for one of its ports (rblk's on a
 * TargetTransport, target/rblk/listen.ts; iSCSI's TCP portal,
 * target/iscsi/portal.ts): the connections' environment, admission of a new
 * connection against the drain and the pre-login limits, and a place for its
 * connections, so that limits, reload, drain and close treat every front
 * end's alike.
 */
export interface PortHost {
  environment(portName: string): ConnectionEnvironment;
  /** Whether a connection just accepted from `peer` (an address, with or without its port) may stay; refusals are logged (throttled). */
  admitConnection(portName: string, peer: string): boolean;
  /** A served connection: counted, drained, closed and refreshed with the rest. */
  adopt(connection: ServedConnection): void;
  /** The server's options as they are now (a reload replaces them). */
  readonly options: TargetServerOptions;
  /** Stopping: no new connection may stay. */
  readonly draining: boolean;
  /** Why a new connection from `source` (sourceOf) must be refused before login, or null: the pre-login limits. */
  preLoginRefusal(source: string): string | null;
  /** The log of refused connections, throttled. */
  readonly refusals: ThrottledLog;
  /**
   * For a transport that admits in two steps (request, then accept): a request
   * admitted from `source` counts as pre-login (+1) until its accept has
   * finished or been abandoned (-1).
   */
  accepting(source: string, by: 1 | -1): void;
  /** Resources of a connection went back: the heap may return memory (heap-trimmer.ts). */
  released(): void;
  /** The log of connections the transport closed before they asked anything, throttled. */
  readonly reaped: ThrottledLog;
  /** A connection the port could not take: logged, with what to do about running out of fds. */
  acceptFailed(portName: string, e: Error): void;
}

/** A front end whose connections come over a TargetTransport (rblk): how it opens a port there, for TargetServer.listen. */
export interface TransportFrontEnd {
  listen(host: PortHost, o: ListenOptions): Promise<TargetPort>;
}

export interface ListenOptions {
  transport: TargetTransport;
  provider: string;
  address: string;
  port: number;
}

/** At most one "refused at the pre-login limit" line per this many ms. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;
/**
 * How long a pre-login connection is left alone before a newer one from its
 * source may take its slot: a live login completes in milliseconds on a LAN and
 * in a few round trips over a WAN; one that has waited a second is most likely dead.
 */
const PRE_LOGIN_GRACE_MS = 1_000;

export class TargetServer {
  readonly scsi = new ScsiTarget();
  private readonly volumes = new Map<string, ExportedVolume>();
  private readonly ports = new Set<TargetPort>();
  /** The served connections, which ctl, metrics and max_sessions call sessions (docs/architecture.md "Words"). */
  readonly sessions = new Set<ServedConnection>();
  /** endConnectionsOf's waits for a connection's end. */
  private readonly endWaiters = new Map<ServedConnection, (() => void)[]>();
  private draining = false;
  private opts: TargetServerOptions;
  /** Connection requests admitted whose accept has not finished yet: pre-login too. */
  private accepting = 0;
  /** The same, by source address (sourceOf), and each admitted request's source. */
  private readonly acceptingFrom = new Map<string, number>();
  private readonly refusals: ThrottledLog;
  private readonly reaped: ThrottledLog;
  private readonly heap = new HeapTrimmer();
  /** When each connection was adopted: how long a pre-login one has waited. */
  private readonly adoptedAt = new WeakMap<ServedConnection, number>();
  /** Pre-login connections ended to make room for a newer one from their source; they no longer count. */
  private readonly evicted = new WeakSet<ServedConnection>();

  constructor(
    opts: TargetServerOptions,
    /** The front end that listen() opens ports for, on a TargetTransport. */
    private readonly transportFrontEnd: TransportFrontEnd,
  ) {
    this.opts = opts;
    this.refusals = new ThrottledLog(REFUSAL_LOG_INTERVAL_MS, (m) => this.opts.log.warn(m));
    this.reaped = new ThrottledLog(REFUSAL_LOG_INTERVAL_MS, (m) => this.opts.log.warn(m));
  }

  /** Connections that count against limits.pre_login_connections: accepting, or accepted and not logged in. */
  get preLoginConnections(): number {
    let n = this.accepting;
    for (const s of this.sessions) if (this.waitingToLogIn(s)) n++;
    return n;
  }

  /** Of preLoginConnections, those from one source address (sourceOf). */
  preLoginFrom(source: string): number {
    let n = this.acceptingFrom.get(source) ?? 0;
    for (const s of this.sessions) if (this.waitingToLogIn(s) && sourceOf(s.info().peer) === source) n++;
    return n;
  }

  /** Accepted, not logged in, and not already told to make room for a newer one. */
  private waitingToLogIn(s: ServedConnection): boolean {
    return !s.loggedIn && !this.evicted.has(s);
  }

  /**
   * A source at its share of pre-login slots ends its own oldest connection
   * that has waited longer than PRE_LOGIN_GRACE_MS to make room for the new
   * one, rather than being locked out until login_timeout_ms reaps it: a
   * host whose earlier connections died unseen (a crashed initiator, a
   * provider that lost the login request) logs in at once, and since only
   * the same source's connections are ever ended, no other host notices
   * (docs/operations.md "Connection limits"). A login still inside its grace
   * is never ended, so a burst of live logins is refused, not thrashed.
   */
  private evictStalePreLogin(source: string): ServedConnection | null {
    const now = performance.now();
    // The set iterates in insertion order: oldest first.
    for (const s of this.sessions) {
      if (!this.waitingToLogIn(s) || sourceOf(s.info().peer) !== source) continue;
      if (now - (this.adoptedAt.get(s) ?? now) < (this.opts.limits.preLoginGraceMs ?? PRE_LOGIN_GRACE_MS)) return null;
      this.evicted.add(s);
      s.fence(`a newer connection from ${source} took its pre-login slot (limits.pre_login_per_source)`);
      return s;
    }
    return null;
  }

  /**
   * Why a new connection from `source` must be refused before login (the
   * per-source share first, then the whole budget), or null when it may stay.
   */
  private preLoginRefusal(source: string): string | null {
    const l = this.opts.limits;
    if (l.preLoginPerSource !== undefined && this.preLoginFrom(source) >= l.preLoginPerSource && this.evictStalePreLogin(source) === null) {
      return `${l.preLoginPerSource} connections from ${source} are already waiting to log in (limits.pre_login_per_source)`;
    }
    if (l.preLoginConnections !== undefined && this.preLoginConnections >= l.preLoginConnections) {
      return `${l.preLoginConnections} connections are already waiting to log in (limits.pre_login_connections)`;
    }
    return null;
  }

  private countAccepting(source: string, by: 1 | -1): void {
    this.accepting += by;
    const n = (this.acceptingFrom.get(source) ?? 0) + by;
    if (n > 0) this.acceptingFrom.set(source, n);
    else this.acceptingFrom.delete(source);
  }

  get log(): TargetLogger {
    return this.opts.log;
  }

  /** Replaces limits, secrets and auth policy (a reload); sessions pick them up at their next login. */
  reconfigure(opts: TargetServerOptions): void {
    this.opts = opts;
  }

  /**
   * The session with this id, if it is still there: SessionInfo.id, what `rblkd ctl sessions`
   * shows (an iSCSI session's is `iscsi:<ISID>:<TSIH>`), or the connection's own id, as its logs name it.
   */
  session(id: string): ServedConnection | undefined {
    for (const s of this.sessions) if (s.id === id) return s;
    for (const s of this.sessions) if (s.info().id === id) return s;
    return undefined;
  }

  get exported(): readonly ExportedVolume[] {
    return [...this.volumes.values()];
  }

  volume(name: string): ExportedVolume | undefined {
    return this.volumes.get(name);
  }

  addVolume(v: ExportedVolume): void {
    if (this.volumes.has(v.name)) throw new Error(`volume ${v.name} is already exported`);
    for (const o of this.volumes.values()) if (o.lun === v.lun) throw new Error(`LUN ${v.lun} is already used by ${o.name}`);
    this.volumes.set(v.name, v);
    this.scsi.addUnit(v.lu);
  }

  /**
   * Unexports a volume. Sessions stop seeing its LUN at once; commands already
   * running on it finish (they hold the logical unit), then it is gone.
   */
  removeVolume(name: string): ExportedVolume | undefined {
    const v = this.volumes.get(name);
    if (!v) return undefined;
    this.volumes.delete(name);
    this.scsi.removeUnit(v.lu);
    return v;
  }

  /** The logged-in connections whose initiator may see volume `name` (its ACL): those that may be using it. */
  usersOf(name: string): ServedConnection[] {
    const v = this.volumes.get(name);
    if (!v) return [];
    return [...this.sessions].filter((s) => {
      const initiator = s.loggedIn ? s.info().initiator : null;
      return initiator !== null && v.access(initiator) !== null;
    });
  }

  /**
   * Ends at once (ServedConnection.fence) every logged-in connection whose
   * initiator may see volume `name`, and resolves how many once they have all
   * ended and released everything: their commands have settled, and none of
   * them will start anything on the volume's backend any more.
   */
  async endConnectionsOf(name: string, why: string): Promise<number> {
    const users = this.usersOf(name);
    await Promise.all(
      users.map(
        (s) =>
          new Promise<void>((resolve) => {
            if (!this.sessions.has(s)) return resolve();
            const waiters = this.endWaiters.get(s) ?? [];
            waiters.push(resolve);
            this.endWaiters.set(s, waiters);
            s.fence(why);
          }),
      ),
    );
    return users.length;
  }

  /** After a reload changed the LUN inventory: refresh every session's map, raise 3F/0E (SPC-5 6.2). */
  inventoryChanged(): void {
    for (const s of this.sessions) s.refreshLuns();
    this.scsi.raiseInventoryChanged();
  }

  private lunsFor(initiator: string): ReadonlyMap<number, MappedLun> {
    const m = new Map<number, MappedLun>();
    for (const v of this.volumes.values()) {
      const access = v.access(initiator);
      if (access !== null) m.set(v.lun, { lu: v.lu, access: v.lu.readOnly ? 'ro' : access, ...(v.nsid !== undefined ? { nsid: v.nsid } : {}) });
    }
    return m;
  }

  private environment(portName: string): ConnectionEnvironment {
    const self = this;
    return {
      get targetName() {
        return self.opts.targetName;
      },
      get nqn() {
        return self.opts.nqn;
      },
      scsi: this.scsi,
      get limits() {
        return self.opts.limits;
      },
      get log() {
        return self.opts.log;
      },
      get authRequired() {
        return self.opts.authRequired;
      },
      get fastPath() {
        return self.opts.fastPath !== false;
      },
      lunsFor: (initiator) => this.lunsFor(initiator),
      secretFor: (initiator) => this.opts.secrets.get(initiator) ?? null,
      fenceConnection: (sessionId, initiator, why) => {
        const s = this.session(sessionId);
        if (s === undefined || !s.loggedIn) return 'gone';
        if (s.info().initiator !== initiator) return 'refused';
        s.fence(why);
        return 'fenced';
      },
      admitSession: () => {
        if (this.draining) return 'draining';
        const active = [...this.sessions].filter((s) => s.isActive).length;
        return active >= this.opts.limits.maxSessions ? 'full' : 'ok';
      },
      portName,
    };
  }

  /** Opens a port of the front end this server was built with, on a TargetTransport (rblk's: target/rblk/listen.ts). */
  listen(o: ListenOptions): Promise<TargetPort> {
    return this.listenWith((host) => this.transportFrontEnd.listen(host, o));
  }

  /** Opens a port of a front end: `open` listens, with what the server gives a port (PortHost). */
  async listenWith<P extends TargetPort>(open: (host: PortHost) => Promise<P>): Promise<P> {
    // The getters below read the server's fields as they are at each call.
    const self = this;
    const port = await open({
      environment: (portName) => this.environment(portName),
      admitConnection: (portName, peer) => {
        if (this.draining) return false;
        const source = sourceOf(peer);
        const refusal = this.preLoginRefusal(source);
        if (refusal !== null) {
          this.refusals.note(`connection from ${source} on ${portName} refused: ${refusal}`);
          return false;
        }
        return true;
      },
      adopt: (s) => this.adoptConnection(s),
      get options() {
        return self.opts;
      },
      get draining() {
        return self.draining;
      },
      preLoginRefusal: (source) => this.preLoginRefusal(source),
      refusals: this.refusals,
      accepting: (source, by) => this.countAccepting(source, by),
      released: () => this.heap.noteRelease(),
      reaped: this.reaped,
      acceptFailed: (portName, e) => this.acceptFailed(portName, e),
    });
    this.ports.add(port);
    return port;
  }

  /** A session on a new connection: counted while it lasts; its end lets the heap give memory back. */
  private adoptConnection(s: ServedConnection): void {
    this.sessions.add(s);
    this.adoptedAt.set(s, performance.now());
    s.onEnd = () => {
      this.sessions.delete(s);
      this.heap.noteRelease();
      for (const w of this.endWaiters.get(s) ?? []) w();
      this.endWaiters.delete(s);
    };
  }

  /**
   * A connection the port could not take. Running out of fds (EMFILE) is the
   * one an operator must act on, so it says so (docs/target.md "Resources
   * per connection"); sessions already logged in are not affected.
   */
  private acceptFailed(portName: string, e: Error): void {
    const code = (e as { code?: unknown }).code;
    const fdLimit = code === 'FI_EMFILE' || code === 'EMFILE' || code === 'FI_ENFILE' || code === 'ENFILE';
    const hint = fdLimit ? ': out of file descriptors, raise LimitNOFILE (ulimit -n); sessions already logged in carry on' : '';
    this.opts.log.error(`cannot accept a connection on ${portName}, refused it (${e.message})${hint}`, { port: portName, ...(typeof code === 'string' ? { code } : {}) });
  }

  /**
   * SIGTERM: stop accepting, let running commands finish (new ones get BUSY),
   * log every session out, within timeoutMs.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    for (const p of this.ports) await p.stopAccepting();
    await Promise.all([...this.sessions].map((s) => s.drain(timeoutMs)));
  }

  async close(): Promise<void> {
    this.draining = true;
    await Promise.all([...this.sessions].map((s) => s.logout('shutdown', 'target closing')));
    for (const p of [...this.ports]) {
      await p.close();
      this.ports.delete(p);
    }
    this.heap.close();
  }
}
