// Reservation notifications (Base 2.0 §8.19 "Reservation Notifications"):
// the Reservation Notification log page (80h), the Reservation Notification
// Mask feature (82h) and the Asynchronous Event "Reservation Log Page
// Available" (type 6h, information 00h, log 80h; §5.2), seen by a raw host
// written from the spec's layouts while another host preempts, releases and
// clears (docs/nvme.md "Reservations").
import test from 'ava';
import { buildSqe, reservationKeys as keys } from '../../protocol/nvme/command.js';
import { PrType } from '../../protocol/scsi/opcodes.js';
import { B_NQN, openHostQueues, reservationCommand as resv, startNvme } from './fixture.js';
import { decodeCqe, HOST_NQN, RawHost, rwSqe, type Result } from '../../bench/soak/nvme-raw-host.js';

interface Page {
  lpc: bigint;
  type: number;
  nalp: number;
  nsid: number;
  /** Every byte the layout leaves reserved is zero. */
  reservedZero: boolean;
}

test('log 80h after another host preempts, releases and clears; the mask (82h) and the AER', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }]);
  t.teardown(() => f.close());
  const host = (hostnqn: string) => openHostQueues(t, f, hostnqn);
  const a = await host(HOST_NQN);
  const b = await host(B_NQN);
  // Register (0Dh) RREGA 0 with NRKEY; Acquire (11h) RACQA 0/1 with RTYPE; Release (15h) RRELA 0/1 (NVM 1.0 §3.2.5-§3.2.8).
  const register = (h: RawHost, key: bigint) => resv(h, 0x0d, 0, keys(0n, key));
  const acquire = (h: RawHost, rtype: number, key: bigint) => resv(h, 0x11, rtype << 8, keys(key));
  const preempt = (h: RawHost, rtype: number, key: bigint, victim: bigint) => resv(h, 0x11, 1 | (rtype << 8), keys(key, victim));
  const release = (h: RawHost, rtype: number, key: bigint) => resv(h, 0x15, rtype << 8, keys(key).subarray(0, 8));
  const clear = (h: RawHost, key: bigint) => resv(h, 0x15, 1, keys(key).subarray(0, 8));
  // Get Log Page (02h) LID 80h, NUMDL 15 (64 bytes, 0's based dwords) (Base 2.0 §5.16).
  const log = async (h: RawHost): Promise<Page> => {
    const r = await h.admin(0x02, { nsid: 0xffffffff, length: 64, cdw: { 10: 0x80 | (15 << 16) } });
    t.is(r.statusField, 0);
    const d = r.data;
    t.is(d.length, 64);
    const reservedZero = d.subarray(10, 12).equals(Buffer.alloc(2)) && d.subarray(16).equals(Buffer.alloc(48));
    return { lpc: d.readBigUInt64LE(0), type: d[8], nalp: d[9], nsid: d.readUInt32LE(12), reservedZero };
  };
  const empty: Page = { lpc: 0n, type: 0, nalp: 0, nsid: 0, reservedZero: true };
  // Asynchronous Event Request (0Ch): held until an event; its CQE DW0 is the event.
  const holdAer = (h: RawHost): number => {
    const cid = h.nextCid();
    h.sendCapsule(rwSqe(0x0c, cid, 0, 0, 1, 0).fill(0, 4, 64));
    return cid;
  };
  const aerDone = async (h: RawHost, cid: number): Promise<number> => {
    const p = await h.next();
    t.is(p.type, 0x05);
    const cqe = decodeCqe(p.raw, 8);
    t.is(cqe.cid, cid);
    t.is(cqe.statusField, 0);
    return cqe.dw0;
  };
  // Set/Get Features (09h/0Ah) FID 82h, NSID, CDW11 REGPRE bit 1, RESREL bit 2, RESPRE bit 3.
  const setMask = (h: RawHost, nsid: number, mask: number) => h.admin(0x09, { nsid, cdw: { 10: 0x82, 11: mask } });
  const getMask = (h: RawHost, nsid: number) => h.admin(0x0a, { nsid, cdw: { 10: 0x82 } });

  t.deepEqual(await log(a.admin), empty, 'nothing yet: the empty page');
  t.is((await register(a.io, 0xan)).statusField, 0);
  t.is((await register(b.io, 0xbn)).statusField, 0);
  t.is((await acquire(a.io, 3, 0xan)).statusField, 0, 'A holds Write Exclusive - Registrants Only');

  // B preempts A: A's registration is preempted (type 1h), B, who did it, hears nothing.
  let aer = holdAer(a.admin);
  t.is((await preempt(b.io, 1, 0xbn, 0xan)).statusField, 0);
  t.is(await aerDone(a.admin, aer), 0x800006, 'I/O Command Set specific (6h), Reservation Log Page Available (00h), log 80h');
  t.deepEqual(await log(a.admin), { lpc: 1n, type: 1, nalp: 0, nsid: 1, reservedZero: true }, 'Registration Preempted on namespace 1');
  t.deepEqual(await log(a.admin), empty, 'read once, the page is gone');
  t.deepEqual(await log(b.admin), empty, 'the preempting host gets no page');

  // Masked (REGPRE): the same preemption makes no page and no event.
  t.is((await setMask(a.admin, 1, 1 << 1)).statusField, 0);
  t.is((await getMask(a.admin, 1)).dw0, 1 << 1);
  aer = holdAer(a.admin);
  t.is((await register(a.io, 0xan)).statusField, 0);
  t.is((await preempt(b.io, 1, 0xbn, 0xan)).statusField, 0);
  // Had the AER completed, its CQE would come before this command's and command() would throw.
  t.deepEqual(await log(a.admin), empty, 'masked: no page');

  // Unmasked for every namespace (NSID FFFFFFFFh): a release of a registrants-only reservation (2h), then a clear (3h).
  t.is((await setMask(a.admin, 0xffffffff, 0)).statusField, 0);
  t.is((await getMask(a.admin, 1)).dw0, 0);
  t.is((await register(a.io, 0xan)).statusField, 0);
  t.is((await release(b.io, 1, 0xbn)).statusField, 0, 'a Write Exclusive release: no notice (not a registrants type)');
  t.is((await acquire(b.io, 3, 0xbn)).statusField, 0);
  t.is((await release(b.io, 3, 0xbn)).statusField, 0);
  t.is(await aerDone(a.admin, aer), 0x800006, 'the AER held since the masked preemption completes now');
  t.is((await clear(b.io, 0xbn)).statusField, 0);
  t.deepEqual(await log(a.admin), { lpc: 2n, type: 2, nalp: 1, nsid: 1, reservedZero: true }, 'Reservation Released, one more waiting');
  t.deepEqual(await log(a.admin), { lpc: 3n, type: 3, nalp: 0, nsid: 1, reservedZero: true }, 'Reservation Preempted (the clear)');
  t.deepEqual(await log(a.admin), empty);
  t.deepEqual(await log(b.admin), empty);

  // The feature's errors: an inactive namespace, and Get with the broadcast NSID.
  t.is((await setMask(a.admin, 9, 2)).sc, 0x0b, 'Invalid Namespace or Format');
  t.is((await getMask(a.admin, 0xffffffff)).sc, 0x02, 'Invalid Field in Command');
});

test('more notices than a controller keeps: the oldest go, and LPC shows the gap', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }]);
  t.teardown(() => f.close());
  const open = (hostnqn: string) => openHostQueues(t, f, hostnqn);
  const a = await open(HOST_NQN);
  const b = await open(B_NQN);
  const resv = (h: RawHost, opcode: number, c10: number, k1: bigint, k2 = 0n): Promise<Result> => {
    const d = Buffer.alloc(16);
    d.writeBigUInt64LE(k1, 0);
    d.writeBigUInt64LE(k2, 8);
    return h.command(buildSqe({ opcode, cid: h.nextCid(), nsid: 1, sgl: { id: 0x01, length: 16 }, cdw: { 10: c10 } }), { data: d, inCapsule: true });
  };
  t.is((await resv(b.io, 0x0d, 0, 0n, 0xbn)).statusField, 0);
  // 70 preemptions of A, each a Registration Preempted page for A; the controller keeps 64.
  for (let i = 0; i < 70; i++) {
    t.is((await resv(a.io, 0x0d, 0, 0n, 0xan)).statusField, 0);
    t.is((await resv(b.io, 0x11, 1 | (1 << 8), 0xbn, 0xan)).statusField, 0);
  }
  const first = (await a.admin.admin(0x02, { length: 64, cdw: { 10: 0x80 | (15 << 16) } })).data;
  t.is(first.readBigUInt64LE(0), 7n, 'pages 1-6 were dropped: the first kept is LPC 7');
  t.is(first[8], 1);
  t.is(first[9], 63, 'NALP: 63 more');
});

test("a SCSI initiator's preemption on the shared state: the NVMe host's log 80h says Registration Preempted", async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }]);
  t.teardown(() => f.close());
  const { admin, io } = await openHostQueues(t, f);
  const d = Buffer.alloc(16);
  d.writeBigUInt64LE(0xan, 8);
  t.is((await io.command(buildSqe({ opcode: 0x0d, cid: io.nextCid(), nsid: 1, sgl: { id: 0x01, length: 16 }, cdw: { 10: 0 } }), { data: d, inCapsule: true })).statusField, 0);
  // The SCSI side's PERSISTENT RESERVE OUT, as test/nvme/scsi-state.test.ts drives it: register, then PREEMPT the NVMe host's key.
  const r = f.volumes[0]!.lu.reservations;
  const other = { nexusKey: 'iqn.2026-12.org.example:other\u0000iscsi:127.0.0.1:3260', initiator: 'iqn.2026-12.org.example:other' };
  await r.register(other, 0n, 0xabcn, false);
  await r.preempt(other.nexusKey, 0xabcn, 0xan, PrType.WRITE_EXCLUSIVE, 0);
  const page = (await admin.admin(0x02, { length: 64, cdw: { 10: 0x80 | (15 << 16) } })).data;
  t.deepEqual([page.readBigUInt64LE(0), page[8], page[9], page.readUInt32LE(12)], [1n, 1, 0, 1], 'LPC 1, Registration Preempted, none more, namespace 1');
});
