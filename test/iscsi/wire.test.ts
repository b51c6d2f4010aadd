// The iSCSI portal at the PDU level (RFC 7143), with a raw-socket initiator:
// negotiation answers, SendTargets, the CmdSN window and StatSN, R2T, NOP,
// task management, Reject, logout, reinstatement, digests, and that a
// protocol error ends only its own connection.
import test from 'ava';
import { crc32c } from '../../protocol/crc32c.js';
import { encodeText } from '../../target/iscsi/text.js';
import { resources } from '../helpers/resources.js';
import { INITIATOR, IQN, startIscsi, type IscsiFixture } from './portal-fixture.js';
import { loginStatus, RawInitiator, textOf, type RawPdu } from './raw-initiator.js';

let f: IscsiFixture;
const open: RawInitiator[] = [];
let fdsBefore = 0;

test.before(async () => {
  f = await startIscsi([{ name: 'vol0', lun: 0, size: 4 << 20 }], { queueDepth: 8, keepAliveMs: 300, loginTimeoutMs: 1500 });
  fdsBefore = resources().fds;
});
test.after.always(async () => {
  for (const c of open) c.close();
  await f?.close();
});

async function session(keys: [string, string][] = [], isid?: Buffer, digests = false): Promise<RawInitiator> {
  const c = await RawInitiator.open(f.port);
  open.push(c);
  const r = await c.login({ initiator: INITIATOR, target: IQN, keys, ...(isid ? { isid } : {}) });
  if (!r || loginStatus(r) !== 0) throw new Error(`login failed: ${r ? loginStatus(r).toString(16) : 'closed'}`);
  if (digests) c.useDigests(true, true);
  // The first command of a new nexus reports POWER ON, RESET (29/00): take it with a TEST UNIT READY.
  c.command({ itt: 0xfff0, cdb: Buffer.alloc(16), edtl: 0 });
  const ua = await c.next(0x21);
  if (!ua || ua.bhs[3] !== 2) throw new Error('no unit attention on the first command');
  return c;
}

const read10 = (lba: number, blocks: number): Buffer => {
  const b = Buffer.alloc(16);
  b[0] = 0x28;
  b.writeUInt32BE(lba, 2);
  b.writeUInt16BE(blocks, 7);
  return b;
};
const write10 = (lba: number, blocks: number): Buffer => {
  const b = read10(lba, blocks);
  b[0] = 0x2a;
  return b;
};

test('login answers every key: results, NotUnderstood, our MaxRecvDataSegmentLength and the portal group', async (t) => {
  const c = await RawInitiator.open(f.port);
  open.push(c);
  const r = await c.login({
    initiator: INITIATOR,
    target: IQN,
    keys: [
      ['HeaderDigest', 'None'],
      ['InitialR2T', 'Yes'],
      ['ImmediateData', 'No'],
      ['MaxBurstLength', '16777215'],
      ['FirstBurstLength', '1048576'],
      ['MaxOutstandingR2T', '64'],
      ['ErrorRecoveryLevel', '2'],
      ['MaxConnections', '8'],
      ['X-com.example.Key', 'whatever'],
    ],
  });
  t.truthy(r);
  t.is(loginStatus(r!), 0);
  t.is(r!.bhs[1] & 0x83, 0x83, 'T set, NSG full feature');
  t.not(r!.bhs.readUInt16BE(14), 0, 'a TSIH is assigned');
  const k = textOf(r!);
  t.is(k.get('TargetPortalGroupTag'), '1');
  t.is(k.get('InitialR2T'), 'Yes');
  t.is(k.get('ImmediateData'), 'No');
  t.is(k.get('MaxBurstLength'), String(1 << 20), 'limits.max_io bounds a burst');
  t.is(k.get('FirstBurstLength'), '65536');
  t.is(k.get('MaxOutstandingR2T'), '4');
  t.is(k.get('ErrorRecoveryLevel'), '0');
  t.is(k.get('MaxConnections'), '1');
  t.is(k.get('X-com.example.Key'), 'NotUnderstood');
  t.regex(k.get('MaxRecvDataSegmentLength') ?? '', /^\d+$/);
});

test('login refusals carry the RFC 7143 status class and detail', async (t) => {
  const cases: [string, (c: RawInitiator) => Promise<RawPdu | null>, number][] = [
    ['unknown target', (c) => c.login({ initiator: INITIATOR, target: 'iqn.2026-12.io.rblk:nope' }), 0x0203],
    ['no target name', (c) => c.login({ initiator: INITIATOR, keys: [] }), 0x0203],
    ['no initiator name', (c) => c.login({ initiator: '', target: IQN }), 0x0207],
    ['SessionType unknown', (c) => c.login({ initiator: INITIATOR, target: IQN, keys: [['SessionType', 'Other']] }), 0x0200],
  ];
  for (const [what, go, want] of cases) {
    const c = await RawInitiator.open(f.port);
    open.push(c);
    const r = await go(c);
    t.truthy(r, what);
    t.is(loginStatus(r!), want, what);
    await c.whenClosed;
  }
  // Version-min above 0.
  const c = await RawInitiator.open(f.port);
  open.push(c);
  const h = Buffer.alloc(48);
  h[0] = 0x43;
  h[1] = 0x87;
  h[3] = 1;
  c.send(h, encodeText([['InitiatorName', INITIATOR], ['TargetName', IQN]]));
  const r = await c.next(0x23);
  t.is(loginStatus(r!), 0x0205);
  // Anything but a Login first: the connection is closed.
  const g = await RawInitiator.open(f.port);
  open.push(g);
  const nop = Buffer.alloc(48);
  nop[0] = 0x40;
  g.send(nop);
  await g.whenClosed;
  t.true(g.closed);
});

test('SendTargets in a discovery session names the target and this portal', async (t) => {
  const c = await RawInitiator.open(f.port);
  open.push(c);
  const r = await c.login({ initiator: INITIATOR, discovery: true });
  t.is(loginStatus(r!), 0);
  const h = Buffer.alloc(48);
  h[0] = 0x44;
  h[1] = 0x80;
  h.writeUInt32BE(7, 16);
  h.writeUInt32BE(0xffffffff, 20);
  h.writeUInt32BE(c.cmdSN, 24);
  c.send(h, encodeText([['SendTargets', 'All']]));
  const rsp = await c.next(0x24);
  const k = textOf(rsp!);
  t.is(k.get('TargetName'), IQN);
  t.is(k.get('TargetAddress'), `127.0.0.1:${f.port},1`);
  // A SCSI command in a discovery session is a protocol error.
  c.command({ itt: 8, cdb: read10(0, 1), read: true, edtl: 512 });
  await c.whenClosed;
  t.true(c.closed);
});

test('the CmdSN window: ExpCmdSN and MaxCmdSN advance, StatSN counts responses, a command beyond MaxCmdSN is dropped', async (t) => {
  const c = await session();
  c.command({ itt: 1, cdb: read10(0, 1), read: true, edtl: 512 });
  const first = await c.next(0x25);
  t.truthy(first);
  t.is(first!.bhs[1] & 0x81, 0x81, 'F and S: status in the last Data-In');
  t.is(first!.bhs[3], 0, 'GOOD');
  const statSN = first!.bhs.readUInt32BE(24);
  const expCmdSN = first!.bhs.readUInt32BE(28);
  const maxCmdSN = first!.bhs.readUInt32BE(32);
  t.is(expCmdSN, c.cmdSN);
  t.is(maxCmdSN - expCmdSN + 1, 8, 'queue_depth commands may be in the window');
  // Beyond the window: silently dropped (RFC 7143 §4.2.2.1).
  c.command({ itt: 2, cdb: read10(0, 1), read: true, edtl: 512, cmdSN: maxCmdSN + 1 });
  c.command({ itt: 3, cdb: read10(1, 1), read: true, edtl: 512 });
  const next = await c.next(0x25);
  t.is(next!.bhs.readUInt32BE(16), 3);
  t.is(next!.bhs.readUInt32BE(24), statSN + 1);
  t.is(next!.bhs.readUInt32BE(28), c.cmdSN);
  t.is(await c.next(0x25, 300), null, 'the out-of-window command got nothing');
});

// A session that lives for days passes 2^32 commands; an initiator may also
// start its CmdSN anywhere (RFC 7143 §4.2.2.1). CmdSN, ExpCmdSN, MaxCmdSN and
// StatSN compare in serial number arithmetic (RFC 1982), so starting both just
// below 2^32 runs the wrap within seconds: every command inside the window is
// answered, in order, with StatSN and ExpCmdSN wrapping through 0.
test('CmdSN and StatSN wrap through 2^32: 48 reads a window at a time, in and out of CmdSN order, all answered GOOD, StatSN counting on through 0, the window open throughout', async (t) => {
  const c = await RawInitiator.open(f.port);
  open.push(c);
  c.cmdSN = 0xfffffff0;
  c.expStatSN = 0xfffffffa;
  const r = await c.login({ initiator: INITIATOR, target: IQN });
  t.is(r === null ? null : loginStatus(r), 0);
  t.is(r!.bhs.readUInt32BE(24), 0xfffffffa, 'the login response\'s StatSN is the ExpStatSN we sent');
  c.command({ itt: 0xfff0, cdb: Buffer.alloc(16), edtl: 0 }); // takes the new nexus's 29/00
  const ua = await c.next(0x21);
  t.is(ua?.bhs[3], 2);
  let statSN = (0xfffffffa + 1) >>> 0;
  t.is(ua!.bhs.readUInt32BE(24), statSN);
  const statSNs: number[] = [];
  const windows: number[] = [];
  const bad: string[] = [];
  let itt = 1;
  let lastExpCmdSN = 0;
  for (let round = 0; round < 6; round++) {
    // Odd rounds send the window's CmdSNs last first: the target holds each
    // until the ones before it arrive, deciding "ahead of ExpCmdSN, within
    // MaxCmdSN" across the wrap.
    const base = c.cmdSN;
    const order = Array.from({ length: 8 }, (_, i) => (round % 2 === 1 ? 7 - i : i));
    const sent = new Set<number>();
    for (const i of order) {
      sent.add(itt);
      c.command({ itt: itt++, cdb: read10(i, 1), read: true, edtl: 512, cmdSN: (base + i) >>> 0 });
    }
    c.cmdSN = (base + 8) >>> 0;
    for (let n = 0; n < 8; n++) {
      const p = await c.next(0x25);
      if (p === null) {
        bad.push(`round ${round}: ${8 - n} reads unanswered`);
        break;
      }
      const got = p.bhs.readUInt32BE(16);
      if (!sent.delete(got) || (p.bhs[1] & 0x01) === 0 || p.bhs[3] !== 0) bad.push(`itt ${got}: flags ${p.bhs[1].toString(16)} status ${p.bhs[3]}`);
      statSNs.push(p.bhs.readUInt32BE(24));
      lastExpCmdSN = p.bhs.readUInt32BE(28);
      // MaxCmdSN - ExpCmdSN + 1 in serial arithmetic: the commands the initiator may still send.
      windows.push(((p.bhs.readUInt32BE(32) - lastExpCmdSN) >>> 0) + 1);
    }
  }
  t.deepEqual(bad, [], 'every read answered GOOD in its Data-In');
  t.deepEqual(statSNs, Array.from({ length: 48 }, (_, i) => (statSN + 1 + i) >>> 0), 'StatSN counts on by one through 0');
  t.true(statSNs.includes(0) && statSNs.includes(0xffffffff), 'the StatSNs crossed the wrap');
  t.deepEqual(windows.filter((w) => w < 1 || w > 8), [], 'the window never closed or grew beyond queue_depth across the wrap (a real initiator would stall)');
  t.is(lastExpCmdSN, c.cmdSN, 'ExpCmdSN after the last read is the next CmdSN, past the wrap');
  t.true(c.cmdSN > 0 && c.cmdSN < 0x100, 'the CmdSNs crossed the wrap');
});

test('a write through R2T and Data-Out lands, and reads back', async (t) => {
  const c = await session([['InitialR2T', 'Yes'], ['ImmediateData', 'No']]);
  const data = Buffer.alloc(4096, 0x5a);
  c.command({ itt: 10, cdb: write10(100, 8), write: true, edtl: 4096 });
  const r2t = await c.next(0x31);
  t.truthy(r2t);
  t.is(r2t!.bhs.readUInt32BE(40), 0, 'buffer offset');
  t.is(r2t!.bhs.readUInt32BE(44), 4096, 'desired length');
  const d = Buffer.alloc(48);
  d[0] = 0x05;
  d[1] = 0x80;
  d.writeUInt32BE(10, 16);
  d.writeUInt32BE(r2t!.bhs.readUInt32BE(20), 20);
  c.send(d, data);
  const rsp = await c.next(0x21);
  t.is(rsp!.bhs[3], 0);
  const back = Buffer.alloc(4096);
  await f.backends[0].backend.read(back, 100 * 512);
  t.true(back.equals(data));
});

test('a Data-Out with an out-of-order DataSN fails only its task: 0B 47/05 after the last Data-Out, nothing written, the connection stays', async (t) => {
  const c = await session([['InitialR2T', 'Yes'], ['ImmediateData', 'No']]);
  const before = Buffer.alloc(1024);
  await f.backends[0].backend.read(before, 300 * 512);
  c.command({ itt: 11, cdb: write10(300, 2), write: true, edtl: 1024 });
  const r2t = await c.next(0x31);
  t.truthy(r2t);
  // Two Data-Out PDUs of one R2T, both DataSN 0 (RFC 7143 §11.7.5: the second must be 1).
  for (const [offset, final] of [[0, 0], [512, 0x80]] as const) {
    const d = Buffer.alloc(48);
    d[0] = 0x05;
    d[1] = final;
    d.writeUInt32BE(11, 16);
    d.writeUInt32BE(r2t!.bhs.readUInt32BE(20), 20);
    d.writeUInt32BE(0, 36);
    d.writeUInt32BE(offset, 40);
    c.send(d, Buffer.alloc(512, 0xc3));
  }
  const rsp = await c.next(0x21);
  t.truthy(rsp);
  t.is(rsp!.bhs.readUInt32BE(16), 11);
  t.is(rsp!.bhs[3], 2, 'CHECK CONDITION');
  t.is(rsp!.data[2 + 2] & 0x0f, 0x0b, 'ABORTED COMMAND');
  t.is(rsp!.data[2 + 12], 0x47);
  t.is(rsp!.data[2 + 13], 0x05, 'PROTOCOL SERVICE CRC ERROR');
  const after = Buffer.alloc(1024);
  await f.backends[0].backend.read(after, 300 * 512);
  t.true(after.equals(before), 'nothing written');
  c.command({ itt: 12, cdb: Buffer.alloc(16), edtl: 0 });
  const tur = await c.next(0x21);
  t.is(tur?.bhs[3], 0, 'the connection still serves commands');
  t.false(c.closed);
});

test('a READ(10) flagged W runs moving no data: GOOD, underflow residual of the whole EDTL, nothing written', async (t) => {
  const c = await session([['InitialR2T', 'No'], ['ImmediateData', 'Yes']]);
  const before = Buffer.alloc(512);
  await f.backends[0].backend.read(before, 0);
  c.command({ itt: 13, cdb: read10(0, 1), write: true, edtl: 512, data: Buffer.alloc(512, 0xa6) });
  const rsp = await c.next(0x21);
  t.truthy(rsp);
  t.is(rsp!.bhs[3], 0, 'GOOD');
  t.is(rsp!.bhs[1] & 0x06, 0x02, 'U, not O');
  t.is(rsp!.bhs.readUInt32BE(44), 512, 'residual: none of the data-out was used');
  t.is(c.received.filter((p) => p.op === 0x25 && p.bhs.readUInt32BE(16) === 13).length, 0, 'no Data-In');
  const after = Buffer.alloc(512);
  await f.backends[0].backend.read(after, 0);
  t.true(after.equals(before), 'the data-out was not written');
});

test('a read of a LUN with CHECK CONDITION carries the sense in the SCSI Response', async (t) => {
  const c = await session();
  c.command({ itt: 20, cdb: read10(0xfffffff0, 1), read: true, edtl: 512 });
  const rsp = await c.next(0x21);
  t.is(rsp!.bhs[3], 2, 'CHECK CONDITION');
  const senseLength = rsp!.data.readUInt16BE(0);
  t.true(senseLength >= 18);
  t.is(rsp!.data[2 + 2] & 0x0f, 5, 'ILLEGAL REQUEST');
  t.is(rsp!.data[2 + 12], 0x21, 'LBA OUT OF RANGE');
  t.is(rsp!.bhs[1] & 0x02, 0x02, 'U: nothing of the 512 bytes moved');
  t.is(rsp!.bhs.readUInt32BE(44), 512);
});

test('NOP-Out is echoed with its data; an idle initiator gets a NOP-In ping', async (t) => {
  const c = await session();
  const h = Buffer.alloc(48);
  h[0] = 0x40;
  h[1] = 0x80;
  h.writeUInt32BE(0x1234, 16);
  h.writeUInt32BE(0xffffffff, 20);
  h.writeUInt32BE(c.cmdSN, 24);
  c.send(h, Buffer.from('ping!'));
  const rsp = await c.next(0x20);
  t.is(rsp!.bhs.readUInt32BE(16), 0x1234);
  t.is(rsp!.data.toString(), 'ping!');
  const ping = await c.next(0x20, 3000);
  t.truthy(ping, 'the target pings after keepalive');
  t.is(ping!.bhs.readUInt32BE(16), 0xffffffff);
  t.not(ping!.bhs.readUInt32BE(20), 0xffffffff);
});

test('an unknown opcode gets a Reject and the connection stays; an oversized segment ends only that connection', async (t) => {
  const bystander = await session([], Buffer.from([0x80, 0, 0, 0, 0, 9]));
  const c = await session([], Buffer.from([0x80, 0, 0, 0, 0, 8]));
  const h = Buffer.alloc(48);
  h[0] = 0x1c; // No such initiator opcode.
  h[1] = 0x80;
  c.send(h);
  const rej = await c.next(0x3f);
  t.is(rej!.bhs[2], 0x05, 'command not supported');
  t.is(rej!.data.length, 48);
  c.command({ itt: 30, cdb: read10(0, 1), read: true, edtl: 512 });
  t.truthy(await c.next(0x25), 'still serving');
  // A data segment longer than the target's MaxRecvDataSegmentLength.
  const big = Buffer.alloc(48);
  big[0] = 0x01;
  big[1] = 0xa0;
  big.writeUInt32BE(31, 16);
  big.writeUInt32BE(4 << 20, 20);
  big[5] = 0x7f;
  c.socket.write(big);
  t.is((await c.next(0x3f))?.bhs[2], 0x04, 'protocol error');
  await c.whenClosed;
  bystander.command({ itt: 1, cdb: read10(0, 1), read: true, edtl: 512 });
  t.truthy(await bystander.next(0x25), 'the other session never noticed');
});

test('task management: ABORT TASK of a write waiting for data, LUN RESET of an unmapped LUN', async (t) => {
  const c = await session([['InitialR2T', 'Yes'], ['ImmediateData', 'No']]);
  c.command({ itt: 40, cdb: write10(0, 8), write: true, edtl: 4096 });
  t.truthy(await c.next(0x31));
  const tmf = (fn: number, itt: number, ref: number, lun = 0, refCmdSN = c.cmdSN - 1): void => {
    const h = Buffer.alloc(48);
    h[0] = 0x42;
    h[1] = 0x80 | fn;
    h[9] = lun;
    h.writeUInt32BE(itt, 16);
    h.writeUInt32BE(ref, 20);
    h.writeUInt32BE(c.cmdSN, 24);
    h.writeUInt32BE(refCmdSN, 32);
    c.send(h);
  };
  tmf(1, 41, 40);
  const rsp = await c.next(0x22);
  t.is(rsp!.bhs.readUInt32BE(16), 41);
  t.is(rsp!.bhs[2], 0, 'function complete');
  t.is(await c.next(0x21, 200), null, 'the aborted task is not answered');
  tmf(1, 42, 999, 0, c.cmdSN + 3);
  t.is((await c.next(0x22))!.bhs[2], 1, 'task does not exist');
  tmf(5, 43, 0xffffffff, 7);
  t.is((await c.next(0x22))!.bhs[2], 2, 'LUN does not exist');
  tmf(5, 44, 0xffffffff, 0);
  t.is((await c.next(0x22))!.bhs[2], 0, 'LUN reset');
  tmf(8, 45, 40);
  t.is((await c.next(0x22))!.bhs[2], 4, 'no task reassignment at level 0');
});

test('logout answers and closes; a second login of the same ISID reinstates the session', async (t) => {
  const isid = Buffer.from([0x80, 0, 0, 0, 0x42, 1]);
  const a = await session([], isid);
  const b = await session([], isid);
  await a.whenClosed;
  t.true(a.closed, 'the old session is closed by reinstatement');
  const h = Buffer.alloc(48);
  h[0] = 0x46;
  h[1] = 0x80;
  h.writeUInt32BE(50, 16);
  h.writeUInt32BE(b.cmdSN, 24);
  b.send(h);
  const rsp = await b.next(0x26);
  t.is(rsp!.bhs[2], 0);
  await b.whenClosed;
  t.true(b.closed);
});

test('CRC32C header and data digests: negotiated, checked, and a bad header digest ends the connection', async (t) => {
  const c = await session([
    ['HeaderDigest', 'CRC32C,None'],
    ['DataDigest', 'CRC32C,None'],
  ], undefined, true);
  c.command({ itt: 60, cdb: read10(0, 2), read: true, edtl: 1024 });
  const d = await c.next(0x25);
  t.truthy(d, 'Data-In with digests parsed');
  t.is(d!.data.length, 1024);
  const h = Buffer.alloc(48);
  h[0] = 0x40;
  h[1] = 0x80;
  h.writeUInt32BE(61, 16);
  h.writeUInt32BE(0xffffffff, 20);
  h.writeUInt32BE(c.cmdSN, 24);
  const bad = Buffer.alloc(4);
  bad.writeUInt32LE(crc32c(h) ^ 1);
  c.socket.write(Buffer.concat([h, bad]));
  await c.whenClosed;
  t.true(c.closed);
});

test('a connection that does not log in within login_timeout_ms is closed', async (t) => {
  const c = await RawInitiator.open(f.port);
  open.push(c);
  await c.whenClosed;
  t.true(c.closed);
  t.true(f.log.some((l) => /login did not complete in time/.test(l.message)));
});

test('a Data-Out with a bad data digest gets a Reject (data digest error) and the connection ends', async (t) => {
  const c = await session([['HeaderDigest', 'CRC32C'], ['DataDigest', 'CRC32C'], ['InitialR2T', 'Yes'], ['ImmediateData', 'No']], undefined, true);
  c.command({ itt: 70, cdb: write10(0, 1), write: true, edtl: 512 });
  const r2t = await c.next(0x31);
  t.truthy(r2t);
  const d = Buffer.alloc(48);
  d[0] = 0x05;
  d[1] = 0x80;
  d[7] = 0; // the length is set below by hand: this PDU is written raw
  d.writeUInt32BE(70, 16);
  d.writeUInt32BE(r2t!.bhs.readUInt32BE(20), 20);
  d[6] = 2; // 512 bytes
  const hd = Buffer.alloc(4);
  hd.writeUInt32LE(crc32c(d));
  const data = Buffer.alloc(512, 7);
  const dd = Buffer.alloc(4);
  dd.writeUInt32LE(crc32c(data) ^ 0xffff);
  c.socket.write(Buffer.concat([d, hd, data, dd]));
  const rej = await c.next(0x3f);
  t.is(rej?.bhs[2], 0x02, 'data digest error');
  await c.whenClosed;
  t.true(c.closed);
});

test.after('connections give their fds back', async (t) => {
  for (const c of open) c.close();
  for (let i = 0; i < 100 && (f.server.sessions.size > 0 || resources().fds > fdsBefore); i++) await new Promise((r) => setTimeout(r, 20));
  t.is(f.server.sessions.size, 0);
  t.true(resources().fds <= fdsBefore);
});
