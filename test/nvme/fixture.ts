// A TargetServer with memory volumes and one NVMe/TCP listener on 127.0.0.1
// port 0, for the NVMe tests (target/nvme/, docs/nvme.md).
import type { ExecutionContext } from 'ava';
import { RawHost, type Result } from '../../bench/soak/nvme-raw-host.js';
import { buildSqe } from '../../protocol/nvme/command.js';
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

/**
 * A host's two queues on the fixture, written from the spec (bench/soak/nvme-raw-host.ts):
 * the admin queue enabled (its controller ID), and one I/O queue of 16 connected to that
 * controller; both closed at the test's teardown.
 */
export async function openHostQueues(t: ExecutionContext, f: NvmeFixture, hostnqn?: string): Promise<{ admin: RawHost; io: RawHost; cntlid: number }> {
  const who = hostnqn === undefined ? {} : { hostnqn };
  const admin = await RawHost.open(f.port);
  t.teardown(() => admin.close());
  const cntlid = await admin.enable(f.nqn, who);
  const io = await RawHost.open(f.port);
  t.teardown(() => io.close());
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid, ...who })).statusField, 0, 'the I/O queue connects');
  return { admin, io, cntlid };
}

/** A second host's NQN, for the tests where two hosts contend (reservations). */
export const B_NQN = 'nqn.2014-08.org.nvmexpress:uuid:6f1b2c9e-0000-4000-8000-00000000000b';

/**
 * A reservation command (Register 0Dh, Acquire 11h, Release 15h) on namespace 1 from a raw host,
 * CDW10 as given and its key data in the capsule (NVM Command Set 1.0 §3.2.5-§3.2.8).
 */
export function reservationCommand(h: RawHost, opcode: number, c10: number, data: Buffer): Promise<Result> {
  return h.command(buildSqe({ opcode, cid: h.nextCid(), nsid: 1, sgl: { id: 0x01, length: data.length }, cdw: { 10: c10 } }), { data, inCapsule: true });
}
