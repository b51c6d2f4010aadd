// Sessions with several connections: commands spread over all of them, data
// stays right, registrations are shared (one I_T nexus), and losing one
// connection moves its commands to the others.
import test from 'ava';
import { connect, ReservationType } from '../../initiator/index.js';
import { LogoutReason, Opcode } from '../../protocol/wire/index.js';
import { SpyTransport } from './helpers/spy-transport.js';
import { pattern, startServer, until } from './helpers/target.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const MiB = 1 << 20;

for (const kind of ['loop', 'tcp'] as const) {
  test.serial(`${kind}: three connections share the load and the data is intact`, async (t) => {
    const target = await startServer(kind, [{ name: 'vol0', lun: 0, size: 8 * MiB }]);
    const options = target.options({ connections: 3, queueDepth: 4, maxIo: 64 * 1024 });
    const s = await connect(options);
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    t.is(target.server.sessions.size, 3, 'three logins at the target');
    const infos = s.connections;
    t.deepEqual(
      infos.map((c) => c.up),
      [true, true, true],
    );
    t.is(new Set(infos.map((c) => c.sessionId)).size, 3, 'each connection is its own target session');
    const vol = await s.open('vol0');
    const n = 48;
    await Promise.all(Array.from({ length: n }, (_, i) => vol.write(i * 64 * 1024, pattern(64 * 1024, i))));
    const back = await Promise.all(Array.from({ length: n }, (_, i) => vol.read(i * 64 * 1024, 64 * 1024)));
    back.forEach((b, i) => t.true(b.equals(pattern(64 * 1024, i)), `piece ${i}`));
    const whole = await vol.read(0, n * 64 * 1024);
    t.true(whole.equals(Buffer.concat(back)), 'one large read across all connections');
    if (options.transport instanceof SpyTransport) {
      const perConnection = options.transport.connections.map((c) => c.sent.filter((x) => x.op === Opcode.CMD).length);
      t.is(perConnection.length, 3);
      t.true(
        perConnection.every((count) => count >= 10),
        `every connection carried commands: ${perConnection.join(', ')}`,
      );
    }
    // Registrations belong to the initiator, not to one connection (SPC-5 5.14: one I_T nexus).
    await vol.reservations.register(0x77n);
    await vol.reservations.reserve(0x77n, ReservationType.WRITE_EXCLUSIVE);
    await Promise.all(Array.from({ length: 12 }, (_, i) => vol.write(i * 4096, pattern(4096, 100 + i))));
    t.true((await vol.read(11 * 4096, 4096)).equals(pattern(4096, 111)));
    await vol.reservations.clear(0x77n);
  });
}

test.serial('loop: when one of three connections is logged out, its commands finish on the others', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, size: 8 * MiB }]);
  const options = target.options({ connections: 3, queueDepth: 4, reconnect: { initialDelayMs: 30 } });
  const s = await connect(options);
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const states: string[] = [];
  s.on('state', (st) => states.push(st));
  const vol = await s.open('vol0');
  const n = 64;
  const writes = Promise.all(Array.from({ length: n }, (_, i) => vol.write(i * 32 * 1024, pattern(32 * 1024, i))));
  // Log one target session out while the writes are in flight.
  const victim = [...target.server.sessions][1];
  await victim.logout(LogoutReason.ADMIN, 'test');
  await writes;
  const back = await vol.read(0, n * 32 * 1024);
  for (let i = 0; i < n; i++) t.true(back.subarray(i * 32 * 1024, (i + 1) * 32 * 1024).equals(pattern(32 * 1024, i)), `piece ${i}`);
  t.deepEqual(states, [], 'the session stayed connected throughout');
  await until(() => s.connections.every((c) => c.up), 'the third connection to come back');
  const spy = options.transport;
  if (!(spy instanceof SpyTransport)) throw new Error('expected the spy transport');
  t.is(spy.connections.length, 4, 'one reconnect');
  const writesSent = spy.connections.flatMap((c) => c.sent).filter((c) => c.op === Opcode.CMD && c.cdb[0] === 0x2a).length;
  t.true(writesSent > n, `writes outstanding on the lost connection were sent again (${writesSent} WRITEs for ${n})`);
});
