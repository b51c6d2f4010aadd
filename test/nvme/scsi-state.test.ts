// The NVMe command set obeys the volume state the SCSI side keeps (docs/nvme.md
// "Command sets side by side"): a persistent reservation taken over SCSI (this
// NVMe host is no registrant) answers its writes, or under Exclusive Access
// also its reads, with Reservation Conflict; Flush stays allowed; a RESERVE(6)
// keeps it out too; once released, I/O runs again.
import test from 'ava';
import { PrType } from '../../protocol/scsi/opcodes.js';
import { openHostQueues, startNvme } from './fixture.js';
import { rwSqe } from '../../bench/soak/nvme-raw-host.js';

test('a SCSI reservation held by another initiator: Reservation Conflict for NVMe I/O it governs', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }]);
  t.teardown(() => f.close());
  const { admin, io } = await openHostQueues(t, f);
  const write = () => io.command(rwSqe(0x01, io.nextCid(), 1, 0, 1, 512, { inCapsule: true }), { data: Buffer.alloc(512, 3), inCapsule: true });
  const read = () => io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512));
  const flush = () => io.admin(0x00, { nsid: 1 });

  const r = f.volumes[0]!.lu.reservations;
  const other = { nexusKey: 'iqn.2026-12.org.example:other\u0000iscsi:127.0.0.1:3260', initiator: 'iqn.2026-12.org.example:other' };
  await r.register(other, 0n, 0xabcn, false);
  await r.reserve(other.nexusKey, 0xabcn, PrType.WRITE_EXCLUSIVE, 0);
  t.is((await write()).sc, 0x83, 'Write Exclusive: writes conflict');
  t.is((await io.admin(0x08, { nsid: 1, cdw: { 10: 0, 12: 0 } })).sc, 0x83, 'and Write Zeroes');
  t.is((await read()).statusField, 0, 'reads do not');
  t.is((await flush()).statusField, 0, 'Flush is allowed');
  await r.release(other.nexusKey, 0xabcn, PrType.WRITE_EXCLUSIVE, 0);
  await r.reserve(other.nexusKey, 0xabcn, PrType.EXCLUSIVE_ACCESS, 0);
  t.is((await read()).sc, 0x83, 'Exclusive Access: reads conflict too');
  await r.clear(other.nexusKey, 0xabcn);
  t.is((await write()).statusField, 0, 'released: writes run');
  r.reserveLegacy(other.nexusKey);
  t.is((await read()).sc, 0x83, 'RESERVE(6) held by another: conflict');
  r.releaseLegacy(other.nexusKey);
  t.is((await read()).statusField, 0);
});

// SWP, the Control mode page's software write protect that a SCSI initiator sets by MODE SELECT
// (SPC-5 7.5.8, target/scsi/access.ts): the volume is write-protected for NVMe hosts too.
test('software write protect set on the SCSI side: Namespace Is Write Protected for NVMe writes and in NSATTR, reads run, and clearing it gives writes back', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }]);
  t.teardown(() => f.close());
  const { admin, io } = await openHostQueues(t, f);
  const nsattr = async (): Promise<number> => ((await admin.admin(0x06, { nsid: 1, length: 4096, cdw: { 10: 0 } })).data?.[99] ?? -1) & 1;
  const write = (fill: number) => io.command(rwSqe(0x01, io.nextCid(), 1, 0, 1, 512, { inCapsule: true }), { data: Buffer.alloc(512, fill), inCapsule: true });
  const read = () => io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512));
  t.is((await write(1)).statusField, 0);
  const lu = f.volumes[0]!.lu;
  const scsi = { sessionId: 'swp', initiator: 'iqn.2026-12.org.example:scsi' };
  t.is(await nsattr(), 0, 'Identify Namespace: NSATTR not write protected');
  lu.setModes({ ...lu.modes, swp: true }, scsi);
  t.is(await nsattr(), 1, 'NSATTR write protected while SWP is set');
  const refused = await write(2);
  t.is(refused.sct, 0);
  t.is(refused.sc, 0x20, 'Namespace Is Write Protected');
  t.is((await io.admin(0x08, { nsid: 1, cdw: { 10: 0, 12: 0 } })).sc, 0x20, 'and Write Zeroes');
  const got = await read();
  t.is(got.statusField, 0, 'reads run');
  t.true(got.data?.equals(Buffer.alloc(512, 1)), 'the refused writes changed nothing');
  lu.setModes({ ...lu.modes, swp: false }, scsi);
  t.is(await nsattr(), 0);
  t.is((await write(3)).statusField, 0, 'cleared: writes run');
});
