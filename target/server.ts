// The target without its daemon wrapping: exported volumes (LUNs over logical
// units), ports on transports, and the sessions on them. rblkd (daemon.ts)
// builds one from the config; tests build one directly, over the loop or the
// fabric transport.
import { LogoutReason } from '../protocol/wire/index.js';
import { ScsiTarget, type Access, type LogicalUnit } from './scsi/index.js';
import { TargetSession } from './session/session.js';
import type { MappedLun, SessionEnvironment, SessionLimits, SessionLogger } from './session/environment.js';
import type { TargetConnection, TargetPort, TargetTransport } from './transport/transport.js';
import { ConnectRejectReason, MAX_CAPSULE_SIZE, MIN_CAPSULE_SIZE, CONTROL_RECV_BUFFERS } from '../protocol/wire/index.js';

export interface ExportedVolume {
  readonly name: string;
  readonly lun: number;
  readonly lu: LogicalUnit;
  /** The initiator's access to this volume, or null when it may not see it (LUN masking). */
  access(initiator: string): Access | null;
}

export interface TargetServerOptions {
  targetName: string;
  limits: SessionLimits & { maxSessions: number; maxCapsule?: number; dataBuffers?: number };
  authRequired: boolean;
  /** Per-initiator secrets (auth.initiators). */
  secrets: ReadonlyMap<string, string>;
  log: SessionLogger;
}

export interface ListenOptions {
  transport: TargetTransport;
  provider: string;
  address: string;
  port: number;
}

const DEFAULT_MAX_CAPSULE = 8192 + 48;

export class TargetServer {
  readonly scsi = new ScsiTarget();
  private readonly volumes = new Map<string, ExportedVolume>();
  private readonly ports = new Set<TargetPort>();
  readonly sessions = new Set<TargetSession>();
  private draining = false;
  private opts: TargetServerOptions;

  constructor(opts: TargetServerOptions) {
    this.opts = opts;
  }

  get log(): SessionLogger {
    return this.opts.log;
  }

  /** Replaces limits, secrets and auth policy (a reload); sessions pick them up at their next login. */
  reconfigure(opts: TargetServerOptions): void {
    this.opts = opts;
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

  /** After a reload changed the LUN inventory: refresh every session's map, raise 3F/0E (SPC-5 6.2). */
  inventoryChanged(): void {
    for (const s of this.sessions) s.refreshLuns();
    this.scsi.raiseInventoryChanged();
  }

  private lunsFor(initiator: string): ReadonlyMap<number, MappedLun> {
    const m = new Map<number, MappedLun>();
    for (const v of this.volumes.values()) {
      const access = v.access(initiator);
      if (access !== null) m.set(v.lun, { lu: v.lu, access: v.lu.readOnly ? 'ro' : access });
    }
    return m;
  }

  private environment(portName: string): SessionEnvironment {
    const self = this;
    return {
      get targetName() {
        return self.opts.targetName;
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
      lunsFor: (initiator) => this.lunsFor(initiator),
      secretFor: (initiator) => this.opts.secrets.get(initiator) ?? null,
      admitSession: () => {
        if (this.draining) return 'draining';
        const active = [...this.sessions].filter((s) => s.isActive).length;
        return active >= this.opts.limits.maxSessions ? 'full' : 'ok';
      },
      portName,
    };
  }

  async listen(o: ListenOptions): Promise<TargetPort> {
    const limits = this.opts.limits;
    const maxCapsule = Math.min(MAX_CAPSULE_SIZE, Math.max(MIN_CAPSULE_SIZE, limits.maxCapsule ?? Math.max(DEFAULT_MAX_CAPSULE, limits.inCapsuleData + 48)));
    let env: SessionEnvironment | null = null;
    const port = await o.transport.listen(
      { provider: o.provider, address: o.address, port: o.port, maxIo: limits.maxIo, dataBuffers: limits.dataBuffers ?? 64 },
      {
        admit: (request) => {
          if (this.draining) return { reject: ConnectRejectReason.SHUTTING_DOWN };
          const depth = Math.min(request.queueDepth, this.opts.limits.queueDepth);
          return { accept: { recvBuffers: depth + CONTROL_RECV_BUFFERS, maxCapsule: Math.min(request.maxCapsule, maxCapsule) } };
        },
        connected: (conn: TargetConnection) => {
          const s = new TargetSession(conn, env!);
          this.sessions.add(s);
          s.onEnd = () => this.sessions.delete(s);
        },
        acceptFailed: (e: Error) => this.acceptFailed(env?.portName ?? `${o.provider}:${o.address}:${o.port}`, e),
      },
    );
    env = this.environment(`${port.provider}:${port.address}:${port.port}`);
    this.ports.add(port);
    return port;
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
    await Promise.all([...this.sessions].map((s) => s.logout(LogoutReason.SHUTDOWN, 'target closing')));
    for (const p of [...this.ports]) {
      await p.close();
      this.ports.delete(p);
    }
  }
}
