// Fused Compare and Write (Base 2.0 §3.4.2, docs/nvme.md "Command sets side
// by side"): a Compare with FUSE 01b and the Write with 10b that follows it
// run as one: equal data is written, different data fails the Compare and
// aborts the Write without writing; a half without its other is aborted.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { openHostQueues, startNvme } from './fixture.js';
import { RawHost, rwSqe, decodeCqe, type Cqe } from '../../bench/soak/nvme-raw-host.js';

test('fused Compare and Write: written on a match, nothing on a miscompare, aborted when unpaired', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }]);
  t.teardown(() => f.close());
  const admin = await RawHost.open(f.port);
  t.teardown(() => admin.close());
  const cntlid = await admin.enable(f.nqn);
  t.is((await admin.admin(0x06, { length: 4096, cdw: { 10: 1 } })).data.readUInt16LE(522) & 1, 1, 'FUSES');
  const io = await RawHost.open(f.port);
  t.teardown(() => io.close());
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid })).statusField, 0);
  const old = randomBytes(1024);
  t.is((await io.command(rwSqe(0x01, io.nextCid(), 1, 10, 2, 1024), { data: old })).statusField, 0);

  /** Sends the pair (the Write's data by R2T when asked) and returns both CQEs by CID. */
  const fused = async (compare: Buffer, data: Buffer, o: { r2t?: boolean } = {}): Promise<[Cqe, Cqe]> => {
    const c1 = io.nextCid();
    const c2 = io.nextCid();
    const cmp = rwSqe(0x05, c1, 1, 10, 2, 1024, { inCapsule: true });
    cmp[1] |= 0x01;
    const wr = rwSqe(0x01, c2, 1, 10, 2, 1024, { inCapsule: !o.r2t });
    wr[1] |= 0x02;
    io.sendCapsule(cmp, compare);
    io.sendCapsule(wr, o.r2t ? null : data);
    const got = new Map<number, Cqe>();
    while (got.size < 2) {
      const p = await io.next();
      if (p.type === 0x09) {
        const h = Buffer.alloc(24);
        h[0] = 0x06;
        h[1] = 0x04;
        h.writeUInt16LE(p.raw.readUInt16LE(8), 8);
        h.writeUInt16LE(p.raw.readUInt16LE(10), 10);
        h.writeUInt32LE(0, 12);
        h.writeUInt32LE(data.length, 16);
        io.write(io.frame(h, data));
        continue;
      }
      t.is(p.type, 0x05);
      const c = decodeCqe(p.raw, 8);
      got.set(c.cid, c);
    }
    return [got.get(c1)!, got.get(c2)!];
  };
  const back = async () => (await io.command(rwSqe(0x02, io.nextCid(), 1, 10, 2, 1024))).data;

  const next = randomBytes(1024);
  const [a, b] = await fused(old, next);
  t.is(a.statusField, 0);
  t.is(b.statusField, 0);
  t.true((await back()).equals(next), 'written');

  const [m1, m2] = await fused(old, randomBytes(1024), { r2t: true });
  t.is(m1.sct, 2);
  t.is(m1.sc, 0x85, 'Compare Failure');
  t.is(m2.sc, 0x09, 'Command Aborted due to Failed Fused Command');
  t.true((await back()).equals(next), 'nothing written');

  const [r1, r2] = await fused(next, old, { r2t: true });
  t.is(r1.statusField | r2.statusField, 0, 'the Write half by R2T');
  t.true((await back()).equals(old));

  // A first half followed by an unfused command: Missing Fused Command; the other runs.
  const lone = rwSqe(0x05, io.nextCid(), 1, 10, 2, 1024, { inCapsule: true });
  lone[1] |= 0x01;
  io.sendCapsule(lone, old);
  const flushCid = io.nextCid();
  io.sendCapsule(rwSqe(0x00, flushCid, 1, 0, 1, 0));
  const orphan = decodeCqe((await io.next()).raw, 8);
  t.is(orphan.cid, lone.readUInt16LE(2));
  t.is(orphan.sc, 0x0a, 'Command Aborted due to Missing Fused Command');
  const plain = decodeCqe((await io.next()).raw, 8);
  t.is(plain.cid, flushCid);
  t.is(plain.statusField, 0);
  // A second half alone.
  const second = rwSqe(0x01, io.nextCid(), 1, 10, 2, 1024, { inCapsule: true });
  second[1] |= 0x02;
  t.is((await io.command(second, { data: next, inCapsule: true })).sc, 0x0a);
  t.true((await back()).equals(old));
  // A first half and then nothing (a host that never sends the second): aborted, not held
  // unanswered for the queue's life (the soak's NVMe fuzz found one held so).
  const alone = rwSqe(0x05, io.nextCid(), 1, 10, 2, 1024, { inCapsule: true });
  alone[1] |= 0x01;
  const answer = await io.command(alone, { data: old, inCapsule: true });
  t.is(answer.sc, 0x0a, 'Command Aborted due to Missing Fused Command');
  t.is((await io.command(rwSqe(0x00, io.nextCid(), 1, 0, 1, 0))).statusField, 0, 'the queue goes on');
  t.true((await back()).equals(old));
});

test('fused halves that end while their R2T is open give the slot back: five in a row, then a plain R2T write still gets its R2T and lands', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }]);
  t.teardown(() => f.close());
  const { io } = await openHostQueues(t, f);
  // Each Compare (FUSE 01b) asks for its data by R2T; the next one, not a Write (10b), ends it
  // with Missing Fused Command before the data came. A host that has that completion sends no
  // data for it, so each would hold one of the queue's R2T slots for good (4 of them).
  const firsts: number[] = [];
  for (let i = 0; i < 5; i++) {
    const cid = io.nextCid();
    const cmp = rwSqe(0x05, cid, 1, 10, 2, 1024);
    cmp[1] |= 0x01;
    io.sendCapsule(cmp);
    firsts.push(cid);
  }
  const data = randomBytes(4096);
  const wcid = io.nextCid();
  io.sendCapsule(rwSqe(0x01, wcid, 1, 40, 8, 4096));
  const aborted = new Set<number>();
  const compareR2ts: { cid: number; ttag: number }[] = [];
  let written = false;
  while (!written) {
    const p = await io.next();
    if (p.type === 0x09) {
      if (p.raw.readUInt16LE(8) !== wcid) {
        compareR2ts.push({ cid: p.raw.readUInt16LE(8), ttag: p.raw.readUInt16LE(10) }); // its data never comes
        continue;
      }
      const h = Buffer.alloc(24);
      h[0] = 0x06;
      h[1] = 0x04;
      h.writeUInt16LE(wcid, 8);
      h.writeUInt16LE(p.raw.readUInt16LE(10), 10);
      h.writeUInt32LE(4096, 16);
      io.write(io.frame(h, data));
      continue;
    }
    t.is(p.type, 0x05);
    const c = decodeCqe(p.raw, 8);
    if (c.cid === wcid) {
      t.is(c.statusField, 0, 'the plain write');
      written = true;
    } else {
      t.is(c.sc, 0x0a, 'Missing Fused Command');
      aborted.add(c.cid);
    }
  }
  t.deepEqual([...aborted].sort((a, b) => a - b), [...firsts].sort((a, b) => a - b));
  // Data that a host had already sent when the Compare ended is taken and dropped, not a fatal error.
  const late = compareR2ts[0]!;
  const h = Buffer.alloc(24);
  h[0] = 0x06;
  h[1] = 0x04;
  h.writeUInt16LE(late.cid, 8);
  h.writeUInt16LE(late.ttag, 10);
  h.writeUInt32LE(1024, 16);
  io.write(io.frame(h, randomBytes(1024)));
  t.true((await io.command(rwSqe(0x02, io.nextCid(), 1, 40, 8, 4096))).data.equals(data), 'the write landed, and the queue goes on');
  t.false(io.closed);
});
