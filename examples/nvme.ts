// Connects to an NVMe/TCP subsystem as a host (rblkd's `protocol: nvme-tcp`
// listener, or any NVMe/TCP controller), lists its namespaces, writes a
// block to the first one, reads it back and puts the old contents back
// (docs/nvme.md "The rblk library as an NVMe/TCP host").
//
//   npx tsx examples/nvme.ts 'nvme+tcp://127.0.0.1:4420/nqn.2014-08.io.rblk:2026-11.io.rblk:disks'
import { randomBytes } from 'node:crypto';
import { connectNvme, RblkError } from '../initiator/index.js';

async function main(url: string): Promise<void> {
  const session = await connectNvme(url);
  session.on('pathDown', (p, why) => console.log(`path ${p.address}:${p.port} lost: ${why}`));
  session.on('reconnect', (p) => console.log(`path ${p.address}:${p.port} back, controller ${p.cntlid}`));
  try {
    console.log(`host ${session.hostnqn} connected to ${session.subnqn}`);
    for (const p of session.paths) console.log(`  ${p.address}:${p.port}: controller ${p.cntlid}, ${p.ioQueues} I/O queues, ANA ${JSON.stringify(p.ana)}`);
    const namespaces = await session.namespaces();
    for (const n of namespaces) console.log(`  namespace ${n.nsid}: ${n.blocks * n.blockSize} bytes, ${n.blockSize}-byte blocks${n.writeProtected ? ', write protected' : ''}${n.thin ? ', thin' : ''}`);
    if (namespaces.length === 0) return;
    const vol = await session.open(namespaces[0].nsid);
    if (vol.readOnly) {
      console.log(`namespace ${vol.nsid} is write protected; nothing to write`);
      return;
    }
    const at = vol.size - 4096;
    const old = await vol.read(at, 4096);
    const data = randomBytes(4096);
    await vol.write(at, data, { fua: true });
    console.log(`wrote and read back 4 KiB at ${at}: ${(await vol.read(at, 4096)).equals(data) ? 'same' : 'DIFFERENT'}`);
    await vol.write(at, old, { fua: true });
  } finally {
    await session.close();
  }
}

main(process.argv[2] ?? '').catch((e: unknown) => {
  console.error(e instanceof RblkError ? `${e.code}: ${e.message}` : e);
  process.exit(1);
});
