// Persistent reservations between two sessions with different initiator
// names, against the target's SPC-5 implementation.
import test from 'ava';
import { connect, RblkError, ReservationType, type Sense, type Session } from '../../initiator/index.js';
import { startServer } from './helpers/target.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const OTHER = 'iqn.2026-11.io.rblk:other';

for (const kind of ['loop', 'tcp'] as const) {
  test.serial(`${kind}: register, reserve, conflict, preempt and clear between two initiators`, async (t) => {
    const target = await startServer(kind, [{ name: 'vol0', lun: 0, size: 1 << 20 }]);
    const sessions: Session[] = [];
    t.teardown(async () => {
      for (const s of sessions) await s.close();
      await target.close();
    });
    const s1 = await connect(target.options());
    const s2 = await connect(target.options({ initiatorName: OTHER }));
    sessions.push(s1, s2);
    const attentions: Sense[] = [];
    s1.on('unitAttention', (_lun, sense) => attentions.push(sense));
    const a = await s1.open('vol0');
    const b = await s2.open('vol0');

    await a.reservations.register(0xaaaan);
    await b.reservations.register(0xbbbbn);
    t.deepEqual(await b.reservations.readKeys(), { generation: 2, keys: [0xaaaan, 0xbbbbn] });
    t.deepEqual(await b.reservations.readReservation(), { generation: 2 });

    await a.reservations.reserve(0xaaaan, ReservationType.WRITE_EXCLUSIVE);
    t.deepEqual(await b.reservations.readReservation(), { generation: 2, reservation: { key: 0xaaaan, scope: 0, type: ReservationType.WRITE_EXCLUSIVE } });
    const conflict = await t.throwsAsync(b.write(0, Buffer.alloc(512, 2)), { instanceOf: RblkError, message: 'write [0, +512) on volume vol0: RESERVATION CONFLICT' });
    t.is(conflict?.code, 'RESERVATION_CONFLICT');
    t.is(conflict?.status, 0x18);
    t.true((await b.read(0, 512)).equals(Buffer.alloc(512)), 'reads pass a WRITE EXCLUSIVE reservation');
    await a.write(0, Buffer.alloc(512, 1));
    await t.throwsAsync(b.reservations.reserve(0xbbbbn, ReservationType.WRITE_EXCLUSIVE), {
      instanceOf: RblkError,
      message: 'PERSISTENT RESERVE OUT RESERVE on volume vol0: RESERVATION CONFLICT',
    });

    // B preempts A: A loses its registration, and hears about it as a unit attention.
    await b.reservations.preempt(0xbbbbn, 0xaaaan, ReservationType.WRITE_EXCLUSIVE);
    t.deepEqual((await a.reservations.readKeys()).keys, [0xbbbbn]);
    t.true(
      attentions.some((s) => s.key === 6 && s.asc === 0x2a && s.ascq === 0x05),
      'REGISTRATIONS PREEMPTED reached the preempted initiator',
    );
    await t.throwsAsync(a.write(0, Buffer.alloc(512, 3)), { instanceOf: RblkError, message: 'write [0, +512) on volume vol0: RESERVATION CONFLICT' });
    await b.write(0, Buffer.alloc(512, 4));

    await b.reservations.clear(0xbbbbn);
    t.deepEqual((await a.reservations.readKeys()).keys, []);
    t.is((await a.reservations.readReservation()).reservation, undefined);
    await a.write(0, Buffer.alloc(512, 5));
    t.true((await b.read(0, 512)).equals(Buffer.alloc(512, 5)));

    await a.reservations.register(0x1n);
    await a.reservations.unregister();
    t.deepEqual((await b.reservations.readKeys()).keys, []);
    await t.throwsAsync(a.reservations.register(0n), { instanceOf: RangeError, message: 'register(0n) would unregister; call unregister()' });
  });
}

test.serial('loop: an Exclusive Access reservation on one LU lets another initiator open and list the other LUs (found by name without touching the reserved one)', async (t) => {
  const target = await startServer('loop', [
    { name: 'held', lun: 0, size: 1 << 20 },
    { name: 'free', lun: 1, size: 1 << 20 },
  ]);
  const sessions: Session[] = [];
  t.teardown(async () => {
    for (const s of sessions) await s.close();
    await target.close();
  });
  const s1 = await connect(target.options());
  sessions.push(s1);
  const held = await s1.open('held');
  await held.reservations.register(0xaaaan);
  await held.reservations.reserve(0xaaaan, ReservationType.EXCLUSIVE_ACCESS);

  const s2 = await connect(target.options({ initiatorName: OTHER }));
  sessions.push(s2);
  const free = await s2.open('free');
  await free.write(0, Buffer.alloc(512, 7));
  t.true((await free.read(0, 512)).equals(Buffer.alloc(512, 7)), 'the unreserved LU serves the other initiator');

  const list = await s2.volumes();
  t.deepEqual(
    list.map((v) => [v.name, v.lun, v.size]),
    [
      ['held', 0, 1 << 20],
      ['free', 1, 1 << 20],
    ],
    'the listing names the reserved LU too (MODE SENSE conflicts there, READ CAPACITY does not)',
  );
  // The reserved LU itself still refuses the other initiator's media access.
  const other = await s2.open('held');
  const conflict = await t.throwsAsync(other.read(0, 512), { instanceOf: RblkError });
  t.is(conflict?.code, 'RESERVATION_CONFLICT');
});
