// A lost connection's write still inside the backend fences the blocks it
// covers (docs/target.md "A lost connection's commands"). The scenario the
// fence exists for: a write is stuck in a stalled backend when the target
// drops its connection; the initiator reissues it on its other connection and
// then writes newer data to the same blocks. Without the fence the reissued
// copy and the newer write were both acknowledged before the stuck first copy
// landed, which then overwrote the newer, acknowledged data.
import test from 'ava';
import { connect } from '../../initiator/index.js';
import { Opcode, TaskFunction } from '../../protocol/wire/index.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { GatedBackend } from './helpers/gated-backend.js';
import { SpyTransport } from './helpers/spy-transport.js';
import { pattern, startServer, TRANSPORTS, until } from './helpers/target.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const MiB = 1 << 20;

for (const kind of TRANSPORTS) {
  test.serial(`${kind}: a write reissued after its connection was lost cannot be overtaken by the stuck first copy`, async (t) => {
    const backend = new GatedBackend(4 * MiB, { name: 'vol0' });
    const target = await startServer(kind, [{ name: 'vol0', lun: 0, backend }]);
    const s = await connect(target.options({ connections: 2, timeouts: { lossMs: 20_000 }, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } }));
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    const vol = await s.open('vol0');
    const lu = target.units.get('vol0')!.lu;
    await vol.write(0, pattern(8192, 1));
    await until(() => [...target.server.sessions].filter((c) => c.isActive).length === 2, 'both connections');

    // The first copy of B is stuck in the backend.
    const gate = backend.hold('write');
    t.teardown(() => gate.release());
    const b = pattern(8192, 2);
    let bDone = false;
    const wb = vol.write(0, b).then(() => (bDone = true));
    await gate.reached;
    backend.unhold('write');
    const carrier = [...target.server.sessions].find((c) => c.info().inFlight > 0);
    if (carrier === undefined) return t.fail('no connection has the write outstanding');
    // The target drops that connection (administrative logout); the initiator reissues B on the other one.
    const dropped = carrier.logout('admin', 'test: drop the connection with a write in the backend');
    await until(() => bDone || lu.rangeLock.waitingCount > 0, 'the reissued copy to be answered or to wait');
    t.false(bDone, 'the reissued copy waits for the stuck first copy instead of being acknowledged before it');
    t.true(lu.rangeLock.activeCount >= 1, "the lost connection's write still holds its blocks");

    // The stall ends: the first copy lands, then the reissued one, then the newer write C.
    gate.release();
    await wb;
    const c = pattern(8192, 3);
    await vol.write(0, c);
    await dropped;
    t.true((await vol.read(0, c.length)).equals(c), 'the newer, acknowledged write is what the blocks hold');
    const direct = Buffer.alloc(c.length);
    await backend.inner.read(direct, 0);
    t.true(direct.equals(c), 'and the backend holds it');
    t.is(lu.rangeLock.activeCount, 0);
    t.is(lu.rangeLock.waitingCount, 0);
    t.true(target.log.some((l) => l.message.includes('still in the backend: later commands on those blocks wait for them')), 'the fence is logged');
  });
}

test.serial('loop: a lost connection fences only the blocks it holds; other blocks go on at once', async (t) => {
  const backend = new GatedBackend(4 * MiB, { name: 'vol0' });
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, backend }]);
  const s = await connect(target.options({ connections: 2, timeouts: { lossMs: 20_000 }, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } }));
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const vol = await s.open('vol0');
  await until(() => [...target.server.sessions].filter((c) => c.isActive).length === 2, 'both connections');
  const gate = backend.hold('write');
  t.teardown(() => gate.release());
  const stuck = vol.write(0, pattern(4096, 4));
  await gate.reached;
  backend.unhold('write');
  const carrier = [...target.server.sessions].find((c) => c.info().inFlight > 0);
  if (carrier === undefined) return t.fail('no connection has the write outstanding');
  const dropped = carrier.logout('admin', 'test: drop');
  const far = pattern(4096, 5);
  await vol.write(2 * MiB, far);
  t.true((await vol.read(2 * MiB, far.length)).equals(far), 'blocks the lost connection never held are read and written while it is fenced');
  gate.release();
  await stuck;
  await dropped;
});

test.serial('loop: a connection lost on the initiator\'s side only is fenced through the other one (FENCE CONNECTION) before its write is reissued', async (t) => {
  const backend = new GatedBackend(4 * MiB, { name: 'vol0' });
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, backend }]);
  const options = target.options({ connections: 2, timeouts: { lossMs: 20_000 }, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
  const spy = options.transport as SpyTransport;
  const s = await connect(options);
  t.teardown(async () => {
    // A severed connection the target did not end is closed here, or the target's close would wait for it.
    for (const c of spy.connections) if (c.severed) await c.closeInner();
    await s.close();
    await target.close();
  });
  const vol = await s.open('vol0');
  const lu = target.units.get('vol0')!.lu;
  await until(() => [...target.server.sessions].filter((c) => c.isActive).length === 2, 'both connections');

  const gate = backend.hold('write');
  t.teardown(() => gate.release());
  const b = pattern(8192, 6);
  let bDone = false;
  const wb = vol.write(0, b).then(() => (bDone = true));
  await gate.reached;
  backend.unhold('write');
  const carrier = spy.connections.find((c) => c.sent.some((x) => x.op === Opcode.CMD && x.cdb[0] === 0x2a));
  const served = [...target.server.sessions].find((c) => c.info().inFlight > 0);
  if (carrier === undefined || served === undefined) return t.fail('no connection carries the write');
  // The initiator loses the connection; the target does not see it go.
  carrier.sever();
  await until(() => bDone || lu.rangeLock.waitingCount > 0, 'the reissued copy to be answered or to wait');
  t.false(bDone, 'the reissued copy waits for the first one');
  const other = spy.connections.find((c) => c !== carrier && !c.severed);
  const fence = other?.sent.find((x) => x.op === Opcode.TSK_MGMT && x.function === TaskFunction.FENCE_CONNECTION);
  t.truthy(fence, 'FENCE CONNECTION went out on the other connection');
  if (fence?.op === Opcode.TSK_MGMT) t.is(String(fence.taskTag), served.id, 'naming the lost connection');
  t.false(served.isActive, 'and the target ended that connection');

  gate.release();
  await wb;
  const c = pattern(8192, 7);
  await vol.write(0, c);
  t.true((await vol.read(0, c.length)).equals(c), 'the newer, acknowledged write is what the blocks hold');
  const direct = Buffer.alloc(c.length);
  await backend.inner.read(direct, 0);
  t.true(direct.equals(c));
  t.true(target.log.some((l) => l.message.includes('FENCE CONNECTION of session') && l.message.endsWith(': fenced')));
});
