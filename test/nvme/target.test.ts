// rblkd's NVMe/TCP listener against a host written from the specs
// (bench/soak/nvme-raw-host.ts): ICReq/ICResp with and without digests, Fabrics Connect of
// the admin and an I/O queue, properties, Identify, log pages, features,
// Asynchronous Events, and NVM I/O (in-capsule, R2T over several H2CData
// PDUs, C2HData with SUCCESS), with the statuses of the error paths
// (NVMe TCP 1.0 §3, NVMe-oF 1.1 §3, Base 2.0 §5, NVM Command Set 1.0 §3).
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { exportMemoryVolume } from '../helpers/target-fixture.js';
import { startNvme, type NvmeFixture } from './fixture.js';
import { HOST_ID, RawHost, rwSqe } from '../../bench/soak/nvme-raw-host.js';

const SIZE = 8 << 20;
let f: NvmeFixture;
const hosts: RawHost[] = [];

test.before(async () => {
  f = await startNvme([
    { name: 'v0', lun: 0, size: SIZE },
    { name: 'v3', lun: 3, size: 2 << 20, blockSize: 4096 },
    { name: 'ro', lun: 5, size: 1 << 20, readOnly: true },
    { name: 'other', lun: 7, size: 1 << 20, acl: { 'nqn.2014-08.org.example:someone-else': 'rw' } },
  ]);
});
test.after.always(async () => {
  for (const h of hosts) h.close();
  await f.close();
});

async function open(): Promise<RawHost> {
  const h = await RawHost.open(f.port);
  hosts.push(h);
  return h;
}

/** An enabled controller and one I/O queue. */
async function session(o: { hdgst?: boolean; ddgst?: boolean; cattr?: number } = {}): Promise<{ admin: RawHost; io: RawHost; cntlid: number }> {
  const admin = await open();
  const cntlid = await admin.enable(f.nqn, o);
  const io = await open();
  await io.initialize(o);
  const c = await io.connect({ qid: 1, sqsize: 32, subnqn: f.nqn, cntlid, cattr: o.cattr });
  if (c.statusField !== 0) throw new Error(`I/O Connect failed: ${c.statusField.toString(16)}`);
  return { admin, io, cntlid };
}

test('ICReq/ICResp without digests: PFV 0, CPDA 0, DGST 0, MAXH2CDATA ≥ 4096', async (t) => {
  const h = await open();
  const r = await h.initialize();
  t.is(r.type, 0x01);
  t.is(r.hlen, 128);
  t.is(r.plen, 128);
  t.is(r.pfv, 0);
  t.is(r.cpda, 0);
  t.is(r.dgst, 0);
  t.true(r.maxH2CData >= 4096 && r.maxH2CData % 4 === 0);
});

test('ICReq/ICResp with header and data digests: granted, and a session runs with both', async (t) => {
  const { io } = await session({ hdgst: true, ddgst: true });
  t.true(io.hdgst && io.ddgst);
  const data = randomBytes(64 * 1024);
  t.is((await io.command(rwSqe(0x01, io.nextCid(), 1, 100, 128, data.length), { data })).statusField, 0);
  const r = await io.command(rwSqe(0x02, io.nextCid(), 1, 100, 128, data.length));
  t.is(r.statusField, 0);
  t.true(r.data.equals(data));
  // A corrupted data digest on in-capsule data: Transient Transport Error (0h/22h), the queue stays.
  const sqe = rwSqe(0x01, io.nextCid(), 1, 0, 1, 512, { inCapsule: true });
  const h = Buffer.alloc(72);
  h[0] = 0x04;
  sqe.copy(h, 8);
  const pdu = io.frame(h, Buffer.alloc(512, 1));
  pdu[pdu.length - 1] ^= 0xff;
  io.write(pdu);
  const p = await io.next();
  t.is(p.type, 0x05);
  t.is((p.raw.readUInt16LE(8 + 14) >> 1) & 0xff, 0x22);
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, 100, 1, 512))).statusField, 0);
});

test('Connect: CNTLID allocated for FFFFh; I/O queue joins it; wrong CNTLID or subsystem is refused', async (t) => {
  const { cntlid, io } = await session();
  t.true(cntlid >= 1 && cntlid <= 0xffef);
  t.is(io.cid > 0, true);
  const other = await open();
  await other.initialize();
  const bad = await other.connect({ qid: 1, sqsize: 32, subnqn: f.nqn, cntlid: (cntlid + 100) & 0xffff });
  t.is(bad.sct, 1);
  t.is(bad.sc, 0x82); // Connect Invalid Parameters
  t.is(bad.dw0 & 0xffff, 16); // IPO: CNTLID in the data
  t.is((bad.dw0 >> 16) & 1, 1); // IATTR: in the data
  const wrong = await open();
  await wrong.initialize();
  const w = await wrong.connect({ qid: 0, sqsize: 32, subnqn: 'nqn.2014-08.org.example:nope' });
  t.is(w.sc, 0x82);
  t.is(w.dw0 & 0xffff, 256);
  // A command before Connect: Command Sequence Error.
  const early = await open();
  await early.initialize();
  t.is((await early.admin(0x06, { length: 4096, cdw: { 10: 1 } })).sc, 0x0c);
});

test('Property Get/Set: CAP, VS 2.0, CC.EN → CSTS.RDY, CC.SHN → CSTS.SHST complete', async (t) => {
  const h = await open();
  await h.initialize();
  t.is((await h.connect({ qid: 0, sqsize: 32, subnqn: f.nqn })).statusField, 0);
  const cap = await h.propertyGet(0x00, true);
  const capv = BigInt(cap.dw0) | (BigInt(cap.dw1) << 32n);
  t.true(Number(capv & 0xffffn) >= 31, 'MQES');
  t.is((capv >> 16n) & 1n, 1n, 'CQR');
  t.is((capv >> 37n) & 1n, 1n, 'CSS NVM');
  t.is((await h.propertyGet(0x08, false)).dw0, 0x00020000);
  t.is((await h.propertyGet(0x1c, false)).dw0 & 1, 0, 'not ready before CC.EN');
  // Identify before CC.EN: Command Sequence Error.
  t.is((await h.admin(0x06, { length: 4096, cdw: { 10: 1 } })).sc, 0x0c);
  const cc = 1 | (6 << 16) | (4 << 20);
  t.is((await h.propertySet(0x14, cc)).statusField, 0);
  t.is((await h.propertyGet(0x14, false)).dw0, cc);
  t.is((await h.propertyGet(0x1c, false)).dw0 & 1, 1, 'CSTS.RDY');
  t.is((await h.propertySet(0x14, cc | (1 << 14))).statusField, 0);
  t.is(((await h.propertyGet(0x1c, false)).dw0 >> 2) & 3, 2, 'CSTS.SHST shutdown complete');
});

test('Identify Controller: CNTLID, VER, SUBNQN, IOCCSZ/IORCSZ/ICDOFF, SGLS, SQES/CQES, ONCS, CNTRLTYPE', async (t) => {
  const { admin, cntlid } = await session();
  const r = await admin.admin(0x06, { length: 4096, cdw: { 10: 0x01 } });
  t.is(r.statusField, 0);
  const d = r.data;
  t.is(d.length, 4096);
  t.is(d.readUInt16LE(78), cntlid);
  t.is(d.readUInt32LE(80), 0x00020000);
  t.is(d.subarray(768, 768 + 256).toString('utf8').replace(/\0+$/, ''), f.nqn);
  t.is(d.readUInt32LE(1792), (64 + 8192) / 16);
  t.is(d.readUInt32LE(1796), 1);
  t.is(d.readUInt16LE(1800), 0);
  t.is(d.readUInt32LE(536) & 3, 1);
  t.is(d[512], 0x66);
  t.is(d[513], 0x44);
  t.is(d.readUInt16LE(520) & 0x8d, 0x8d, 'Compare, DSM, Write Zeroes, Verify');
  t.is(d[111], 1);
  t.true(d.readUInt16LE(514) >= 32, 'MAXCMD');
  t.true(d.readUInt32LE(516) >= 8, 'NN');
  t.is(d.readUInt32LE(540), 256, 'MNAN: one namespace per LUN');
  t.is(d[77], 8, 'MDTS 2^8 × 4 KiB = limits.max_io 1 MiB');
  t.true(d.readUInt16LE(320) > 0, 'KAS');
  t.is(d.subarray(4, 24).toString('ascii').trim().length > 0, true, 'SN');
});

test('Identify Namespace, active namespace list, namespace descriptors (NGUID/UUID stable)', async (t) => {
  const { admin } = await session();
  const ns = (await admin.admin(0x06, { nsid: 1, length: 4096, cdw: { 10: 0 } })).data;
  t.is(ns.readBigUInt64LE(0), BigInt(SIZE / 512), 'NSZE');
  t.is(ns.readBigUInt64LE(8), BigInt(SIZE / 512), 'NCAP');
  t.is(ns[26] & 0xf, 0, 'FLBAS');
  t.is((ns.readUInt32LE(128) >> 16) & 0xff, 9, 'LBADS 512');
  const ns4 = (await admin.admin(0x06, { nsid: 4, length: 4096, cdw: { 10: 0 } })).data;
  t.is((ns4.readUInt32LE(128) >> 16) & 0xff, 12, 'LBADS 4096');
  const ro = (await admin.admin(0x06, { nsid: 6, length: 4096, cdw: { 10: 0 } })).data;
  t.is(ro[99] & 1, 1, 'NSATTR write protected');
  const nguid = ns.subarray(104, 120);
  t.false(nguid.equals(Buffer.alloc(16)));
  const list = (await admin.admin(0x06, { length: 4096, cdw: { 10: 0x02 } })).data;
  const ids = [];
  for (let i = 0; i < 4096 && list.readUInt32LE(i) !== 0; i += 4) ids.push(list.readUInt32LE(i));
  t.deepEqual(ids, [1, 4, 6], 'LUN + 1, ascending, without the volume this host may not see');
  const after = (await admin.admin(0x06, { nsid: 1, length: 4096, cdw: { 10: 0x02 } })).data;
  t.is(after.readUInt32LE(0), 4);
  const desc = (await admin.admin(0x06, { nsid: 1, length: 4096, cdw: { 10: 0x03 } })).data;
  const found = new Map<number, Buffer>();
  for (let at = 0; desc[at] !== 0; at += 4 + desc[at + 1]) found.set(desc[at], desc.subarray(at + 4, at + 4 + desc[at + 1]));
  t.true(found.get(2)!.equals(nguid), 'NGUID as in Identify Namespace');
  t.true(found.get(3)!.equals(f.volumes[0].lu.identifier), 'UUID: the volume identifier');
  t.deepEqual([...found.get(4)!], [0], 'CSI NVM');
  const again = (await admin.admin(0x06, { nsid: 1, length: 4096, cdw: { 10: 0 } })).data;
  t.true(again.subarray(104, 120).equals(nguid));
  t.is((await admin.admin(0x06, { nsid: 8, length: 4096, cdw: { 10: 0x03 } })).sc, 0x0b, 'another host\'s namespace');
});

test('write then read back: in-capsule, R2T over several H2CData PDUs (> MAXH2CDATA), C2HData', async (t) => {
  const { io } = await session();
  const small = randomBytes(4096);
  const w1 = await io.command(rwSqe(0x01, io.nextCid(), 1, 8, 8, 4096, { inCapsule: true }), { data: small, inCapsule: true });
  t.is(w1.statusField, 0);
  t.is(w1.r2ts, 0);
  const big = randomBytes(512 * 1024);
  t.true(big.length > io.maxH2CData);
  const w2 = await io.command(rwSqe(0x01, io.nextCid(), 1, 2048, 1024, big.length), { data: big });
  t.is(w2.statusField, 0);
  t.is(w2.r2ts, 1);
  const r1 = await io.command(rwSqe(0x02, io.nextCid(), 1, 8, 8, 4096));
  t.true(r1.data.equals(small));
  const r2 = await io.command(rwSqe(0x02, io.nextCid(), 1, 2048, 1024, big.length));
  t.is(r2.statusField, 0);
  t.false(r2.bySuccessFlag);
  t.true(r2.c2hPdus >= 4);
  t.true(r2.data.equals(big));
  // The bytes are on the volume's backend where the SCSI side would read them.
  const back = Buffer.alloc(big.length);
  await f.volumes[0].backend.read(back, 2048 * 512);
  t.true(back.equals(big));
  // Writes in H2CData PDUs smaller than MAXH2CDATA are taken too.
  const w3 = await io.command(rwSqe(0x01, io.nextCid(), 4, 0, 16, 65536, { fua: true }), { data: big.subarray(0, 65536), chunk: 4096 });
  t.is(w3.statusField, 0);
  t.true((await io.command(rwSqe(0x02, io.nextCid(), 4, 0, 16, 65536))).data.equals(big.subarray(0, 65536)));
});

test('C2HData with SUCCESS in place of a CapsuleResp when the host disabled SQ flow control', async (t) => {
  const { io } = await session({ cattr: 4 });
  const data = randomBytes(8192);
  t.is((await io.command(rwSqe(0x01, io.nextCid(), 1, 300, 16, 8192), { data })).statusField, 0);
  const r = await io.command(rwSqe(0x02, io.nextCid(), 1, 300, 16, 8192));
  t.true(r.bySuccessFlag);
  t.true(r.data.equals(data));
  // The next command's answer is its own: nothing was left over.
  t.is((await io.command(rwSqe(0x00, io.nextCid(), 1, 0, 1, 0))).statusField, 0);
});

test('Flush, Write Zeroes, Dataset Management deallocate, Compare, Verify', async (t) => {
  const { io } = await session();
  const data = randomBytes(16 * 512);
  t.is((await io.command(rwSqe(0x01, io.nextCid(), 1, 500, 16, data.length), { data })).statusField, 0);
  t.is((await io.admin(0x00, { nsid: 1 })).statusField, 0, 'Flush');
  t.is((await io.admin(0x00, { nsid: 0xffffffff })).statusField, 0, 'Flush of every namespace');
  t.is((await io.command(rwSqe(0x05, io.nextCid(), 1, 500, 16, data.length), { data })).statusField, 0, 'Compare equal');
  const other = Buffer.from(data);
  other[100] ^= 1;
  const miss = await io.command(rwSqe(0x05, io.nextCid(), 1, 500, 16, data.length), { data: other });
  t.is(miss.sct, 2);
  t.is(miss.sc, 0x85, 'Compare Failure');
  t.is((await io.admin(0x0c, { nsid: 1, cdw: { 10: 500, 12: 15 } })).statusField, 0, 'Verify');
  // Write Zeroes over blocks 504..507.
  t.is((await io.admin(0x08, { nsid: 1, cdw: { 10: 504, 12: 3 } })).statusField, 0);
  const r = (await io.command(rwSqe(0x02, io.nextCid(), 1, 500, 16, data.length))).data;
  t.true(r.subarray(0, 4 * 512).equals(data.subarray(0, 4 * 512)));
  t.true(r.subarray(4 * 512, 8 * 512).equals(Buffer.alloc(4 * 512)));
  t.true(r.subarray(8 * 512).equals(data.subarray(8 * 512)));
  // Dataset Management, AD: one range of 8 blocks at 500 (context 0-3, length 4-7, SLBA 8-15).
  const range = Buffer.alloc(16);
  range.writeUInt32LE(8, 4);
  range.writeBigUInt64LE(500n, 8);
  const dsm = await io.command(buildDsm(io.nextCid(), 1, 1), { data: range, inCapsule: true });
  t.is(dsm.statusField, 0);
  const after = (await io.command(rwSqe(0x02, io.nextCid(), 1, 500, 16, data.length))).data;
  if (f.volumes[0].lu.thin) t.true(after.subarray(0, 8 * 512).equals(Buffer.alloc(8 * 512)), 'deallocated blocks read as zeroes (DLFEAT)');
  t.true(after.subarray(8 * 512).equals(data.subarray(8 * 512)));
  const outside = Buffer.alloc(16);
  outside.writeUInt32LE(8, 4);
  outside.writeBigUInt64LE(BigInt(SIZE / 512 - 4), 8);
  t.is((await io.command(buildDsm(io.nextCid(), 1, 1), { data: outside, inCapsule: true })).sc, 0x80);
});

function buildDsm(cid: number, nsid: number, ranges: number): Buffer {
  const b = rwSqe(0x09, cid, nsid, 0, 1, ranges * 16, { inCapsule: true });
  b.writeUInt32LE(ranges - 1, 40); // NR
  b.writeUInt32LE(1 << 2, 44); // AD
  b.writeUInt32LE(0, 48);
  return b;
}

test('error statuses: LBA Out of Range, Invalid Namespace, oversized transfer, write protected, SGL length', async (t) => {
  const { io } = await session();
  const blocks = SIZE / 512;
  const oor = await io.command(rwSqe(0x02, io.nextCid(), 1, blocks - 1, 2, 1024));
  t.is(oor.sct, 0);
  t.is(oor.sc, 0x80);
  t.true(oor.dnr);
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, blocks, 1, 512))).sc, 0x80);
  t.is((await io.command(rwSqe(0x0c, io.nextCid(), 1, 2 ** 40, 1, 0))).sc, 0x80, 'Verify past the end');
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 99, 0, 1, 512))).sc, 0x0b, 'no such namespace');
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 8, 0, 1, 512))).sc, 0x0b, "another host's namespace");
  const huge = await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 4096, 4096 * 512));
  t.is(huge.sc, 0x02, 'a transfer beyond MDTS: Invalid Field in Command');
  const ro = await io.command(rwSqe(0x01, io.nextCid(), 6, 0, 1, 512, { inCapsule: true }), { data: Buffer.alloc(512), inCapsule: true });
  t.is(ro.sc, 0x20, 'Namespace is Write Protected');
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 2, 512))).sc, 0x0f, 'SGL shorter than NLB: Data SGL Length Invalid');
  t.is((await io.admin(0x7e, { nsid: 1 })).sc, 0x01, 'unknown opcode');
  // Still serving.
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512))).statusField, 0);
});

test('log pages and features: SMART counts, error log, Number of Queues, KATO, Keep Alive', async (t) => {
  const { admin, io } = await session();
  const data = randomBytes(4096);
  for (let i = 0; i < 3; i++) t.is((await io.command(rwSqe(0x01, io.nextCid(), 1, 40, 8, 4096), { data })).statusField, 0);
  // NUMDL (CDW10 31:16) 0's based dwords: 128 = 512 bytes.
  const smart = await admin.admin(0x02, { nsid: 0xffffffff, length: 512, cdw: { 10: 0x02 | (127 << 16) } });
  t.is(smart.statusField, 0);
  t.true(smart.data.readBigUInt64LE(80) >= 3n, 'Host Write Commands');
  t.true(smart.data.readBigUInt64LE(48) >= 1n, 'Data Units Written');
  t.is(smart.data[3], 100);
  const err = await admin.admin(0x02, { length: 64, cdw: { 10: 0x01 | (15 << 16) } });
  t.is(err.statusField, 0);
  t.true(err.data.equals(Buffer.alloc(64)));
  t.is((await admin.admin(0x02, { length: 64, cdw: { 10: 0x42 | (15 << 16) } })).sc, 0x09, 'Invalid Log Page');
  // This session's I/O queue exists already: the count is fixed (Base 2.0 §5.27.1.5), and Get reports it.
  t.is((await admin.admin(0x09, { cdw: { 10: 0x07, 11: (3 << 16) | 3 } })).sc, 0x0c, 'Command Sequence Error');
  const nq = await admin.admin(0x0a, { cdw: { 10: 0x07 } });
  t.is(nq.statusField, 0);
  t.is(nq.dw0, (63 << 16) | 63);
  t.is((await admin.admin(0x09, { cdw: { 10: 0x0f, 11: 30_000 } })).statusField, 0);
  t.is((await admin.admin(0x0a, { cdw: { 10: 0x0f } })).dw0, 30_000);
  t.is((await admin.admin(0x18)).statusField, 0, 'Keep Alive');
  t.is((await admin.admin(0x0a, { cdw: { 10: 0x06 } })).dw0 & 1, 1, 'volatile write cache on');
  const hostid = await admin.admin(0x0a, { length: 16, cdw: { 10: 0x81, 11: 1 } });
  t.is(hostid.statusField, 0);
  t.true(hostid.data.equals(HOST_ID), 'Host Identifier: the HOSTID given at Connect');
});

// Serial: it changes the namespace inventory the other tests list.
test.serial('Asynchronous Event Request: held, completed with Namespace Attribute Changed when a volume appears', async (t) => {
  const { admin } = await session();
  t.is((await admin.admin(0x09, { cdw: { 10: 0x0b, 11: 1 << 8 } })).statusField, 0);
  const cid = admin.nextCid();
  const aer = admin.command(rwSqe(0x0c, cid, 0, 0, 1, 0).fill(0, 4, 64).fill(0x0c, 0, 1));
  await new Promise((r) => setTimeout(r, 100));
  const v = exportMemoryVolume({ name: 'late', lun: 9, size: 1 << 20 });
  f.server.addVolume(v);
  t.teardown(() => {
    f.server.removeVolume('late');
    f.server.inventoryChanged();
  });
  f.server.inventoryChanged();
  const done = await aer;
  t.is(done.statusField, 0);
  t.is(done.dw0 & 7, 2, 'Notice');
  t.is((done.dw0 >> 8) & 0xff, 0, 'Namespace Attribute Changed');
  t.is((done.dw0 >> 16) & 0xff, 0x04, 'log page 04h');
  const changed = await admin.admin(0x02, { length: 4096, cdw: { 10: 0x04 | (1023 << 16) } });
  t.is(changed.data.readUInt32LE(0), 10);
  const list = (await admin.admin(0x06, { length: 4096, cdw: { 10: 0x02 } })).data;
  t.is(list.readUInt32LE(12), 10);
});
