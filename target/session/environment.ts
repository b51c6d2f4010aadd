// What a session needs from the daemon: the SCSI target, the negotiated
// limits, LUN masking and secrets for an initiator, and a logger. Sessions
// never read the config themselves, so a reload changes what the next lookup
// returns and nothing else.
import type { Access, LogicalUnit, ScsiTarget } from '../scsi/index.js';

export interface SessionLogger {
  error(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  debug(message: string, meta?: Record<string, unknown>): void;
}

export interface MappedLun {
  readonly lu: LogicalUnit;
  readonly access: Access;
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

export interface SessionEnvironment {
  /** The name initiators log in to (LOGIN_REQ targetName). */
  readonly targetName: string;
  readonly scsi: ScsiTarget;
  readonly limits: SessionLimits;
  readonly log: SessionLogger;
  /** The LUNs this initiator may see, with its access to each (ACL applied). */
  lunsFor(initiator: string): ReadonlyMap<number, MappedLun>;
  /** The initiator's secret, or null when it has none configured. */
  secretFor(initiator: string): string | null;
  /** Whether every initiator must authenticate (auth.required). */
  readonly authRequired: boolean;
  /** Whether a new session may start (max_sessions, draining); a reason when not. */
  admitSession(): 'ok' | 'full' | 'draining';
  /** The target port's name for the I_T nexus ("tcp:127.0.0.1:7471"). */
  readonly portName: string;
}
