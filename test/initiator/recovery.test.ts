// Timeouts and recovery against a real target: reconnecting across a target
// restart (same port, same backend), the loss timeout, ABORT TASK after a
// command timeout and the escalation past it, keep-alive probes, and unit
// attentions.
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { connect, RblkError, type RblkErrorCode, type RecoveryEvent, type SessionState } from '../../initiator/index.js';
import { LogoutReason, Opcode, TaskFunction, type Capsule } from '../../protocol/wire/index.js';
import { GatedBackend } from './helpers/gated-backend.js';
import { SpyTransport } from './helpers/spy-transport.js';
import { gated, pattern, startServer, TRANSPORTS, until, type TestTarget } from './helpers/target.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const MiB = 1 << 20;

async function rejects(t: import('ava').ExecutionContext, p: Promise<unknown>, code: RblkErrorCode, message: string | RegExp): Promise<RblkError | undefined> {
  const e = await t.throwsAsync(p, { instanceOf: RblkError, ...(typeof message === 'string' ? { message } : {}) });
  if (message instanceof RegExp) t.regex(e?.message ?? '', message);
  t.is(e?.code, code);
  return e;
}

function spyOf(options: ReturnType<TestTarget['options']>): SpyTransport {
  if (!(options.transport instanceof SpyTransport)) throw new Error('expected the loop spy transport');
  return options.transport;
}

const commandsOf = (sent: Capsule[]) => sent.filter((c) => c.op === Opcode.CMD);

for (const kind of TRANSPORTS) {
  test.serial(`${kind}: the session rides out a target restart and reissues what was in flight`, async (t) => {
    const backend = new GatedBackend(4 * MiB, { name: 'vol0' });
    const identifier = randomUUID();
    const first = await startServer(kind, [{ name: 'vol0', lun: 0, backend, identifier }]);
    let second: TestTarget | null = null;
    const s = await connect(first.options({ timeouts: { lossMs: 20_000 }, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } }));
    t.teardown(async () => {
      await s.close();
      await second?.close();
    });
    const states: SessionState[] = [];
    s.on('state', (state) => states.push(state));
    const vol = await s.open('vol0');
    const before = pattern(64 * 1024, 1);
    await vol.write(0, before);

    // A write and a COMPARE AND WRITE are stuck in the backend when the target goes down.
    const writes = backend.hold('write');
    const reads = backend.hold('read');
    const inFlight = pattern(8192, 2);
    const w = vol.write(MiB, inFlight);
    const caw = vol.compareAndWrite(2 * MiB, Buffer.alloc(512, 0xee), Buffer.alloc(512, 0x11));
    await writes.reached;
    await reads.reached;
    const closing = first.close();
    await rejects(
      t,
      caw,
      'CONNECTION_LOST',
      `compareAndWrite [${2 * MiB}, +512) on volume vol0: the connection was lost with the command outstanding; it is not reissued because it is not idempotent`,
    );
    await until(() => s.state === 'reconnecting', 'the session to notice');
    // Issued while no target is there: it waits for the reconnect.
    const during = pattern(4096, 3);
    const d = vol.write(3 * MiB, during);
    writes.release();
    reads.release();
    await closing;

    second = await startServer(kind, [{ name: 'vol0', lun: 0, backend, identifier }], { port: first.port });
    await w;
    await d;
    t.deepEqual(states, ['reconnecting', 'connected']);
    t.true((await vol.read(0, before.length)).equals(before), 'data written before the restart');
    t.true((await vol.read(MiB, inFlight.length)).equals(inFlight), 'the write in flight was reissued');
    t.true((await vol.read(3 * MiB, during.length)).equals(during), 'the write issued during the outage');
    t.true((await vol.read(2 * MiB, 512)).equals(Buffer.alloc(512)), 'the failed COMPARE AND WRITE wrote nothing');
    const direct = Buffer.alloc(inFlight.length);
    await backend.inner.read(direct, MiB);
    t.true(direct.equals(inFlight), 'and the backend holds it');
  });
}

test.serial('loop: after the loss timeout commands fail CONNECTION_LOST, and the session still comes back', async (t) => {
  const first = await startServer('loop', [{ name: 'vol0', lun: 0, identifier: randomUUID() }]);
  let second: TestTarget | null = null;
  const s = await connect(first.options({ timeouts: { lossMs: 200 }, reconnect: { initialDelayMs: 10, maxDelayMs: 40 } }));
  t.teardown(async () => {
    await s.close();
    await second?.close();
  });
  const errors: Error[] = [];
  s.on('error', (e) => errors.push(e));
  const vol = await s.open('vol0');
  await first.close();
  await until(() => s.state === 'reconnecting', 'reconnecting');
  const where = `${first.address}:${first.port}`;
  await rejects(
    t,
    vol.read(0, 512),
    'CONNECTION_LOST',
    `read [0, +512) on volume vol0: the session to ${where} is lost (no connection for 200 ms (last: the target logged this session out: SHUTDOWN))`,
  );
  t.is(s.state, 'lost');
  await rejects(t, vol.read(0, 512), 'CONNECTION_LOST', `read [0, +512) on volume vol0: the session to ${where} is lost`);
  t.true(errors.length > 0);
  t.regex(errors[0].message, new RegExp(`^reconnecting connection 0 to ${where} failed: cannot connect to `));
  second = await startServer('loop', [{ name: 'vol0', lun: 0, backend: gated(first, 'vol0') }], { port: first.port });
  await until(() => s.state === 'connected', 'the background reconnect');
  await vol.write(0, Buffer.alloc(512, 7));
  t.true((await vol.read(0, 512)).equals(Buffer.alloc(512, 7)));
});

test.serial('loop: a command that times out is aborted with ABORT TASK and fails TIMEOUT', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0 }]);
  const options = target.options({ timeouts: { commandMs: 100, abortMs: 5000 } });
  const spy = spyOf(options);
  const s = await connect(options);
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const vol = await s.open('vol0');
  const events: RecoveryEvent[] = [];
  s.on('recovery', (e) => events.push(e));
  const gate = gated(target, 'vol0').hold('read');
  // Let the read go only once the target has the ABORT TASK (loop delivery is FIFO).
  spy.onSend = (c) => {
    if (c.op === Opcode.TSK_MGMT) setImmediate(() => gate.release());
  };
  await rejects(t, vol.read(0, 4096), 'TIMEOUT', 'read [0, +4096) on volume vol0: no response within 100 ms; aborted');
  const sent = spy.connections[0].sent;
  const read = commandsOf(sent).filter((c) => c.op === Opcode.CMD && c.cdb[0] === 0x28);
  t.is(read.length, 1);
  const tmf = sent.filter((c) => c.op === Opcode.TSK_MGMT);
  t.is(tmf.length, 1);
  const abort = tmf[0];
  if (abort.op !== Opcode.TSK_MGMT || read[0].op !== Opcode.CMD) throw new Error('unreachable');
  t.is(abort.function, TaskFunction.ABORT_TASK);
  t.is(abort.taskTag, read[0].tag);
  t.deepEqual(events, [{ action: 'abort-task', connection: 0, lun: 0, tag: read[0].tag, reason: 'no response within 100 ms' }]);
  t.is(s.state, 'connected');
  t.is(spy.connections.length, 1, 'no reconnect was needed');
  await vol.write(0, Buffer.alloc(4096, 5));
  t.true((await vol.read(0, 4096)).equals(Buffer.alloc(4096, 5)));
});

test.serial('loop: when ABORT TASK and LOGICAL UNIT RESET both go unanswered, the connection is replaced', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0 }]);
  const options = target.options({ timeouts: { commandMs: 60, abortMs: 60 }, reconnect: { initialDelayMs: 10 } });
  const spy = spyOf(options);
  const s = await connect(options);
  const vol = await s.open('vol0');
  const gate = gated(target, 'vol0').hold('read');
  t.teardown(async () => {
    gate.release();
    await s.close();
    await target.close();
  });
  const events: RecoveryEvent[] = [];
  s.on('recovery', (e) => events.push(e));
  await rejects(t, vol.read(0, 4096), 'TIMEOUT', 'read [0, +4096) on volume vol0: no response within 60 ms; its connection was dropped to recover');
  t.deepEqual(
    events.map((e) => e.action),
    ['abort-task', 'lun-reset', 'reconnect'],
  );
  t.is(events[2].reason, `LOGICAL UNIT RESET did not end tag ${events[0].tag} within 60 ms`);
  const tmf = spy.connections[0].sent.flatMap((c) => (c.op === Opcode.TSK_MGMT ? [c.function] : []));
  t.deepEqual(tmf, [TaskFunction.ABORT_TASK, TaskFunction.LUN_RESET]);
  await until(() => spy.connections.length === 2 && s.connections[0].up, 'a new connection');
  gate.release();
  await vol.write(0, Buffer.alloc(4096, 6));
  t.true((await vol.read(0, 4096)).equals(Buffer.alloc(4096, 6)));
});

test.serial('loop: keep-alive probes an idle connection and replaces one whose target stopped answering', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0 }]);
  const options = target.options({ keepAliveMs: 40, reconnect: { initialDelayMs: 10 } });
  const spy = spyOf(options);
  const s = await connect(options);
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const vol = await s.open('vol0');
  const events: RecoveryEvent[] = [];
  s.on('recovery', (e) => events.push(e));
  const probes = () => commandsOf(spy.connections[0].sent).filter((c) => c.op === Opcode.CMD && c.cdb[0] === 0x00 && c.lun === 0);
  await until(() => probes().length >= 2, 'TEST UNIT READY probes on the idle connection');
  t.is(s.state, 'connected');
  // The target goes silent without the connection dropping.
  spy.connections[0].blackhole = true;
  await until(() => events.length > 0, 'the probe to go unanswered');
  t.deepEqual(events[0], { action: 'keep-alive', connection: 0, lun: 0, reason: 'TEST UNIT READY unanswered for 40 ms' });
  await until(() => spy.connections.length === 2 && s.connections[0].up, 'a new connection');
  await vol.write(0, Buffer.alloc(512, 8));
  t.true((await vol.read(0, 512)).equals(Buffer.alloc(512, 8)));
});

test.serial('loop: a registered buffer outlives its connection; after release() I/O through it fails BUFFER_RELEASED', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0 }]);
  const options = target.options({ reconnect: { initialDelayMs: 10 } });
  const spy = spyOf(options);
  const s = await connect(options);
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const vol = await s.open('vol0');
  await vol.write(0, pattern(4096, 9));
  const reg = s.allocate(4096);
  await vol.read(0, reg);
  t.true(reg.buffer.equals(pattern(4096, 9)));
  // An administrator logs the session out (T_LOGOUT reason 6): the initiator reconnects.
  for (const ts of target.server.sessions) await ts.logout(LogoutReason.ADMIN, 'test');
  await until(() => spy.connections.length === 2 && s.connections[0].up, 'the reconnect');
  t.true(reg.valid);
  t.true(reg.buffer.equals(pattern(4096, 9)), 'what was read into it is still there');
  reg.buffer.set(pattern(4096, 10));
  await vol.write(0, reg);
  reg.buffer.fill(0);
  await vol.read(0, reg);
  t.true(reg.buffer.equals(pattern(4096, 10)), 'the buffer carried a write and a read on the new connection');
  reg.release();
  await rejects(t, vol.read(0, reg), 'BUFFER_RELEASED', 'read [0, +4096) on volume vol0: the registered buffer was released; allocate a new one');
});

test.serial('loop: after T_LOGOUT for a protocol error the connection is not re-established', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0 }]);
  const options = target.options({ reconnect: { initialDelayMs: 10 } });
  const spy = spyOf(options);
  const s = await connect(options);
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const errors: Error[] = [];
  s.on('error', (e) => errors.push(e));
  const vol = await s.open('vol0');
  for (const ts of target.server.sessions) await ts.logout(LogoutReason.PROTOCOL_ERROR, 'test');
  await until(() => s.state === 'lost', 'the session to be lost');
  const where = `${target.address}:${target.port}`;
  t.deepEqual(
    errors.map((e) => e.message),
    [`connection 0 to ${where} ended for good: the target logged this session out: PROTOCOL_ERROR`],
  );
  await rejects(t, vol.read(0, 512), 'CONNECTION_LOST', `read [0, +512) on volume vol0: the session to ${where} is lost`);
  await new Promise((r) => setTimeout(r, 50));
  t.is(spy.connections.length, 1, 'no second login');
});

test.serial('loop: a capacity-changed unit attention is absorbed and refreshes the size', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, size: 4 * MiB }]);
  const s = await connect(target.options());
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const vol = await s.open('vol0');
  const attentions: [number, number, number, number][] = [];
  s.on('unitAttention', (lun, sense) => attentions.push([lun, sense.key, sense.asc, sense.ascq]));
  const resized = new Promise<[number, number]>((r) => vol.once('resize', (size, previous) => r([size, previous])));
  const unit = target.units.get('vol0')!;
  gated(target, 'vol0').inner.resize(8 * MiB);
  t.true(await unit.lu.refreshCapacity());
  t.true((await vol.read(0, 512)).equals(Buffer.alloc(512)), 'the read ran after the unit attention');
  t.deepEqual(await resized, [8 * MiB, 4 * MiB]);
  t.deepEqual(attentions, [[0, 6, 0x2a, 0x09]]);
  t.is(vol.size, 8 * MiB);
  await vol.write(6 * MiB, pattern(4096, 10));
  t.true((await vol.read(6 * MiB, 4096)).equals(pattern(4096, 10)));
});
