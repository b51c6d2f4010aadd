// The reconnect schedule: the jittered backoff and its cap, and reconnect
// attempts that overlap, so that one hanging in a network partition (an
// nftables rule dropping SYNs to the target's port) does not hold back the
// attempt that gets through once the partition heals.
import test from 'ava';
import { connect, DEFAULTS } from '../../initiator/index.js';
import { reconnectDelay } from '../../initiator/backoff.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import { LogoutReason } from '../../protocol/wire/index.js';
import { partition, partitionUnavailable } from './helpers/partition.js';
import { SpyTransport } from './helpers/spy-transport.js';
import { pattern, startServer, until } from './helpers/target.js';

test('the default backoff never waits more than a second between attempts', (t) => {
  t.true(DEFAULTS.reconnectMaxMs <= 1000, `the cap is ${DEFAULTS.reconnectMaxMs} ms`);
  const longest = Array.from({ length: 40 }, (_, n) => reconnectDelay(n, DEFAULTS.reconnectInitialMs, DEFAULTS.reconnectMaxMs, () => 1));
  t.deepEqual(longest.slice(0, 6), [100, 200, 400, 800, 1000, 1000]);
  t.is(Math.max(...longest), DEFAULTS.reconnectMaxMs);
});

test('each delay is drawn from the whole window (full jitter)', (t) => {
  t.is(reconnectDelay(3, 100, 1000, () => 0), 0);
  t.is(reconnectDelay(3, 100, 1000, () => 0.5), 400);
  t.is(reconnectDelay(9, 100, 1000, () => 0.25), 250);
  t.is(reconnectDelay(1e6, 100, 1000, () => 1), 1000, 'a huge attempt count stays at the cap');
  const draws = Array.from({ length: 32 }, () => reconnectDelay(6, 100, 1000));
  t.true(
    draws.every((d) => d >= 0 && d <= 1000),
    draws.join(' '),
  );
  t.true(new Set(draws).size > 1, 'the delays vary');
});

(partitionUnavailable === null ? test.serial : test.skip)(
  'tcp: an attempt hanging in a partition does not hold back the next; the session is back as soon as it heals',
  async (t) => {
    const target = await startServer('tcp', [{ name: 'vol0', lun: 0 }]);
    const spy = new SpyTransport(new FabricInitiatorTransport());
    // A connect timeout far beyond the test: only an attempt started after the heal can log in.
    const s = await connect(target.options({ transport: spy, timeouts: { connectMs: 300_000, lossMs: 300_000 }, reconnect: { initialDelayMs: 20, maxDelayMs: 50 } }));
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    s.on('error', () => undefined);
    const vol = await s.open('vol0');
    const data = pattern(8192, 21);
    await vol.write(0, data);

    const net = await partition(t, target.port);
    await net.cut();
    // The target ends the session; the initiator logs in again, into the partition.
    for (const ts of target.server.sessions) await ts.logout(LogoutReason.ADMIN, 'test');
    await until(() => spy.pendingConnects >= 2, 'a second connect attempt while the first one still hangs');
    t.is(spy.connections.length, 1, 'nothing got through the partition');
    t.is(s.state, 'reconnecting');
    const read = vol.read(0, data.length);
    await net.heal();
    t.true((await read).equals(data), 'the read issued during the partition completed after it healed');
    t.is(s.state, 'connected');
    t.true(spy.connections.length >= 2);
  },
);

(partitionUnavailable === null ? test.serial : test.skip)('tcp: attempts still in flight when the session closes log out when they get through', async (t) => {
  const target = await startServer('tcp', [{ name: 'vol0', lun: 0 }]);
  t.teardown(() => target.close());
  const spy = new SpyTransport(new FabricInitiatorTransport());
  const s = await connect(target.options({ transport: spy, timeouts: { connectMs: 300_000 }, reconnect: { initialDelayMs: 20, maxDelayMs: 50 } }));
  s.on('error', () => undefined);
  const net = await partition(t, target.port);
  await net.cut();
  for (const ts of target.server.sessions) await ts.logout(LogoutReason.ADMIN, 'test');
  await until(() => spy.pendingConnects >= 2, 'connect attempts hanging in the partition');
  await s.close();
  t.is(s.state, 'closed');
  await net.heal();
  await until(() => spy.pendingConnects === 0, 'the attempts to end', 30_000);
  await until(() => [...target.server.sessions].every((ts) => !ts.isActive), 'their sessions to end');
  t.is(s.state, 'closed');
  t.true(s.connections.every((c) => !c.up), 'no connection was installed after close');
});
