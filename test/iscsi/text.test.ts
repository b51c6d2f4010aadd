// Text Requests in the full feature phase (RFC 7143 §11.10, §11.11, Appendix
// C), with a raw-socket initiator: SendTargets answers by the initiator's ACL,
// as REPORT LUNS does; text continued over several Text Requests (C bit) is
// put together and answered once; an answer longer than the initiator's
// MaxRecvDataSegmentLength goes out in parts, each pulled by an empty Text
// Request with the ITT and TTT of the exchange.
import test from 'ava';
import { encodeText, parseText } from '../../target/iscsi/text.js';
import { INITIATOR, IQN, startIscsi, type IscsiFixture } from './portal-fixture.js';
import { loginStatus, RawInitiator, type RawPdu } from './raw-initiator.js';

const STRANGER = 'iqn.2026-12.io.rblk:stranger';
const RESERVED = 0xffffffff;
const F = 0x80;
const C = 0x40;

let f: IscsiFixture;
const open: RawInitiator[] = [];

test.before(async () => {
  // Only INITIATOR may see the one volume.
  f = await startIscsi([{ name: 'vol0', lun: 0, size: 4 << 20, acl: { [INITIATOR]: 'rw' } }]);
});
test.after.always(async () => {
  for (const c of open) c.close();
  await f?.close();
});

async function discovery(initiator: string, keys: [string, string][] = []): Promise<RawInitiator> {
  const c = await RawInitiator.open(f.port);
  open.push(c);
  const r = await c.login({ initiator, discovery: true, keys });
  if (!r || loginStatus(r) !== 0) throw new Error(`discovery login failed: ${r ? loginStatus(r).toString(16) : 'closed'}`);
  return c;
}

/** A Text Request (non-immediate: it takes a CmdSN). */
function text(c: RawInitiator, o: { itt: number; ttt?: number; flags: number; data?: Buffer }): void {
  const h = Buffer.alloc(48);
  h[0] = 0x04;
  h[1] = o.flags;
  h.writeUInt32BE(o.itt, 16);
  h.writeUInt32BE(o.ttt ?? RESERVED, 20);
  h.writeUInt32BE(c.cmdSN, 24);
  c.cmdSN = (c.cmdSN + 1) >>> 0;
  h.writeUInt32BE(c.expStatSN, 28);
  c.send(h, o.data);
}

const ttt = (p: RawPdu): number => p.bhs.readUInt32BE(20);
const itt = (p: RawPdu): number => p.bhs.readUInt32BE(16);

test('SendTargets lists the target only to an initiator that may see one of its LUNs', async (t) => {
  const allowed = await discovery(INITIATOR);
  text(allowed, { itt: 1, flags: F, data: encodeText([['SendTargets', 'All']]) });
  const yes = await allowed.next(0x24);
  t.is(new Map(parseText(yes!.data)).get('TargetName'), IQN);

  const stranger = await discovery(STRANGER);
  text(stranger, { itt: 1, flags: F, data: encodeText([['SendTargets', 'All']]) });
  const no = await stranger.next(0x24);
  t.truthy(no, 'the stranger gets a Text Response');
  t.is(no!.bhs[1] & F, F);
  t.is(no!.data.length, 0, 'an empty SendTargets answer: no target for this initiator');
  t.false(stranger.closed);
});

test('a Text Request continued with the C bit is put together and answered once', async (t) => {
  const c = await discovery(INITIATOR);
  const whole = encodeText([['SendTargets', 'All']]);
  // Split inside the key: the pair is whole only once both parts are in.
  text(c, { itt: 5, flags: C, data: whole.subarray(0, 7) });
  const ack = await c.next();
  t.truthy(ack, 'the target answered the continued request instead of closing');
  t.is(ack!.op, 0x24, 'a Text Response, not a Reject');
  t.is(itt(ack!), 5);
  t.is(ack!.data.length, 0, 'empty: it waits for the rest');
  t.is(ack!.bhs[1] & (F | C), 0, 'neither F nor C: more is expected');
  t.not(ttt(ack!), RESERVED, 'a target transfer tag for the initiator to copy');
  text(c, { itt: 5, ttt: ttt(ack!), flags: F, data: whole.subarray(7) });
  const answer = await c.next(0x24);
  t.is(answer!.bhs[1] & (F | C), F);
  t.is(ttt(answer!), RESERVED, 'the exchange is over');
  const keys = new Map(parseText(answer!.data));
  t.is(keys.get('TargetName'), IQN);
  t.is(keys.get('TargetAddress'), `127.0.0.1:${f.port},1`);
  t.false(c.closed);
});

test("an answer longer than the initiator's MaxRecvDataSegmentLength goes out in parts, each pulled by an empty Text Request", async (t) => {
  const c = await discovery(INITIATOR, [['MaxRecvDataSegmentLength', '512']]);
  // Forty private keys rblkd does not know: each is answered NotUnderstood, about 1.5 KiB in all.
  const asked: [string, string][] = [['SendTargets', 'All']];
  for (let i = 0; i < 40; i++) asked.push([`X-io.rblk.test-key-${String(i).padStart(2, '0')}`, 'value']);
  text(c, { itt: 9, flags: F, data: encodeText(asked) });
  const parts: RawPdu[] = [];
  for (;;) {
    const p = await c.next(0x24);
    t.truthy(p, 'a Text Response, not a close');
    if (!p) return;
    // Each part is a response of its own: StatSN counts it.
    if (parts.length > 0) t.is(p.bhs.readUInt32BE(24), (parts[parts.length - 1].bhs.readUInt32BE(24) + 1) >>> 0);
    parts.push(p);
    t.is(itt(p), 9);
    t.true(p.data.length <= 512, `a part of ${p.data.length} bytes fits the initiator's 512`);
    if ((p.bhs[1] & C) === 0) break;
    t.is(p.bhs[1] & F, 0, 'a continued part is not final');
    t.not(ttt(p), RESERVED);
    // RFC 7143 §11.11: the initiator pulls the next part with an empty request of the same ITT and TTT.
    text(c, { itt: 9, ttt: ttt(p), flags: F });
  }
  t.true(parts.length >= 3, `${parts.length} parts`);
  const last = parts[parts.length - 1];
  t.is(last.bhs[1] & (F | C), F);
  t.is(ttt(last), RESERVED);
  const keys = new Map(parseText(Buffer.concat(parts.map((p) => p.data))));
  t.is(keys.get('TargetName'), IQN);
  for (let i = 0; i < 40; i++) t.is(keys.get(`X-io.rblk.test-key-${String(i).padStart(2, '0')}`), 'NotUnderstood');
  t.false(c.closed);
});

test('continued text is bounded: more than 64 KiB gathered is a protocol error', async (t) => {
  const c = await discovery(INITIATOR);
  const chunk = Buffer.alloc(40 * 1024, 0x61);
  text(c, { itt: 4, flags: C, data: chunk });
  const ack = await c.next(0x24);
  t.truthy(ack);
  text(c, { itt: 4, ttt: ttt(ack!), flags: C, data: chunk });
  const reject = await c.next(0x3f);
  t.truthy(reject, 'a Reject');
  t.is(reject!.bhs[2], 0x04, 'protocol error');
  await c.whenClosed;
  t.true(c.closed);
});

test('a Text Request naming a TTT of no exchange is a protocol error', async (t) => {
  const c = await discovery(INITIATOR);
  text(c, { itt: 3, ttt: 0x1234, flags: F, data: encodeText([['SendTargets', 'All']]) });
  const reject = await c.next(0x3f);
  t.truthy(reject, 'a Reject');
  t.is(reject!.bhs[2], 0x04, 'protocol error');
  await c.whenClosed;
  t.true(c.closed);
});
