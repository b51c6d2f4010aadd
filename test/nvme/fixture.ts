// A TargetServer with memory volumes and one NVMe/TCP listener on 127.0.0.1
// port 0, for the NVMe tests (target/nvme/, docs/nvme.md).
import { NvmeTcpPortal } from '../../target/nvme/portal.js';
import { defaultNqn } from '../../target/nvme/subsystem.js';
import { TargetServer, type TargetServerOptions } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import { exportMemoryVolume, memoryLog, testServerOptions, TARGET_NAME, type VolumeDef } from '../helpers/target-fixture.js';

export interface NvmeFixture {
  server: TargetServer;
  portal: NvmeTcpPortal;
  port: number;
  nqn: string;
  log: ReturnType<typeof memoryLog>;
  volumes: ReturnType<typeof exportMemoryVolume>[];
  close(): Promise<void>;
}

export async function startNvme(
  vols: (VolumeDef & { nsid?: number })[],
  limits: Partial<TargetServerOptions['limits']> = {},
  nqn?: string,
  auth: { required?: boolean; secrets?: Record<string, string> } = {},
): Promise<NvmeFixture> {
  const log = memoryLog();
  const base = testServerOptions(log, { limits: { queueDepth: 32, inCapsuleData: 8192, maxSessions: 64, ...limits } });
  const opts = { ...base, authRequired: auth.required ?? false, secrets: new Map(Object.entries(auth.secrets ?? {})) };
  const server = new TargetServer(nqn ? { ...opts, nqn } : opts, rblkConnections);
  const volumes = vols.map((v) => (v.nsid === undefined ? exportMemoryVolume(v) : { ...exportMemoryVolume(v), nsid: v.nsid }));
  for (const v of volumes) server.addVolume(v);
  const portal = await server.listenWith((host) => NvmeTcpPortal.listen(host, { address: '127.0.0.1', port: 0 }));
  return {
    server,
    portal,
    port: portal.port,
    nqn: nqn ?? defaultNqn(TARGET_NAME),
    log,
    volumes,
    close: () => server.close(),
  };
}
