// NVMe reservations on the volume's persistent reservation state (docs/nvme.md
// "Reservations", NVM Command Set 1.0 §3.2.5-§3.2.8): two hosts register,
// acquire, conflict, report, preempt, release and clear, and the SCSI side
// sees the same registrations and reservation.
import test from 'ava';
import { buildSqe, reservationKeys as keys } from '../../protocol/nvme/command.js';
import { PrType } from '../../protocol/scsi/opcodes.js';
import { B_NQN, openHostQueues, reservationCommand as resv, startNvme } from './fixture.js';
import { HOST_ID, HOST_NQN, RawHost, rwSqe, type Result } from '../../bench/soak/nvme-raw-host.js';

test('Reservation Register, Acquire, Report, preempt, Release and Clear, shared with the SCSI state', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }]);
  t.teardown(() => f.close());
  const queue = (hostnqn: string) => openHostQueues(t, f, hostnqn);
  const a = await queue(HOST_NQN);
  const b = await queue(B_NQN);
  const write = (h: RawHost) => h.command(rwSqe(0x01, h.nextCid(), 1, 0, 1, 512, { inCapsule: true }), { data: Buffer.alloc(512, 9), inCapsule: true });
  const read = (h: RawHost) => h.command(rwSqe(0x02, h.nextCid(), 1, 0, 1, 512));

  t.is((await resv(a.io, 0x0d, 0, keys(0n, 0xan))).statusField, 0, 'A registers key A');
  t.is((await resv(a.io, 0x0d, 0, keys(0n, 0xan))).statusField, 0, 'again with the same key');
  t.is((await resv(a.io, 0x0d, 0, keys(0n, 0xcn))).sc, 0x83, 'with another key: conflict');
  t.is((await resv(a.io, 0x11, 1 << 8, keys(0xan))).statusField, 0, 'A acquires Write Exclusive');
  t.is(f.volumes[0]!.lu.reservations.reservation?.type, PrType.WRITE_EXCLUSIVE, 'the SCSI state holds it');
  t.is((await write(b.io)).sc, 0x83, 'B may not write');
  t.is((await read(b.io)).statusField, 0, 'B may read');
  t.is((await write(a.io)).statusField, 0, 'A may write');

  const report = async (h: RawHost) => {
    const r = await h.command(buildSqe({ opcode: 0x0e, cid: h.nextCid(), nsid: 1, sgl: { id: 0x5a, length: 256 }, cdw: { 10: 63, 11: 1 } }));
    t.is(r.statusField, 0);
    const d = r.data;
    return { rtype: d[4], regctl: d.readUInt16LE(5), cntlid: d.readUInt16LE(64), rcsts: d[66], rkey: d.readBigUInt64LE(72), hostid: d.subarray(80, 96) };
  };
  const fromA = await report(a.io);
  t.deepEqual({ ...fromA, hostid: fromA.hostid.equals(HOST_ID) }, { rtype: 1, regctl: 1, cntlid: a.cntlid, rcsts: 1, rkey: 0xan, hostid: true });
  const fromB = await report(b.io);
  t.is(fromB.cntlid, 0xffff, "another host's registration has no CNTLID of B's");

  t.is((await resv(b.io, 0x0d, 0, keys(0n, 0xbn))).statusField, 0, 'B registers');
  t.is((await resv(b.io, 0x11, 1 | (2 << 8), keys(0xbn, 0xan))).statusField, 0, 'B preempts A, taking Exclusive Access');
  t.is((await read(a.io)).sc, 0x83, 'A, preempted and unregistered, may not even read');
  t.is((await resv(b.io, 0x15, 0 | (2 << 8), keys(0xbn).subarray(0, 8))).statusField, 0, 'B releases');
  t.is((await write(a.io)).statusField, 0);
  t.is((await resv(b.io, 0x15, 1, keys(0xbn).subarray(0, 8))).statusField, 0, 'B clears');
  t.is(f.volumes[0]!.lu.reservations.registrants.length, 0);
  t.is((await resv(b.io, 0x11, 9 << 8, keys(0xbn))).sc, 0x02, 'an unknown RTYPE');
  const ns = (await a.admin.admin(0x06, { nsid: 1, length: 4096, cdw: { 10: 0 } })).data;
  t.is(ns[31], 0x7e, 'RESCAP');
});
