// NVMe over Fabrics discovery from the host side (NVMe-oF 1.1 §5): an admin
// queue to the well-known discovery NQN, the controller enabled, and the
// Discovery Log Page (70h, §5.4) read whole: the 1024-byte header for
// NUMREC, then the entries, read again if GENCTR moved meanwhile (§5.3).
import { DISCOVERY_NQN } from '../../protocol/nvme/command.js';
import { parseDiscoveryLog, type DiscoveryRecord } from '../../protocol/nvme/identify.js';
import { RblkError } from '../errors.js';
import { NvmeController } from './controller.js';
import { NVME_DEFAULTS } from './session.js';

/** One subsystem port the log lists, with the nvme+tcp:// URL that names it (TCP entries only have one). */
export interface NvmeDiscoveryEntry extends DiscoveryRecord {
  url: string | null;
}

/** Bytes read per Get Log Page: a few entries at a time, within any MDTS. */
const CHUNK = 4096;

export async function discoverNvme(o: { address: string; port: number; hostnqn: string; hostid: Buffer; connectTimeoutMs?: number }): Promise<{ genctr: bigint; entries: NvmeDiscoveryEntry[] }> {
  const c = await NvmeController.open({
    address: o.address,
    port: o.port,
    subnqn: DISCOVERY_NQN,
    hostnqn: o.hostnqn,
    hostid: o.hostid,
    digests: { header: false, data: false },
    ioQueues: 0,
    queueSize: 2,
    // A discovery controller may be given KATO 0: this association lasts one log read (NVMe-oF 1.1 §3.3).
    kato: 0,
    connectTimeoutMs: o.connectTimeoutMs ?? NVME_DEFAULTS.connectMs,
    commandTimeoutMs: NVME_DEFAULTS.commandMs,
  });
  try {
    if (c.info.type !== 2 && c.info.type !== 0) throw new RblkError('INVALID', `the controller at ${o.address}:${o.port} is not a discovery controller (CNTRLTYPE ${c.info.type})`);
    for (let tries = 0; tries < 5; tries++) {
      const head = await c.logPage(0x70, 1024);
      const genctr = head.readBigUInt64LE(0);
      const numrec = Number(head.readBigUInt64LE(8));
      if (numrec > 1024) throw new RblkError('INVALID', `discovery log at ${o.address}:${o.port} claims ${numrec} records`);
      const total = 1024 * (numrec + 1);
      const page = Buffer.alloc(total);
      head.copy(page);
      for (let at = 1024; at < total; at += CHUNK) page.set(await c.logPage(0x70, Math.min(CHUNK, total - at), at), at);
      const again = await c.logPage(0x70, 1024);
      if (again.readBigUInt64LE(0) !== genctr) continue;
      const log = parseDiscoveryLog(page);
      return {
        genctr,
        entries: log.entries.map((e) => ({ ...e, url: e.trtype === 3 ? `nvme+tcp://${e.adrfam === 2 ? `[${e.traddr}]` : e.traddr}:${e.trsvcid}/${e.subnqn}` : null })),
      };
    }
    throw new RblkError('BUSY', `discovery log at ${o.address}:${o.port} kept changing while it was read`);
  } finally {
    await c.shutdown();
  }
}
