// An in-process TargetServer for the initiator library's tests, over the loop
// transport or libfabric's tcp and sockets providers, with volumes on given
// backends (so a test can keep a backend across a target restart) and the
// options that connect() needs to reach it.
import { randomUUID } from 'node:crypto';
import type { Backend } from '../../../target/backend/backend.js';
import { LogicalUnit, type Access, type LuLimits } from '../../../target/scsi/index.js';
import { TargetServer } from '../../../target/server.js';
import { rblkConnections } from '../../../target/rblk/connection.js';
import type { TargetTransport } from '../../../target/transport/transport.js';
import type { TargetPortGroups } from '../../../target/scsi/port-groups.js';
import type { ConnectOptions } from '../../../initiator/index.js';
import { LoopInitiatorTransport } from '../../../initiator/transport/loop-transport.js';
import { listenTest, memoryLog, TARGET_NAME, testServerOptions, type LogLine, type TransportKind } from '../../helpers/target-fixture.js';
import { GatedBackend } from './gated-backend.js';
import { SpyTransport } from './spy-transport.js';
import { pattern } from '../../../bench/kit/pattern.js';
import { until } from '../../../bench/kit/wait.js';

export { ALL_TRANSPORTS, TARGET_NAME, TRANSPORTS, type TransportKind } from '../../helpers/target-fixture.js';

export const INITIATOR = 'iqn.2026-11.io.rblk:client';

export interface VolumeSpec {
  name: string;
  lun: number;
  /** Default: a new 4 MiB GatedBackend. */
  backend?: Backend;
  size?: number;
  blockSize?: 512 | 4096;
  readOnly?: boolean;
  thin?: boolean;
  limits?: Partial<LuLimits>;
  /** initiator name → access; absent: everyone rw. */
  acl?: Record<string, Access>;
  /** Keep the identifier across restarts (and give two targets' LUs one identity, for multipath). */
  identifier?: string;
  /** The target port groups (ALUA) the LU reports; none without. */
  portGroups?: TargetPortGroups;
}

export interface ServerOptions {
  port?: number;
  maxIo?: number;
  queueDepth?: number;
  keepAliveMs?: number;
  secrets?: Record<string, string>;
  authRequired?: boolean;
  /** The highest protocol version the target speaks (1: as a version-1 target does). */
  protocolVersion?: number;
  /** The target's transport, instead of the usual one for `kind` (a test's wrapper over it). */
  transport?: TargetTransport;
}

export interface TestTarget {
  server: TargetServer;
  kind: TransportKind;
  address: string;
  port: number;
  log: LogLine[];
  units: Map<string, { lu: LogicalUnit; backend: Backend }>;
  /** What connect() needs, with a spy over the initiator transport (loop) or the default fabric one. */
  options(extra?: Partial<ConnectOptions>): ConnectOptions;
  close(): Promise<void>;
}

export async function startServer(kind: TransportKind, volumes: VolumeSpec[], opts: ServerOptions = {}): Promise<TestTarget> {
  const log = memoryLog();
  const limits = { queueDepth: opts.queueDepth ?? 32, maxIo: opts.maxIo ?? 1 << 20, inCapsuleData: 8192, keepAliveMs: opts.keepAliveMs ?? 0, maxSessions: 64 };
  const server = new TargetServer(
    testServerOptions(log, { limits, secrets: opts.secrets, authRequired: opts.authRequired, protocolVersion: opts.protocolVersion }),
    rblkConnections,
  );
  const units = new Map<string, { lu: LogicalUnit; backend: Backend }>();
  for (const v of volumes) {
    const backend = v.backend ?? new GatedBackend(v.size ?? 4 << 20, { name: v.name });
    const lu = new LogicalUnit({
      name: v.name,
      backend,
      identifier: v.identifier ?? randomUUID(),
      blockSize: v.blockSize ?? 512,
      readOnly: v.readOnly,
      thin: v.thin,
      limits: v.limits,
      ...(v.portGroups ? { portGroups: v.portGroups } : {}),
    });
    units.set(v.name, { lu, backend });
    server.addVolume({ name: v.name, lun: v.lun, lu, access: (i) => (v.acl ? (v.acl[i] ?? null) : 'rw') });
  }
  const { address, port } = await listenTest(server, kind, { transport: opts.transport, port: opts.port, address: kind === 'loop' ? 'loop-initiator-test' : undefined });
  return {
    server,
    kind,
    address,
    port,
    log: log.lines,
    units,
    options: (extra = {}) => ({
      address,
      port,
      provider: kind === 'loop' ? undefined : kind,
      initiatorName: INITIATOR,
      targetName: TARGET_NAME,
      transport: kind === 'loop' ? new SpyTransport(new LoopInitiatorTransport()) : undefined,
      ...extra,
    }),
    close: () => server.close(),
  };
}

/** The backend of a volume, as the GatedBackend the helper made. */
export function gated(t: TestTarget, name: string): GatedBackend {
  const b = t.units.get(name)?.backend;
  if (!(b instanceof GatedBackend)) throw new Error(`volume ${name} has no GatedBackend`);
  return b;
}

export { pattern };

export { until };
