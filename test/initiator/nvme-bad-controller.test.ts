// Bad input from a controller (NVMe TCP Transport 1.0 §3.6.2): a fake
// controller in this process answers the host's ICReq wrongly, and the host
// (initiator/nvme/queue.ts) rejects with a typed LOGIN_FAILED that says what
// was wrong, tells the controller with an H2CTermReq where the spec asks for
// one (§3.6.2.4), and leaves no socket or timer behind.
import test from 'ava';
import { createServer, type Server, type Socket } from 'node:net';
import { connectNvme, hasCode } from '../../initiator/index.js';
import { checkSuiteResources } from '../helpers/resources.js';

checkSuiteResources(test);

/** A controller that answers the first 128 bytes (the ICReq) with `reply`, and records what the host sends after. */
async function fake(t: import('ava').ExecutionContext, reply: (icreq: Buffer, s: Socket) => void): Promise<{ port: number; after: Buffer[] }> {
  const after: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    let answered = false;
    s.on('data', (d: Buffer) => {
      if (answered) return void after.push(d);
      buf = Buffer.concat([buf, d]);
      if (buf.length < 128) return;
      answered = true;
      if (buf.length > 128) after.push(buf.subarray(128));
      reply(buf.subarray(0, 128), s);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const a = server.address();
  return { port: typeof a === 'object' && a !== null ? a.port : 0, after };
}

function icResp(o: { pfv?: number; dgst?: number; maxh2c?: number } = {}): Buffer {
  const h = Buffer.alloc(128);
  h[0] = 0x01;
  h[2] = 128;
  h.writeUInt32LE(128, 4);
  h.writeUInt16LE(o.pfv ?? 0, 8);
  h[11] = o.dgst ?? 0;
  h.writeUInt32LE(o.maxh2c ?? 131072, 12);
  return h;
}

const URL = (port: number): string => `nvme+tcp://127.0.0.1:${port}/nqn.2026-12.io.rblk:fake`;
const opts = { timeouts: { connectMs: 3000 } };

test('an ICResp with PFV 1: LOGIN_FAILED naming it, and an H2CTermReq (Unsupported Parameter)', async (t) => {
  const f = await fake(t, (_, s) => s.write(icResp({ pfv: 1 })));
  const e = await t.throwsAsync(connectNvme(URL(f.port), opts));
  t.true(hasCode(e, 'LOGIN_FAILED'), String(e));
  t.regex(e!.message, /ICResp PFV 1/);
  // The H2CTermReq is written before the socket is destroyed; wait for it to arrive (bounded, not a timing check).
  for (let i = 0; i < 250 && Buffer.concat(f.after).length < 24; i++) await new Promise((r) => setTimeout(r, 20));
  const term = Buffer.concat(f.after);
  t.is(term[0], 0x02, 'an H2CTermReq');
  t.is(term.readUInt16LE(8), 0x06, 'FES Unsupported Parameter');
});

test('an ICResp granting a digest not asked for, or a MAXH2CDATA below 4096: LOGIN_FAILED', async (t) => {
  const a = await fake(t, (_, s) => s.write(icResp({ dgst: 1 })));
  t.regex((await t.throwsAsync(connectNvme(URL(a.port), opts)))!.message, /grants digests not asked for/);
  const b = await fake(t, (_, s) => s.write(icResp({ maxh2c: 512 })));
  t.regex((await t.throwsAsync(connectNvme(URL(b.port), opts)))!.message, /MAXH2CDATA 512/);
});

test('a PDU type no controller sends, a C2HTermReq, a closed connection, silence: typed errors, nothing thrown elsewhere', async (t) => {
  const junk = await fake(t, (_, s) => s.write(Buffer.from([0x7f, 0, 8, 0, 8, 0, 0, 0])));
  const e1 = await t.throwsAsync(connectNvme(URL(junk.port), opts));
  t.true(hasCode(e1, 'LOGIN_FAILED'));
  t.regex(e1!.message, /PDU type 127 is not one a controller sends/);

  const term = Buffer.alloc(24);
  term[0] = 0x03;
  term[2] = 24;
  term.writeUInt32LE(24, 4);
  term.writeUInt16LE(0x01, 8);
  term.writeUInt32LE(10, 10);
  const t2 = await fake(t, (_, s) => s.end(term));
  t.regex((await t.throwsAsync(connectNvme(URL(t2.port), opts)))!.message, /C2HTermReq FES 1 FEI 10/);

  const closed = await fake(t, (_, s) => s.destroy());
  t.true(hasCode(await t.throwsAsync(connectNvme(URL(closed.port), opts)), 'LOGIN_FAILED'));

  const silent = await fake(t, () => undefined);
  const e4 = await t.throwsAsync(connectNvme(URL(silent.port), { timeouts: { connectMs: 300 } }));
  t.true(hasCode(e4, 'LOGIN_FAILED'));
  t.regex(e4!.message, /no Connect within 300 ms/);
});

/** A controller that takes the ICReq and the Connect, then answers the next capsule with `bad` (given the capsule's CID). */
async function connectedFake(t: import('ava').ExecutionContext, bad: (cid: number) => Buffer): Promise<{ port: number; after: Buffer[] }> {
  let stage = 0;
  let pending = Buffer.alloc(0);
  const f = await fake(t, (_, s) => {
    s.write(icResp());
    s.on('data', (d: Buffer) => {
      pending = Buffer.concat([pending, d]);
      // CapsuleCmd PDUs: PLEN at bytes 4-7; the CID at SQE bytes 2-3 (PDU bytes 10-11).
      while (pending.length >= 8 && pending.length >= pending.readUInt32LE(4)) {
        const plen = pending.readUInt32LE(4);
        const pdu = pending.subarray(0, plen);
        pending = pending.subarray(plen);
        if (pdu[0] !== 0x04) continue;
        const cid = pdu.readUInt16LE(10);
        if (stage++ === 0) {
          // The Connect's CapsuleResp: success, DW0 = CNTLID 1.
          const r = Buffer.alloc(24);
          r[0] = 0x05;
          r[2] = 24;
          r.writeUInt32LE(24, 4);
          r.writeUInt32LE(1, 8);
          r.writeUInt16LE(cid, 20);
          s.write(r);
        } else s.write(bad(cid));
      }
    });
  });
  return f;
}

test('mid-session: C2HData outside its command, a CapsuleResp for a CID not outstanding, an R2T for a read: the queue is lost with a reason and an H2CTermReq', async (t) => {
  const { NvmeQueue, QueueLostError } = await import('../../initiator/nvme/queue.js');
  const { buildSqe } = await import('../../protocol/nvme/command.js');
  const cases: [string, (cid: number) => Buffer, RegExp, number][] = [
    [
      'C2HData past the end',
      (cid) => {
        const h = Buffer.alloc(24 + 8);
        h[0] = 0x07;
        h[1] = 0x04;
        h[2] = 24;
        h[3] = 24;
        h.writeUInt32LE(32, 4);
        h.writeUInt16LE(cid, 8);
        h.writeUInt32LE(4096, 12); // DATAO beyond a 512-byte read
        h.writeUInt32LE(8, 16);
        return h;
      },
      /C2HData at 4096\+8/,
      0x04,
    ],
    [
      'CapsuleResp for another CID',
      (cid) => {
        const r = Buffer.alloc(24);
        r[0] = 0x05;
        r[2] = 24;
        r.writeUInt32LE(24, 4);
        r.writeUInt16LE(cid + 100, 20);
        return r;
      },
      /CapsuleResp for CID \d+, which is not outstanding/,
      0x01,
    ],
    [
      'an R2T for a read',
      (cid) => {
        const r = Buffer.alloc(24);
        r[0] = 0x09;
        r[2] = 24;
        r.writeUInt32LE(24, 4);
        r.writeUInt16LE(cid, 8);
        r.writeUInt32LE(512, 16);
        return r;
      },
      /R2T for CID \d+, which writes nothing outstanding/,
      0x01,
    ],
  ];
  for (const [what, bad, why, fes] of cases) {
    const f = await connectedFake(t, bad);
    const q = await NvmeQueue.open({
      address: '127.0.0.1',
      port: f.port,
      qid: 1,
      size: 8,
      digests: { header: false, data: false },
      hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:test',
      hostid: Buffer.alloc(16, 1),
      subnqn: 'nqn.2026-12.io.rblk:fake',
      cntlid: 1,
      kato: 0,
      inCapsule: 4096,
      connectTimeoutMs: 3000,
      commandTimeoutMs: 0,
    });
    const e = await t.throwsAsync(q.submit({ sqe: buildSqe({ opcode: 0x02, cid: 0, nsid: 1, cdw: { 12: 0 } }), readLength: 512 }), undefined, what);
    t.true(e instanceof QueueLostError, what);
    t.regex(e!.message, why, what);
    t.true(q.lost);
    for (let i = 0; i < 250 && !Buffer.concat(f.after).includes(Buffer.from([0x02, 0x00, 24])); i++) await new Promise((r) => setTimeout(r, 20));
    const sent = Buffer.concat(f.after);
    const at = sent.indexOf(Buffer.from([0x02, 0x00, 24]));
    t.true(at >= 0, `${what}: an H2CTermReq was sent`);
    t.is(sent.readUInt16LE(at + 8), fes, `${what}: FES`);
  }
});

test("a read answered as successful with less data than it asked for: a Data Transfer Error on an I/O queue, never the buffer's old bytes; zeroes on the admin queue", async (t) => {
  const { NvmeQueue } = await import('../../initiator/nvme/queue.js');
  const { buildSqe, isSuccess } = await import('../../protocol/nvme/command.js');
  // 256 of the 512 bytes asked for, then a CapsuleResp with status 0.
  const short = (cid: number): Buffer => {
    const d = Buffer.alloc(24 + 256, 0xab);
    d[0] = 0x07;
    d[1] = 0x04; // LAST_PDU, no SUCCESS
    d[2] = 24;
    d[3] = 24;
    d.writeUInt32LE(24 + 256, 4);
    d.writeUInt16LE(cid, 8);
    d.writeUInt32LE(0, 12);
    d.writeUInt32LE(256, 16);
    const r = Buffer.alloc(24);
    r[0] = 0x05;
    r[2] = 24;
    r.writeUInt32LE(24, 4);
    r.writeUInt16LE(cid, 20);
    return Buffer.concat([d, r]);
  };
  for (const qid of [1, 0]) {
    const f = await connectedFake(t, short);
    const q = await NvmeQueue.open({
      address: '127.0.0.1',
      port: f.port,
      qid,
      size: 8,
      digests: { header: false, data: false },
      hostnqn: 'nqn.2014-08.org.nvmexpress:uuid:test',
      hostid: Buffer.alloc(16, 1),
      subnqn: 'nqn.2026-12.io.rblk:fake',
      cntlid: qid === 0 ? 0xffff : 1,
      kato: 0,
      inCapsule: 4096,
      connectTimeoutMs: 3000,
      commandTimeoutMs: 0,
    });
    t.teardown(() => q.close());
    const into = Buffer.alloc(512, 0xee);
    const c = await q.submit({ sqe: buildSqe({ opcode: 0x02, cid: 0, nsid: 1, cdw: { 12: 0 } }), readLength: 512, readInto: into });
    t.true(into.subarray(0, 256).equals(Buffer.alloc(256, 0xab)), `queue ${qid}: the bytes that came`);
    if (qid !== 0) {
      t.deepEqual([c.status.sct, c.status.sc], [0, 0x04], 'Data Transfer Error');
      t.false(isSuccess(c.status));
    } else {
      t.true(isSuccess(c.status));
      t.true(c.data!.subarray(256).equals(Buffer.alloc(256)), 'the tail reads as zeroes, not the old 0xee');
    }
    t.false(q.lost, 'the queue stays up: one command failed, not the connection');
  }
});
