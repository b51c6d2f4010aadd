// Text Requests in the full feature phase (RFC 7143 §11.10, §11.11, Appendix
// C), with a raw-socket initiator: SendTargets answers by the initiator's ACL,
// as REPORT LUNS does.
import test from 'ava';
import { encodeText, parseText } from '../../target/iscsi/text.js';
import { INITIATOR, IQN, startIscsi, type IscsiFixture } from './portal-fixture.js';
import { loginStatus, RawInitiator } from './raw-initiator.js';

const STRANGER = 'iqn.2026-12.io.rblk:stranger';
const RESERVED = 0xffffffff;
const F = 0x80;

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
