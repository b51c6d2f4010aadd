// The seam between TargetServer and the connections of a front end (rblk's
// RblkConnection and iSCSI's IscsiConnection, both FrontEndConnections
// (front-end-connection.ts), and NVMe/TCP's NvmeTcpConnection). What a connection needs from the daemon: the SCSI
// target, the negotiated limits, LUN masking and secrets for an initiator,
// and a logger. Connections never read the config themselves, so a reload
// changes what the next lookup returns and nothing else. What the server
// needs from a connection: ServedConnection (docs/architecture.md "Seams").
// The server and the operator call a served connection a session
// (TargetServer.sessions, max_sessions, `rblkd ctl sessions`): one logged-in
// connection each (docs/architecture.md "Words").
import type { Access, LogicalUnit, Nexus, RequestScope, ScsiTarget, SessionIo } from '../scsi/index.js';
import type { DataBuffer, TargetConnection } from '../transport/transport.js';

/** The target's log as the server and its front ends' connections write it (the daemon's logger, or a test's). */
export interface TargetLogger {
  error(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  debug(message: string, meta?: Record<string, unknown>): void;
}

/** The logger with fixed fields (a connection's session, peer, ...) added to every line; a line's own fields win. */
export function withMeta(log: TargetLogger, meta: Record<string, unknown>): TargetLogger {
  const m = (extra?: Record<string, unknown>): Record<string, unknown> => ({ ...meta, ...extra });
  return {
    error: (msg, x) => log.error(msg, m(x)),
    warn: (msg, x) => log.warn(msg, m(x)),
    info: (msg, x) => log.info(msg, m(x)),
    debug: (msg, x) => log.debug(msg, m(x)),
  };
}

export interface MappedLun {
  readonly lu: LogicalUnit;
  readonly access: Access;
  /** The NVMe namespace ID when the config gives one; otherwise the LUN + 1 (docs/nvme.md "Configuration"). */
  readonly nsid?: number;
}

/**
 * What every command of a connection runs against, per mapped LUN, and for a LUN
 * that is not mapped (read-only, no LU: the core answers it). Any front end
 * builds its scopes here when it maps its LUNs.
 */
export function requestScopes(
  nexus: Nexus,
  luns: ReadonlyMap<number, MappedLun>,
  env: ConnectionEnvironment,
  log: TargetLogger,
  io: SessionIo,
): { scopes: ReadonlyMap<number, RequestScope>; unmapped: RequestScope } {
  const visibleLuns = [...luns.keys()].sort((a, b) => a - b);
  const scope = (lu: LogicalUnit | undefined, access: Access): RequestScope => ({
    nexus,
    lu,
    access,
    visibleLuns,
    log,
    io,
    // limits.max_io as it is now: a reload changes it for running connections too.
    get maxTransfer() {
      return env.limits.maxIo;
    },
  });
  return { scopes: new Map([...luns].map(([lun, m]) => [lun, scope(m.lu, m.access)])), unmapped: scope(undefined, 'ro') };
}

export interface SessionLimits {
  /** Credits granted at most (limits.queue_depth). */
  queueDepth: number;
  /** Largest data transfer of one command, bytes (limits.max_io). */
  maxIo: number;
  /** Immediate (in-capsule) write data, bytes (limits.in_capsule_data). */
  inCapsuleData: number;
  /** Descriptors per CMD. */
  maxDescriptors: number;
  keepAliveMs: number;
  /** How long a connection may take from accept to LOGIN_RSP. */
  loginTimeoutMs: number;
}

export interface ConnectionEnvironment {
  /** The name initiators log in to (LOGIN_REQ targetName). */
  readonly targetName: string;
  /** The NVMe subsystem NQN (config `nqn:`, docs/nvme.md "Configuration"); absent: derived from targetName. */
  readonly nqn?: string;
  readonly scsi: ScsiTarget;
  readonly limits: SessionLimits;
  readonly log: TargetLogger;
  /** The LUNs this initiator may see, with its access to each (ACL applied). */
  lunsFor(initiator: string): ReadonlyMap<number, MappedLun>;
  /** The initiator's secret, or null when it has none configured. */
  secretFor(initiator: string): string | null;
  /** Whether every initiator must authenticate (auth.required). */
  readonly authRequired: boolean;
  /** Whether a new connection may log in (max_sessions, draining); a reason when not. */
  admitSession(): 'ok' | 'full' | 'draining';
  /** The target port's name for the I_T nexus ("tcp:127.0.0.1:7471"). */
  readonly portName: string;
  /** Whether new connections run READ and WRITE on the native fast path where they can (fast_path, docs/operations.md). */
  readonly fastPath?: boolean;
  /**
   * Ends the logged-in connection with this session id if `initiator` owns it,
   * and fences what of it is still in a backend, before returning
   * (docs/protocol.md §14.1 FENCE CONNECTION). 'gone': no such connection
   * (it ended already, or never was here); 'refused': another initiator's.
   */
  fenceConnection(sessionId: string, initiator: string, why: string): 'fenced' | 'gone' | 'refused';
}

/** Why the target ends a connection: it is stopping, or an administrator (or a reload) asked. */
export type LogoutKind = 'shutdown' | 'admin';
/** What `rblkd ctl sessions` shows of one connection (docs/operations.md "The control socket"). */
export interface SessionInfo {
  /** The session id granted at login (LOGIN_RSP), or "c<connection>" before it. */
  readonly id: string;
  readonly initiator: string | null;
  /** Where the initiator connected from ("127.0.0.1:41234"). */
  readonly peer: string;
  readonly provider: string;
  /** The target port it came in on ("tcp:127.0.0.1:7471"). */
  readonly port: string;
  /** The transport connection's id, as logs name it. */
  readonly connection: number;
  readonly state: string;
  /** Credits granted (the queue depth); 0 before login. */
  readonly credits: number;
  /** Commands between CMD and RSP now. */
  readonly inFlight: number;
  readonly ops: number;
  readonly readBytes: number;
  readonly writeBytes: number;
  readonly errors: number;
  /** What the native fast path does for this connection (docs/target.md "Fast path"). */
  readonly native: NativeInfo;
  /** When the connection was accepted, ISO 8601. */
  readonly since: string;
  readonly loggedInAt: string | null;
}

/** A connection's native fast path as `rblkd ctl sessions` shows it. */
export interface NativeInfo {
  /** Whether at least one of its LUNs is served natively now. */
  readonly active: boolean;
  /** Why not (or, when active, why some LUN is not): null when every LUN is. */
  readonly reason: string | null;
  /** The reactor thread serving it, or null: the JS thread, or no fast path. */
  readonly reactor: number | null;
  /** Commands the fast path took, and the bytes of those it answered GOOD. */
  readonly commands: number;
  readonly readBytes: number;
  readonly writeBytes: number;
  /** Commands the fast path left to JavaScript because a QoS bucket had no room for them yet (docs/operations.md "QoS limits"). */
  readonly qosDeferred: number;
  /** Commands that waited on the fast path itself for their QoS turn, and those of them started since (native/src/core/fast-path-qos.cc). */
  readonly qosParked: number;
  readonly qosReleased: number;
}

/** What a front end without a fast path reports. */
export function noNative(reason: string): NativeInfo {
  return { active: false, reason, reactor: null, commands: 0, readBytes: 0, writeBytes: 0, qosDeferred: 0, qosParked: 0, qosReleased: 0 };
}

/** One logged-in connection as the server and the daemon see it (a "session" to them), whichever front end runs it. */
export interface ServedConnection {
  /** As SessionInfo.id. */
  readonly id: string;
  /** For `rblkd ctl sessions`. */
  info(): SessionInfo;
  /** Whether the login was granted (it stays true while the connection ends). */
  readonly loggedIn: boolean;
  /** Logged in and not ending: counts against max_sessions. */
  readonly isActive: boolean;
  /**
   * Resolves when every command outstanding on this LUN right now has
   * responded (or the connection ended): what a removed volume waits for.
   */
  settled(lun: number): Promise<void>;
  /** After a reload: recompute this connection's LUN map (removed LUNs vanish, added ones appear). */
  refreshLuns(): void;
  /** New commands get BUSY, running ones finish (within timeoutMs), then the connection ends. */
  drain(timeoutMs: number): Promise<void>;
  /**
   * Ends the connection administratively; each front end tells its initiator in
   * its own terms. A number is the front end's own reason code (rblk's
   * LogoutReason, docs/protocol.md §14), for tests that provoke one.
   */
  logout(kind?: LogoutKind | number, why?: string): Promise<void>;
  /**
   * Ends the connection at once, without telling its initiator (which
   * asked, through another connection): before this returns, no command of
   * it starts on a backend any more and what is still running there fences
   * later commands on its blocks (docs/target.md "A lost connection's commands").
   */
  fence(why: string): void;
  /** Called once when the connection has ended and released everything. */
  onEnd: ((connection: ServedConnection) => void) | null;
}

/** How a front end serves a connection its port accepted: with one ServedConnection (rblk's port, target/rblk/listen.ts, takes one). */
export type ConnectionFactory = <B extends DataBuffer>(conn: TargetConnection<B>, env: ConnectionEnvironment) => ServedConnection;
