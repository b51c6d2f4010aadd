// ANA (Base 2.0 §8.20, docs/nvme.md "ANA"): a gateway's ALUA target port
// group is its ANA group. Identify reports ANA (CMIC bit 3, ANAGRPMAX,
// ANAGRPID), log page 0Ch gives the group's state and namespaces, and when a
// reload moves the group to standby, a held AER completes with ANA Change,
// the log says Inaccessible, and I/O is answered Asymmetric Access
// Inaccessible (path status 3h/02h), until the group is active again.
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { MemoryBackend } from '../../target/backend/memory.js';
import { NvmeTcpPortal } from '../../target/nvme/portal.js';
import { defaultNqn } from '../../target/nvme/subsystem.js';
import { TargetPortGroups } from '../../target/scsi/port-groups.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import { memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';
import { RawHost, rwSqe } from '../../bench/soak/nvme-raw-host.js';

test('the ALUA port group is the ANA group; standby becomes Inaccessible, with an ANA Change event', async (t) => {
  const groups = new TargetPortGroups({ local: { group: 3, state: 'active-optimized', relativePort: 3 }, peers: [{ group: 4, state: 'standby', relativePort: 4 }] });
  const server = new TargetServer(testServerOptions(memoryLog(), { limits: { queueDepth: 32, maxSessions: 16 } }), rblkConnections);
  t.teardown(() => server.close());
  const backend = new MemoryBackend({ size: 1 << 20, name: 'v0' });
  const lu = new LogicalUnit({ name: 'v0', backend, identifier: randomUUID(), portGroups: groups });
  server.addVolume({ name: 'v0', lun: 0, lu, access: () => 'rw' });
  const portal = await server.listenWith((host) => NvmeTcpPortal.listen(host, { address: '127.0.0.1', port: 0 }));
  const nqn = defaultNqn(TARGET_NAME);

  const admin = await RawHost.open(portal.port);
  t.teardown(() => admin.close());
  const cntlid = await admin.enable(nqn);
  t.true(cntlid >= 2 * 256 + 1 && cntlid <= 2 * 256 + 255, `CNTLID ${cntlid} from group 3's range`);
  const id = (await admin.admin(0x06, { length: 4096, cdw: { 10: 1 } })).data;
  t.is(id[76] & (1 << 3), 1 << 3, 'CMIC: ANA reporting');
  t.is(id.readUInt32LE(92) & (1 << 11), 1 << 11, 'OAES: ANA change notices');
  t.is(id.readUInt32LE(348), 3, 'ANAGRPMAX');
  t.is(id.readUInt32LE(352), 3, 'NANAGRPID');
  t.is((await admin.admin(0x06, { nsid: 1, length: 4096, cdw: { 10: 0 } })).data.readUInt32LE(92), 3, 'ANAGRPID');
  const ana = async (): Promise<{ chg: bigint; groups: number; id: number; nnsid: number; state: number; nsid: number }> => {
    const d = (await admin.admin(0x02, { length: 64, cdw: { 10: 0x0c | (15 << 16) } })).data;
    return { chg: d.readBigUInt64LE(0), groups: d.readUInt16LE(8), id: d.readUInt32LE(16), nnsid: d.readUInt32LE(20), state: d[32] & 0xf, nsid: d.readUInt32LE(48) };
  };
  const before = await ana();
  t.deepEqual({ ...before, chg: 0n }, { chg: 0n, groups: 1, id: 3, nnsid: 1, state: 0x01, nsid: 1 });

  const io = await RawHost.open(portal.port);
  t.teardown(() => io.close());
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 16, subnqn: nqn, cntlid })).statusField, 0);
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512))).statusField, 0);

  // ANA change notices on (AEC bit 11), an AER held; the group goes to standby (as a reload does).
  t.is((await admin.admin(0x09, { cdw: { 10: 0x0b, 11: 1 << 11 } })).statusField, 0);
  const aerCid = admin.nextCid();
  const aerSqe = rwSqe(0x0c, aerCid, 0, 0, 1, 0).fill(0, 4, 64);
  const aer = admin.command(aerSqe);
  groups.update({ local: { group: 3, state: 'standby', relativePort: 3 }, peers: [{ group: 4, state: 'active-optimized', relativePort: 4 }] });
  const blocked = await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512));
  t.is(blocked.sct, 3);
  t.is(blocked.sc, 0x02, 'Asymmetric Access Inaccessible');
  t.false(blocked.dnr);
  // The next Keep Alive notices the change.
  admin.sendCapsule(rwSqe(0x18, admin.nextCid(), 0, 0, 1, 0).fill(0, 4, 64));
  const done = await aer;
  t.is(done.dw0, 0x0c0302, 'Notice, ANA Change, log page 0Ch');
  t.is((await admin.next()).type, 0x05, "the Keep Alive's response");
  const after = await ana();
  t.is(after.state, 0x03, 'Inaccessible');
  t.true(after.chg > before.chg, 'CHGCNT moved');
  groups.update({ local: { group: 3, state: 'active-optimized', relativePort: 3 }, peers: [] });
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512))).statusField, 0);
  t.is((await ana()).state, 0x01);
});
