// A target (TargetServer) with memory-backed volumes on a chosen transport,
// and initiator connections to it: the end-to-end fixture for target and
// initiator tests.
import { randomUUID } from 'node:crypto';
import { MemoryBackend } from '../../target/backend/memory.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer, type ExportedVolume, type TargetServerOptions } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import type { TargetLogger } from '../../target/connection/environment.js';
import { FabricTargetTransport } from '../../target/transport/fabric-transport.js';
import { LoopTargetTransport } from '../../target/transport/loop-transport.js';
import type { TargetTransport } from '../../target/transport/transport.js';
import { Connection, type LoginOptions } from '../../initiator/connection.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import { LoopInitiatorTransport } from '../../initiator/transport/loop-transport.js';
import type { InitiatorTransport } from '../../initiator/transport/transport.js';
import type { Access } from '../../target/scsi/index.js';

export const TARGET_NAME = 'iqn.2026-11.io.rblk:test';
export const TRANSPORTS = ['loop', 'tcp', 'sockets'] as const;
/** FI_EP_RDM providers (docs/transport.md "RDM endpoints"): shm on one host, rxm over tcp. */
export const RDM_TRANSPORTS = ['shm', 'tcp;ofi_rxm'] as const;
/** The MSG transports and the RDM ones: the suites that run on every fabric. */
export const ALL_TRANSPORTS = [...TRANSPORTS, ...RDM_TRANSPORTS] as const;
export type TransportKind = (typeof ALL_TRANSPORTS)[number];

export interface LogLine {
  level: string;
  message: string;
  meta?: Record<string, unknown>;
}

export function memoryLog(lines: LogLine[] = []): TargetLogger & { lines: LogLine[] } {
  const at = (level: string) => (message: string, meta?: Record<string, unknown>) => void lines.push({ level, message, meta });
  return { lines, error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

/**
 * A TargetServer's options for a test: one target name, no authentication,
 * keep-alive off, and limits small enough for a test, each replaceable.
 */
export function testServerOptions(
  log: TargetLogger,
  o: {
    limits?: Partial<TargetServerOptions['limits']>;
    fastPath?: boolean;
    protocolVersion?: number;
    secrets?: Record<string, string>;
    authRequired?: boolean;
  } = {},
): TargetServerOptions {
  return {
    targetName: TARGET_NAME,
    limits: { queueDepth: 16, maxIo: 1 << 20, inCapsuleData: 4096, maxDescriptors: 16, keepAliveMs: 0, loginTimeoutMs: 10_000, maxSessions: 8, dataBuffers: 16, ...o.limits },
    authRequired: o.authRequired ?? false,
    secrets: new Map(Object.entries(o.secrets ?? {})),
    log,
    ...(o.fastPath !== undefined ? { fastPath: o.fastPath } : {}),
    ...(o.protocolVersion !== undefined ? { protocolVersion: o.protocolVersion } : {}),
  };
}

/**
 * Starts a test target listening on `kind`: in-process loop, or a real
 * libfabric listener on 127.0.0.1 port 0 (every in-process target of the
 * tests listens through this).
 */
export async function listenTest(
  server: TargetServer,
  kind: TransportKind | string,
  o: { transport?: TargetTransport; port?: number; address?: string } = {},
): Promise<{ address: string; port: number }> {
  const address = o.address ?? (kind === 'loop' ? 'loop-test' : '127.0.0.1');
  const transport = o.transport ?? (kind === 'loop' ? new LoopTargetTransport() : new FabricTargetTransport());
  const p = await server.listen({ transport, provider: kind === 'loop' ? 'loop' : kind, address, port: o.port ?? 0 });
  return { address, port: p.port };
}

export interface VolumeDef {
  name: string;
  lun: number;
  size: number;
  blockSize?: 512 | 4096;
  readOnly?: boolean;
  /** initiator name → access; absent: everyone rw. */
  acl?: Record<string, Access>;
}

export function exportMemoryVolume(d: VolumeDef): ExportedVolume & { backend: MemoryBackend } {
  const backend = new MemoryBackend({ size: d.size, name: d.name });
  const lu = new LogicalUnit({ name: d.name, backend, identifier: randomUUID(), blockSize: d.blockSize ?? 512, readOnly: d.readOnly });
  return {
    name: d.name,
    lun: d.lun,
    lu,
    backend,
    access: (initiator) => (d.acl ? (d.acl[initiator] ?? null) : 'rw'),
  };
}

export interface Fixture {
  server: TargetServer;
  port: number;
  address: string;
  kind: TransportKind;
  log: LogLine[];
  initiatorTransport: InitiatorTransport;
  connect(o?: Partial<LoginOptions>): Promise<Connection>;
  close(): Promise<void>;
}

export async function startTarget(
  kind: TransportKind,
  volumes: VolumeDef[] = [{ name: 'vol0', lun: 0, size: 16 << 20 }],
  opts: {
    secrets?: Record<string, string>;
    authRequired?: boolean;
    keepAliveMs?: number;
    queueDepth?: number;
    maxSessions?: number;
    loginTimeoutMs?: number;
    preLoginConnections?: number;
  } = {},
): Promise<Fixture> {
  const log = memoryLog();
  const limits = {
    queueDepth: opts.queueDepth ?? 32,
    inCapsuleData: 8192,
    keepAliveMs: opts.keepAliveMs ?? 0,
    loginTimeoutMs: opts.loginTimeoutMs ?? 10_000,
    maxSessions: opts.maxSessions ?? 64,
    preLoginConnections: opts.preLoginConnections,
  };
  const server = new TargetServer(testServerOptions(log, { limits, secrets: opts.secrets, authRequired: opts.authRequired }), rblkConnections);
  for (const v of volumes) server.addVolume(exportMemoryVolume(v));
  const initiatorTransport: InitiatorTransport = kind === 'loop' ? new LoopInitiatorTransport() : new FabricInitiatorTransport();
  const { address, port } = await listenTest(server, kind);
  const conns: Connection[] = [];
  return {
    server,
    port,
    address,
    kind,
    log: log.lines,
    initiatorTransport,
    async connect(o = {}) {
      const c = await Connection.open(initiatorTransport, {
        address,
        port,
        provider: kind === 'loop' ? undefined : kind,
        initiatorName: 'iqn.2026-11.io.rblk:client',
        targetName: TARGET_NAME,
        maxIo: 1 << 20,
        queueDepth: 16,
        ...o,
      });
      conns.push(c);
      return c;
    },
    async close() {
      for (const c of conns) await c.close();
      await server.close();
    },
  };
}
