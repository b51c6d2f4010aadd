// The target's session layer seen from the wire: login and authentication,
// malformed and out-of-turn capsules, credits, task management, keep-alive.
// Each violation must end only the offending session.
import test from 'ava';
import {
  capsuleBuffer,
  decodeCapsule,
  LoginRejectReason,
  LogoutReason,
  Opcode,
  TaskFunction,
  TaskResponse,
  TRAIN_VERSION,
  type Capsule,
} from '../../protocol/wire/index.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { decodeSense } from '../../protocol/scsi/sense.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { LoginError } from '../../initiator/connection.js';
import type { InitiatorConnection } from '../../initiator/transport/transport.js';
import { pattern } from '../helpers/fabric-pair.js';
import { startTarget, TARGET_NAME, type Fixture } from '../helpers/target-fixture.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { untilValue as waitFor } from '../../bench/kit/wait.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const SECRET = 'correct horse battery staple';

/** The reason of the T_LOGOUT among what a raw connection received, if one came. */
function logoutReason(got: readonly Capsule[]): number | undefined {
  const out = got.find((x) => x.op === Opcode.T_LOGOUT);
  return out && 'reason' in out ? out.reason : undefined;
}

/** A bare transport connection: capsules in and out, no initiator logic. */
async function raw(f: Fixture, protocolVersion?: number): Promise<{ conn: InitiatorConnection; got: Capsule[]; closed: Promise<string> }> {
  const conn = await f.initiatorTransport.connect({
    protocolVersion,
    address: f.address,
    port: f.port,
    provider: f.kind === 'loop' ? undefined : f.kind,
    maxCapsule: 1024,
    queueDepth: 4,
    receiveSize: 1024,
    ioPoolSize: 1 << 20,
    ioChunkSize: 1 << 20,
  });
  const got: Capsule[] = [];
  conn.onCapsule = (b) => got.push(decodeCapsule(b, { from: 'target' }));
  const closed = new Promise<string>((r) => (conn.onClose = r));
  return { conn, got, closed };
}

const loginReq = (name = 'iqn.2026-11.io.rblk:raw', target = TARGET_NAME): Capsule => ({
  op: Opcode.LOGIN_REQ,
  tag: 1n,
  authRequired: false,
  maxItCapsule: 1024,
  maxTiCapsule: 1024,
  immediateDataSize: 512,
  credits: 4,
  initiatorName: name,
  targetName: target,
});

for (const kind of ['loop', 'tcp'] as const) {
  test.serial(`${kind}: mutual authentication succeeds with the right secret and fails with a wrong one`, async (t) => {
    const f = await startTarget(kind, undefined, { secrets: { 'iqn.2026-11.io.rblk:alice': SECRET }, authRequired: true });
    t.teardown(() => f.close());
    const ok = await f.connect({ initiatorName: 'iqn.2026-11.io.rblk:alice', secret: SECRET });
    t.true(ok.sessionId > 0n);
    const wrong = await t.throwsAsync(f.connect({ initiatorName: 'iqn.2026-11.io.rblk:alice', secret: 'not the right secret at all' }), { instanceOf: LoginError });
    t.is(wrong?.code, 'AUTH_FAILED');
    const none = await t.throwsAsync(f.connect({ initiatorName: 'iqn.2026-11.io.rblk:mallory' }), { instanceOf: LoginError });
    t.is(none?.code, 'AUTH_FAILED', 'auth.required refuses an initiator with no secret');
    t.true(f.log.some((l) => l.level === 'warn' && /authentication failed/.test(l.message)));
    // The authenticated session was not disturbed by the refusals.
    const r = await ok.command({ lun: 0, cdb: cdb.testUnitReady() });
    t.true(r.status === ScsiStatus.GOOD || r.status === ScsiStatus.CHECK_CONDITION);
  });

  test.serial(`${kind}: LUN masking hides volumes and read-only access refuses writes`, async (t) => {
    const f = await startTarget(kind, [
      { name: 'shared', lun: 0, size: 1 << 20 },
      { name: 'alice-only', lun: 1, size: 1 << 20, acl: { 'iqn.2026-11.io.rblk:alice': 'rw', 'iqn.2026-11.io.rblk:bob': 'ro' } },
    ]);
    t.teardown(() => f.close());
    const eve = await f.connect({ initiatorName: 'iqn.2026-11.io.rblk:eve' });
    const luns = await eve.allocate(64);
    let r = await eve.command({ lun: 0, cdb: cdb.reportLuns(64), dataIn: luns });
    t.is(r.status, ScsiStatus.GOOD);
    t.is(luns.buffer.readUInt32BE(0), 8, 'eve sees one LUN');
    r = await eve.command({ lun: 1, cdb: cdb.testUnitReady() });
    t.deepEqual(sense(r.sense), [5, 0x25, 0], 'LUN 1 does not exist for eve');
    const bob = await f.connect({ initiatorName: 'iqn.2026-11.io.rblk:bob' });
    const buf = await bob.allocate(512);
    r = await bob.command({ lun: 1, cdb: cdb.write16(0, 1), dataOut: buf });
    if (sense(r.sense)[0] === 6) r = await bob.command({ lun: 1, cdb: cdb.write16(0, 1), dataOut: buf });
    t.deepEqual(sense(r.sense), [7, 0x27, 0], 'read-only ACL refuses a write');
    r = await bob.command({ lun: 1, cdb: cdb.read16(0, 1), dataIn: buf });
    t.is(r.status, ScsiStatus.GOOD, 'but reads');
  });

  test.serial(`${kind}: malformed and out-of-turn capsules end only that session`, async (t) => {
    const f = await startTarget(kind);
    t.teardown(() => f.close());
    const good = await f.connect();
    const buf = await good.allocate(4096);
    // 1. Garbage before login: LOGIN_REJ (protocol error), then disconnect.
    const a = await raw(f);
    await a.conn.send(Buffer.from('this is not a capsule at all, not even close'));
    t.truthy(await a.closed);
    const rej = a.got.find((c) => c.op === Opcode.LOGIN_REJ);
    t.is(rej && 'reason' in rej ? rej.reason : undefined, LoginRejectReason.PROTOCOL_ERROR);
    // 2. A CMD before login.
    const b = await raw(f);
    await b.conn.send(capsuleBuffer({ op: Opcode.CMD, tag: 5n, lun: 0, taskAttribute: 0, direction: 0, cdb: Buffer.alloc(16), data: { format: 0 } }));
    t.truthy(await b.closed);
    // 3. Logged in, then a truncated CMD: T_LOGOUT protocol error, disconnect.
    const c = await raw(f);
    await c.conn.send(capsuleBuffer(loginReq()));
    await waitFor(() => c.got.find((x) => x.op === Opcode.LOGIN_RSP), 'LOGIN_RSP');
    const cmd = capsuleBuffer({ op: Opcode.CMD, tag: 9n, lun: 0, taskAttribute: 0, direction: 0, cdb: Buffer.alloc(16), data: { format: 0 } });
    await c.conn.send(cmd.subarray(0, 30));
    t.truthy(await c.closed);
    t.is(logoutReason(c.got), LogoutReason.PROTOCOL_ERROR);
    // 4. Logged in, then a second LOGIN_REQ: unexpected capsule.
    const d = await raw(f);
    await d.conn.send(capsuleBuffer(loginReq()));
    await waitFor(() => d.got.find((x) => x.op === Opcode.LOGIN_RSP), 'LOGIN_RSP');
    await d.conn.send(capsuleBuffer(loginReq()));
    t.truthy(await d.closed);
    t.is(logoutReason(d.got), LogoutReason.UNEXPECTED_CAPSULE);
    t.true(f.log.filter((l) => /protocol violation/.test(l.message)).length >= 4, 'each reason was logged');
    // The well-behaved session never noticed.
    const data = pattern(4096, 3);
    data.copy(buf.buffer);
    let r = await good.command({ lun: 0, cdb: cdb.write16(8, 8), dataOut: buf });
    if (r.status !== ScsiStatus.GOOD) r = await good.command({ lun: 0, cdb: cdb.write16(8, 8), dataOut: buf });
    t.is(r.status, ScsiStatus.GOOD);
  });

  // docs/protocol.md §5.1: on version 5 a message may carry several CMDs, each
  // answered as if it came alone; anything but CMDs in one, a malformed one, or
  // one on an older version is a protocol error that ends only its session.
  test.serial(`${kind}: trains of CMDs are answered capsule by capsule; a bad train, or one before version 5, ends only its session`, async (t) => {
    const f = await startTarget(kind);
    t.teardown(() => f.close());
    const good = await f.connect();
    const tur = (tag: bigint): Buffer => capsuleBuffer({ op: Opcode.CMD, tag, lun: 0, taskAttribute: 0, direction: 0, cdb: Buffer.concat([cdb.testUnitReady(), Buffer.alloc(10)]), data: { format: 0 } });
    const login = async (version?: number): Promise<Awaited<ReturnType<typeof raw>>> => {
      const c = await raw(f, version);
      await c.conn.send(capsuleBuffer(loginReq()));
      await waitFor(() => c.got.find((x) => x.op === Opcode.LOGIN_RSP), 'LOGIN_RSP');
      return c;
    };
    // 1. Three CMDs in one message: three RSPs, one per tag, GOOD (the first TUR sees the power-on unit attention).
    const a = await login();
    t.is(a.conn.version, TRAIN_VERSION);
    await a.conn.send(Buffer.concat([tur(21n), tur(22n), tur(23n)]));
    await waitFor(() => a.got.filter((x) => x.op === Opcode.RSP).length === 3 || undefined, 'three RSPs');
    const rsps = a.got.filter((x): x is Capsule & { op: typeof Opcode.RSP; status: number } => x.op === Opcode.RSP);
    t.deepEqual(rsps.map((x) => x.tag).sort(), [21n, 22n, 23n]);
    t.is(rsps.find((x) => x.tag === 23n)?.status, ScsiStatus.GOOD);
    // 2. A KEEPALIVE inside a train: T_LOGOUT protocol error; the CMD before it is not run either.
    const b = await login();
    await b.conn.send(Buffer.concat([tur(31n), capsuleBuffer({ op: Opcode.KEEPALIVE, tag: 32n })]));
    t.truthy(await b.closed);
    t.is(logoutReason(b.got), LogoutReason.PROTOCOL_ERROR);
    t.false(b.got.some((x) => x.op === Opcode.RSP));
    t.true(f.log.some((l) => /only CMD capsules travel in a train/.test(l.message)), 'the reason was logged');
    // 3. A train whose last capsule is cut short.
    const c = await login();
    await c.conn.send(Buffer.concat([tur(41n), tur(42n)]).subarray(0, 2 * 48 - 1));
    t.truthy(await c.closed);
    t.is(logoutReason(c.got), LogoutReason.PROTOCOL_ERROR);
    // 4. Two CMDs in one message on version 4: the length field does not match what arrived.
    const d = await login(TRAIN_VERSION - 1);
    t.is(d.conn.version, TRAIN_VERSION - 1);
    await d.conn.send(Buffer.concat([tur(51n), tur(52n)]));
    t.truthy(await d.closed);
    t.is(logoutReason(d.got), LogoutReason.PROTOCOL_ERROR);
    t.true(f.log.some((l) => /LENGTH_MISMATCH/.test(l.message)), 'the version-4 refusal was logged');
    // The well-behaved session never noticed.
    let r = await good.command({ lun: 0, cdb: cdb.testUnitReady() });
    if (r.status !== ScsiStatus.GOOD) r = await good.command({ lun: 0, cdb: cdb.testUnitReady() });
    t.is(r.status, ScsiStatus.GOOD);
    await a.conn.close();
  });

  test.serial(`${kind}: a credit overrun and a reused tag end the session with the right reason`, async (t) => {
    const f = await startTarget(kind, undefined, { queueDepth: 2 });
    t.teardown(() => f.close());
    const a = await raw(f);
    await a.conn.send(capsuleBuffer({ ...loginReq(), credits: 2 } as Capsule));
    const rsp = await waitFor(() => a.got.find((x) => x.op === Opcode.LOGIN_RSP), 'LOGIN_RSP');
    t.is('credits' in rsp ? rsp.credits : 0, 2);
    // Hold reads at a gate so the first two commands stay outstanding: the third overruns 2 credits.
    const release = holdReads(f);
    t.teardown(release);
    // First consume the login's unit attention, which would answer at once.
    await a.conn.send(capsuleBuffer({ op: Opcode.CMD, tag: 2n, lun: 0, taskAttribute: 0, direction: 0, cdb: Buffer.concat([cdb.testUnitReady(), Buffer.alloc(10)]), data: { format: 0 } }));
    await waitFor(() => a.got.find((x) => x.op === Opcode.RSP && x.tag === 2n), 'RSP to TEST UNIT READY');
    const io = await a.conn.allocate(1 << 20);
    for (const tag of [10n, 11n, 12n]) {
      const segs = io.segments(0, 1 << 20);
      await a.conn.send(
        capsuleBuffer({ op: Opcode.CMD, tag, lun: 0, taskAttribute: 0, direction: 2, cdb: cdb.read16(0, 2048), data: { format: 1, descriptor: segs[0] } }),
      );
    }
    t.truthy(await a.closed);
    t.is(logoutReason(a.got), LogoutReason.CREDIT_OVERRUN);
    const b = await raw(f);
    await b.conn.send(capsuleBuffer(loginReq()));
    await waitFor(() => b.got.find((x) => x.op === Opcode.LOGIN_RSP), 'LOGIN_RSP');
    await b.conn.send(capsuleBuffer({ op: Opcode.CMD, tag: 3n, lun: 0, taskAttribute: 0, direction: 0, cdb: Buffer.concat([cdb.testUnitReady(), Buffer.alloc(10)]), data: { format: 0 } }));
    await waitFor(() => b.got.find((x) => x.op === Opcode.RSP && x.tag === 3n), 'RSP to TEST UNIT READY');
    const io2 = await b.conn.allocate(1 << 20);
    for (const tag of [20n, 20n]) {
      await b.conn.send(
        capsuleBuffer({ op: Opcode.CMD, tag, lun: 0, taskAttribute: 0, direction: 2, cdb: cdb.read16(0, 2048), data: { format: 1, descriptor: io2.segments(0, 1 << 20)[0] } }),
      );
    }
    t.truthy(await b.closed);
    t.true(f.log.some((l) => /tag 20 is already outstanding/.test(l.message)));
    release();
  });

  test.serial(`${kind}: ABORT TASK ends a command with TASK ABORTED before the TSK_RSP`, async (t) => {
    const f = await startTarget(kind);
    t.teardown(() => f.close());
    const c = await f.connect();
    await c.command({ lun: 0, cdb: cdb.testUnitReady() }); // consume the login unit attention
    // Hold reads at a gate so the command is surely outstanding when the abort lands.
    const open = holdReads(f);
    const buf = await c.allocate(4096);
    const tag = c.peekNextTag();
    const pending = c.command({ lun: 0, cdb: cdb.read16(0, 8), dataIn: buf });
    await new Promise((r) => setTimeout(r, 50));
    const tm = c.taskManagement(0, TaskFunction.ABORT_TASK, tag);
    await new Promise((r) => setTimeout(r, 20));
    open();
    const [r, response] = await Promise.all([pending, tm]);
    t.is(r.status, ScsiStatus.TASK_ABORTED);
    t.is(response, TaskResponse.COMPLETE);
    t.is(await c.taskManagement(0, TaskFunction.ABORT_TASK, 999n), TaskResponse.COMPLETE, 'aborting an unknown tag completes');
    t.is(await c.taskManagement(9, TaskFunction.LUN_RESET), TaskResponse.INCORRECT_LUN);
    t.is(await c.taskManagement(0, TaskFunction.CLEAR_ACA), TaskResponse.NOT_SUPPORTED);
    const ok = await c.command({ lun: 0, cdb: cdb.read16(0, 8), dataIn: buf });
    t.is(ok.status, ScsiStatus.GOOD, 'the session carries on');
  });

  test.serial(`${kind}: FENCE CONNECTION ends the initiator's own named connection only; version 2 may not send it`, async (t) => {
    const f = await startTarget(kind);
    t.teardown(() => f.close());
    const c1 = await f.connect();
    const c2 = await f.connect();
    const stranger = await f.connect({ initiatorName: 'iqn.2026-11.io.rblk:stranger' });
    t.not(c1.sessionId, c2.sessionId);
    t.is(await stranger.taskManagement(0, TaskFunction.FENCE_CONNECTION, c1.sessionId), TaskResponse.FAILED, "another initiator's connection is refused");
    t.is(await c2.taskManagement(0, TaskFunction.FENCE_CONNECTION, c2.sessionId + 1_000_000n), TaskResponse.COMPLETE, 'an id no connection has: nothing to fence');
    t.is(await c2.taskManagement(0, TaskFunction.FENCE_CONNECTION, c2.sessionId), TaskResponse.COMPLETE, 'its own id: nothing happens');
    t.false(c1.isClosed);
    await c1.command({ lun: 0, cdb: cdb.testUnitReady() });
    t.is(await c2.taskManagement(0, TaskFunction.FENCE_CONNECTION, c1.sessionId), TaskResponse.COMPLETE);
    await waitFor(() => (c1.isClosed ? true : undefined), 'the fenced connection to close');
    t.true(f.log.some((l) => l.message === `FENCE CONNECTION of session ${c1.sessionId}: fenced`));
    const r = await c2.command({ lun: 0, cdb: cdb.testUnitReady() });
    t.true(r.status === ScsiStatus.GOOD || r.status === ScsiStatus.CHECK_CONDITION, 'the asking connection carries on');
    t.false(stranger.isClosed, "the refused stranger's connection is untouched too");

    const old = await f.connect({ protocolVersion: 2 });
    t.is(old.version, 2);
    await t.throwsAsync(old.taskManagement(0, TaskFunction.FENCE_CONNECTION, c2.sessionId));
    await waitFor(() => (old.isClosed ? true : undefined), 'the version-2 connection to be dropped');
    t.true(f.log.some((l) => /FENCE CONNECTION on a version 2 connection/.test(l.message)));
    t.false(c2.isClosed, 'and nothing else');
  });

  test.serial(`${kind}: a silent initiator is logged out after twice the keep-alive interval`, async (t) => {
    const f = await startTarget(kind, undefined, { keepAliveMs: 150 });
    t.teardown(() => f.close());
    // The target's keep-alive timer is unref'd (it must not keep a daemon alive);
    // over the loop transport nothing else would keep this test's process up.
    const alive = setInterval(() => undefined, 1000);
    t.teardown(() => clearInterval(alive));
    const a = await raw(f);
    await a.conn.send(capsuleBuffer(loginReq()));
    const rsp = await waitFor(() => a.got.find((x) => x.op === Opcode.LOGIN_RSP), 'LOGIN_RSP');
    t.is('keepAliveMs' in rsp ? rsp.keepAliveMs : 0, 150);
    await a.conn.send(capsuleBuffer({ op: Opcode.KEEPALIVE, tag: 77n }));
    const ka = await waitFor(() => a.got.find((x) => x.op === Opcode.KEEPALIVE_RSP), 'KEEPALIVE_RSP');
    t.is(ka.tag, 77n);
    t.truthy(await a.closed, 'then silence ends it');
    t.is(logoutReason(a.got), LogoutReason.INACTIVE);
  });
}

/** Makes the volume's reads wait until the returned function is called. */
function holdReads(f: Fixture): () => void {
  const backend = f.server.volume('vol0')!.lu.backend as unknown as { read: (b: Buffer, o: number) => Promise<void> };
  const orig = backend.read.bind(backend);
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  backend.read = async (b, o) => {
    await gate;
    return orig(b, o);
  };
  return () => {
    backend.read = orig;
    open();
  };
}

function sense(b: Buffer): number[] {
  const s = decodeSense(b);
  return s ? [s.key, s.asc, s.ascq] : [];
}
