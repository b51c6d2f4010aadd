// A wall-clock step (an NTP step, `date -s`) must neither end live sessions nor
// hide dead ones: keep-alive measures silence on the monotonic clock
// (docs/protocol.md §13). This file moves Date.now() of its own process, where
// the target and the initiators both run, and checks both directions.
import test from 'ava';
import { capsuleBuffer, decodeCapsule, Opcode, type Capsule } from '../../protocol/wire/index.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { startTarget, TARGET_NAME, type Fixture } from '../helpers/target-fixture.js';

const realNow = Date.now.bind(Date);
let step = 0;
Date.now = () => realNow() + step;
test.afterEach.always(() => {
  step = 0;
});
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

test.serial('the wall clock jumps an hour forward: no live session is ended, and each still answers', async (t) => {
  const f = await startTarget('loop', undefined, { keepAliveMs: 1000, maxSessions: 16 });
  t.teardown(() => f.close());
  const conns = [];
  for (let i = 0; i < 8; i++) conns.push(await f.connect({ initiatorName: `iqn.2026-11.io.rblk:step${i}` }));
  await sleep(1500);
  step = 3600_000;
  // Three keep-alive intervals after the step: a silence measured on the wall clock would be an hour long.
  await sleep(3000);
  const ended = f.log.filter((l) => /no capsule for|ends|closed/i.test(l.message)).map((l) => l.message);
  t.deepEqual(conns.map((c) => c.isClosed), new Array<boolean>(8).fill(false), ended.join('\n'));
  t.false(f.log.some((l) => /no capsule for/.test(l.message)), 'nobody was logged out INACTIVE');
  for (const c of conns) {
    // The first command of a new nexus may be told of the power-on (06 29/00) first.
    let r = await c.command({ lun: 0, cdb: cdb.testUnitReady() });
    if (r.status === ScsiStatus.CHECK_CONDITION) r = await c.command({ lun: 0, cdb: cdb.testUnitReady() });
    t.is(r.status, ScsiStatus.GOOD);
  }
  for (const c of conns) await c.close();
});

test.serial('the wall clock jumps a minute back: a silent initiator is still found gone within twice the keep-alive', async (t) => {
  const f = await startTarget('loop', undefined, { keepAliveMs: 500 });
  t.teardown(() => f.close());
  const conn = await f.initiatorTransport.connect({ address: f.address, port: f.port, maxCapsule: 1024, queueDepth: 4, receiveSize: 1024, ioPoolSize: 1 << 20, ioChunkSize: 1 << 20 });
  const got: Capsule[] = [];
  conn.onCapsule = (b) => got.push(decodeCapsule(b, { from: 'target' }));
  const closed = new Promise<string>((r) => (conn.onClose = r));
  const login: Capsule = { op: Opcode.LOGIN_REQ, tag: 1n, authRequired: false, maxItCapsule: 1024, maxTiCapsule: 1024, immediateDataSize: 512, credits: 4, initiatorName: 'iqn.2026-11.io.rblk:silent', targetName: TARGET_NAME };
  await conn.send(capsuleBuffer(login));
  while (!got.some((c) => c.op === Opcode.LOGIN_RSP)) await sleep(20);
  // From here on this initiator sends nothing, and the clock goes a minute back.
  step = -60_000;
  const outcome = await Promise.race([closed.then(() => 'closed'), sleep(8000).then(() => 'still logged in after 8 s')]);
  t.is(outcome, 'closed');
  t.true(f.log.some((l) => /no capsule for/.test(l.message)));
});
