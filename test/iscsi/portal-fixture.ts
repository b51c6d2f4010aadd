// An in-process TargetServer with memory volumes and an iSCSI portal on
// 127.0.0.1, port 0: what the iSCSI tests drive with real clients (libiscsi's
// tools, qemu-img, iscsiadm).
import { spawn } from 'node:child_process';
import { exportMemoryVolume, memoryLog, type LogLine, type VolumeDef } from '../helpers/target-fixture.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import { IscsiPortal } from '../../target/iscsi/portal.js';

export const IQN = 'iqn.2026-12.io.rblk:iscsi-test';
export const INITIATOR = 'iqn.2026-12.io.rblk:initiator';

export interface IscsiFixture {
  server: TargetServer;
  portal: IscsiPortal;
  port: number;
  log: LogLine[];
  backends: ReturnType<typeof exportMemoryVolume>[];
  url(lun?: number, args?: string): string;
  close(): Promise<void>;
}

export async function startIscsi(
  volumes: VolumeDef[] = [{ name: 'vol0', lun: 0, size: 16 << 20 }],
  opts: { secrets?: Record<string, string>; authRequired?: boolean; maxSessions?: number; queueDepth?: number; keepAliveMs?: number; loginTimeoutMs?: number; preLoginConnections?: number } = {},
): Promise<IscsiFixture> {
  const log = memoryLog();
  const server = new TargetServer(
    {
      targetName: IQN,
      limits: {
        queueDepth: opts.queueDepth ?? 64,
        maxIo: 1 << 20,
        inCapsuleData: 8192,
        maxDescriptors: 16,
        keepAliveMs: opts.keepAliveMs ?? 5000,
        loginTimeoutMs: opts.loginTimeoutMs ?? 5000,
        maxSessions: opts.maxSessions ?? 16,
        preLoginConnections: opts.preLoginConnections ?? 16,
      },
      authRequired: opts.authRequired ?? false,
      secrets: new Map(Object.entries(opts.secrets ?? {})),
      log,
    },
    rblkConnections,
  );
  const backends = volumes.map((v) => exportMemoryVolume(v));
  for (const b of backends) server.addVolume(b);
  const portal = await server.listenWith((host) => IscsiPortal.listen(host, { address: '127.0.0.1', port: 0 }));
  return {
    server,
    portal,
    port: portal.port,
    log: log.lines,
    backends,
    url: (lun = 0, args = '') => `iscsi://127.0.0.1:${portal.port}/${IQN}/${lun}${args}`,
    close: () => server.close(),
  };
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a client to its end (bounded by timeoutMs, then killed). */
export function run(cmd: string, args: string[], timeoutMs = 30_000, input?: Buffer): Promise<Run> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    if (input) p.stdin.end(input);
    else p.stdin.end();
  });
}
