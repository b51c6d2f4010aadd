// What ends an NVMe/TCP connection (docs/nvme.md "Bad input"): a malformed
// PDU gets a C2HTermReq with the right FES (NVMe TCP 1.0 §3.6.2.5) and a log
// line, ends only its own connection, and the listener serves the next one;
// a controller whose Keep Alive timer expires ends (Base 2.0 §3.9.5); the
// discovery controller lists the listener (NVMe-oF 1.1 §5.4).
import test from 'ava';
import { crc32c } from '../../protocol/crc32c.js';
import { buildSqe } from '../../protocol/nvme/command.js';
import { startNvme, type NvmeFixture } from './fixture.js';
import { RawHost, rwSqe, type Pdu } from '../../bench/soak/nvme-raw-host.js';

let f: NvmeFixture;
const hosts: RawHost[] = [];

test.before(async () => {
  f = await startNvme([{ name: 'v0', lun: 0, size: 4 << 20 }], { loginTimeoutMs: 1500 });
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

/** The C2HTermReq (§3.6.2.5): HLEN 24, FES bytes 8-9, FEI 10-13; then the connection closes. */
async function expectTerm(t: import('ava').ExecutionContext, h: RawHost, fes: number, fei?: number): Promise<Pdu> {
  const p = await h.next();
  t.is(p.type, 0x03, 'C2HTermReq');
  t.is(p.hlen, 24);
  t.true(p.plen >= 24 && p.plen <= 152);
  t.is(p.raw.readUInt16LE(8), fes, 'FES');
  if (fei !== undefined) t.is(p.raw.readUInt32LE(10), fei, 'FEI');
  t.true(await h.waitClosed(5000), 'the connection was closed');
  return p;
}

/** A full session still works on the same listener. */
async function healthy(t: import('ava').ExecutionContext): Promise<void> {
  const admin = await open();
  const cntlid = await admin.enable(f.nqn);
  const io = await open();
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid })).statusField, 0);
  const data = Buffer.alloc(4096, 0x5a);
  t.is((await io.command(rwSqe(0x01, io.nextCid(), 1, 0, 8, 4096), { data })).statusField, 0);
  t.true((await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 8, 4096))).data.equals(data));
}

function capsuleHeader(sqe: Buffer): Buffer {
  const h = Buffer.alloc(72);
  h[0] = 0x04;
  sqe.copy(h, 8);
  return h;
}

test('a CapsuleCmd before ICReq: PDU Sequence Error', async (t) => {
  const h = await open();
  h.write(h.frame(capsuleHeader(buildSqe({ opcode: 0x06, cid: 1 })), null));
  await expectTerm(t, h, 0x02);
  t.true(f.log.lines.some((l) => l.level === 'warn' && /C2HTermReq FES 2/.test(l.message)), 'a log line');
  await healthy(t);
});

test('an unknown PDU type, a wrong HLEN, PLEN shorter than the header, a bad PDO: Invalid PDU Header Field with the field offset', async (t) => {
  const cases: [string, (h: RawHost) => Buffer, number][] = [
    ['type 0Bh', () => Buffer.from([0x0b, 0, 24, 0, 24, 0, 0, 0, ...Buffer.alloc(16)]), 0],
    ['HLEN 70', (h) => { const b = h.frame(capsuleHeader(buildSqe({ opcode: 0x18, cid: 1 })), null); b[2] = 70; return b; }, 2],
    ['PLEN 40', (h) => { const b = h.frame(capsuleHeader(buildSqe({ opcode: 0x18, cid: 1 })), null); b.writeUInt32LE(40, 4); return b.subarray(0, 40); }, 4],
    ['PDO 10', (h) => { const b = h.frame(capsuleHeader(buildSqe({ opcode: 0x18, cid: 1 })), Buffer.alloc(64)); b[3] = 10; return b; }, 3],
  ];
  for (const [what, pdu, fei] of cases) {
    const h = await open();
    await h.initialize();
    h.write(pdu(h));
    t.log(what);
    await expectTerm(t, h, 0x01, fei);
  }
  await healthy(t);
});

test('a PLEN of 1 GiB ends the connection at its common header, without buffering it', async (t) => {
  const h = await open();
  await h.initialize();
  const b = h.frame(capsuleHeader(buildSqe({ opcode: 0x18, cid: 1 })), null);
  b.writeUInt32LE(1 << 30, 4);
  h.write(b);
  await expectTerm(t, h, 0x01, 4);
});

test('a header digest mismatch: Header Digest Error', async (t) => {
  const h = await open();
  await h.initialize({ hdgst: true });
  t.true(h.hdgst);
  const b = h.frame(capsuleHeader(buildSqe({ opcode: 0x18, cid: 1 })), null);
  b.writeUInt32LE(crc32c(b.subarray(0, 72)) ^ 1, 72);
  h.write(b);
  await expectTerm(t, h, 0x03);
  await healthy(t);
});

test('H2CData beyond the R2T: Data Transfer Out of Range; an unknown TTAG: Invalid PDU Header Field', async (t) => {
  for (const bad of ['beyond', 'ttag'] as const) {
    const admin = await open();
    const cntlid = await admin.enable(f.nqn);
    const io = await open();
    await io.initialize();
    t.is((await io.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid })).statusField, 0);
    io.sendCapsule(rwSqe(0x01, 7, 1, 0, 8, 4096));
    const r2t = await io.next();
    t.is(r2t.type, 0x09);
    t.is(r2t.raw.readUInt16LE(8), 7, 'CCCID');
    t.is(r2t.raw.readUInt32LE(12), 0, 'R2TO');
    t.is(r2t.raw.readUInt32LE(16), 4096, 'R2TL');
    const h = Buffer.alloc(24);
    h[0] = 0x06;
    h.writeUInt16LE(7, 8);
    h.writeUInt16LE(bad === 'ttag' ? r2t.raw.readUInt16LE(10) ^ 0x55 : r2t.raw.readUInt16LE(10), 10);
    h.writeUInt32LE(bad === 'beyond' ? 2048 : 0, 12);
    h.writeUInt32LE(4096, 16);
    io.write(io.frame(h, Buffer.alloc(4096)));
    await expectTerm(t, io, bad === 'beyond' ? 0x04 : 0x01);
  }
  await healthy(t);
});

test('an SGL longer or shorter than the data: Data SGL Length Invalid, for reads as for writes (SGLS bit 16 is clear)', async (t) => {
  const admin = await open();
  const cntlid = await admin.enable(f.nqn);
  const id = await admin.admin(0x06, { length: 4096, cdw: { 10: 1 } });
  t.is(id.data.readUInt32LE(536) & (1 << 16), 0, 'Identify: no SGL longer than the data');
  const io = await open();
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid })).statusField, 0);
  let cid = 20;
  for (const bytes of [4096 + 512, 8192, 4096 - 512]) {
    t.is((await io.command(rwSqe(0x02, cid++, 1, 0, 8, bytes))).sc, 0x0f, `read of 4096 bytes, SGL ${bytes}`);
    t.is((await io.command(rwSqe(0x01, cid++, 1, 0, 8, bytes), { data: Buffer.alloc(bytes) })).sc, 0x0f, `write of 4096 bytes, SGL ${bytes}`);
  }
  const exact = await io.command(rwSqe(0x02, cid++, 1, 0, 8, 4096));
  t.is(exact.sc, 0);
  t.is(exact.data.length, 4096);
});

test('Number of Queues: what Set Features grants, Get Features reports and Connect keeps to; once an I/O queue exists, a Set is a Command Sequence Error', async (t) => {
  const admin = await open();
  const cntlid = await admin.enable(f.nqn);
  const nq = (set: boolean, v = 0): Promise<{ sc: number; dw0: number }> => admin.admin(set ? 0x09 : 0x0a, { cdw: { 10: 0x07, 11: v } });
  t.like(await nq(false), { sc: 0, dw0: 63 | (63 << 16) }, 'every queue before a Set');
  t.like(await nq(true, 0), { sc: 0, dw0: 0 }, 'one I/O queue granted');
  t.like(await nq(false), { sc: 0, dw0: 0 });
  const q1 = await open();
  await q1.initialize();
  t.is((await q1.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid })).statusField, 0);
  const q2 = await open();
  await q2.initialize();
  t.is((await q2.connect({ qid: 2, sqsize: 16, subnqn: f.nqn, cntlid })).sc, 0x82, 'a queue beyond the grant: Connect Invalid Parameters');
  t.is((await nq(true, 3 | (3 << 16))).sc, 0x0c, 'the count is fixed once an I/O queue exists');
  t.like(await nq(false), { sc: 0, dw0: 0 });
});

test('more commands than the queue has entries (Connect SQSIZE): PDU Sequence Error', async (t) => {
  const admin = await open();
  const cntlid = await admin.enable(f.nqn);
  const io = await open();
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 2, subnqn: f.nqn, cntlid })).statusField, 0);
  // Writes whose data waits for R2T stay outstanding: the third is one more than the queue's two entries.
  for (let cid = 1; cid <= 2; cid++) io.sendCapsule(rwSqe(0x01, cid, 1, 0, 8, 4096));
  t.is((await io.next()).type, 0x09);
  t.is((await io.next()).type, 0x09);
  io.sendCapsule(rwSqe(0x01, 3, 1, 0, 8, 4096));
  await expectTerm(t, io, 0x02);
});

test('H2CData larger than MAXH2CDATA: Data Transfer Limit Exceeded', async (t) => {
  const h = await open();
  const ic = await h.initialize();
  const hdr = Buffer.alloc(24);
  hdr[0] = 0x06;
  hdr.writeUInt32LE(ic.maxH2CData + 4, 16);
  const b = h.frame(hdr, Buffer.alloc(ic.maxH2CData + 4));
  h.write(b);
  await expectTerm(t, h, 0x05);
});

test('a connection that never sends Connect is closed after limits.login_timeout_ms', async (t) => {
  const h = await open();
  await h.initialize();
  t.true(await h.waitClosed(6000));
});

test('Keep Alive Timeout: a controller that hears nothing for KATO ends, with its queues', async (t) => {
  const admin = await open();
  const cntlid = await admin.enable(f.nqn, { kato: 1500 });
  const io = await open();
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid })).statusField, 0);
  // Keep Alive commands every 300 ms hold it for longer than KATO ...
  for (let i = 0; i < 8; i++) {
    await new Promise((r) => setTimeout(r, 300));
    t.is((await admin.admin(0x18)).statusField, 0);
  }
  t.false(admin.closed);
  // ... and silence ends it.
  t.true(await admin.waitClosed(5000), 'admin queue closed');
  t.true(await io.waitClosed(5000), 'I/O queue closed');
  t.true(f.log.lines.some((l) => /Keep Alive Timeout expired/.test(l.message)));
  const late = await open();
  await late.initialize();
  t.is((await late.connect({ qid: 2, sqsize: 16, subnqn: f.nqn, cntlid })).sc, 0x82, 'the controller is gone');
});

for (const kato of [2 ** 31, 0xffffffff]) {
  test(`a KATO of ${kato} ms, past a timer's 31 bits: the controller stays, and Get Features reports the KATO set`, async (t) => {
    const h = await open();
    const cntlid = await h.enable(f.nqn, { kato });
    // Node runs a timer of more than 2^31 - 1 ms after 1 ms: one that was not split would have ended it by now.
    await new Promise((r) => setTimeout(r, 300));
    t.false(h.closed);
    t.is((await h.admin(0x18)).statusField, 0, 'Keep Alive answered');
    const got = await h.admin(0x0a, { cdw: { 10: 0x0f } });
    t.is(got.statusField, 0);
    t.is(got.dw0 >>> 0, kato);
    t.false(f.log.lines.some((l) => l.message.includes(`NVMe controller ${cntlid} `) && /Keep Alive Timeout/.test(l.message)));
  });
}

test('the discovery controller lists this listener (log page 70h)', async (t) => {
  const h = await open();
  await h.initialize();
  const c = await h.connect({ qid: 0, sqsize: 32, subnqn: 'nqn.2014-08.org.nvmexpress.discovery' });
  t.is(c.statusField, 0);
  t.is((await h.propertySet(0x14, 1 | (6 << 16) | (4 << 20))).statusField, 0);
  const id = await h.admin(0x06, { length: 4096, cdw: { 10: 1 } });
  t.is(id.data[111], 2, 'CNTRLTYPE discovery');
  t.is(id.data.subarray(768, 1024).toString().replace(/\0+$/, ''), 'nqn.2014-08.org.nvmexpress.discovery');
  // Header first (NUMD 1024 bytes), then the whole page, as hosts read it.
  const head = await h.admin(0x02, { length: 1024, cdw: { 10: 0x70 | (255 << 16) } });
  t.is(head.statusField, 0);
  const numrec = Number(head.data.readBigUInt64LE(8));
  t.is(numrec, 1);
  const page = (await h.admin(0x02, { length: 2048, cdw: { 10: 0x70 | (511 << 16) } })).data;
  const e = page.subarray(1024);
  t.is(e[0], 3, 'TRTYPE TCP');
  t.is(e[1], 1, 'ADRFAM IPv4');
  t.is(e[2], 2, 'SUBTYPE NVM subsystem');
  t.is(e.readUInt16LE(6), 0xffff, 'CNTLID dynamic');
  t.is(e.subarray(32, 64).toString('ascii').replace(/[\0 ]+$/, ''), String(f.port), 'TRSVCID');
  t.is(e.subarray(256, 512).toString().replace(/\0+$/, ''), f.nqn, 'SUBNQN');
  t.is(e.subarray(512, 768).toString('ascii').replace(/[\0 ]+$/, ''), '127.0.0.1', 'TRADDR');
  // No namespaces on a discovery controller.
  t.is((await h.admin(0x06, { nsid: 1, length: 4096, cdw: { 10: 0 } })).sc, 0x02);
});

test('a drain does not wait for a held Asynchronous Event Request', async (t) => {
  const g = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }]);
  t.teardown(() => g.close());
  const admin = await RawHost.open(g.port);
  t.teardown(() => admin.close());
  await admin.enable(g.nqn);
  admin.sendCapsule(buildSqe({ opcode: 0x0c, cid: 99 }));
  await new Promise((r) => setTimeout(r, 100));
  const t0 = Date.now();
  await g.server.drain(20_000);
  t.true(Date.now() - t0 < 5000, `drained in ${Date.now() - t0} ms`);
  t.true(await admin.waitClosed(5000));
});
