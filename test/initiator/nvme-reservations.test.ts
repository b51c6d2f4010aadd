// Reservations from the rblk library's NVMe/TCP host (initiator/nvme/
// reservations.ts) against the real rblkd: two hosts (two host NQNs)
// register, reserve, conflict, preempt, release and clear, with the calls
// and result shapes of the SCSI volume's reservations
// (test/initiator/reservations.test.ts), and the statuses checked.
import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { connectNvme, RblkError, ReservationType, type NvmeSession } from '../../initiator/index.js';
import { checkSuiteResources } from '../helpers/resources.js';
import { startNvmeDaemon, type NvmeDaemon } from './helpers/nvme-daemon.js';

checkSuiteResources(test);

const OTHER = 'nqn.2026-12.io.rblk:other-host';

async function twoHosts(t: ExecutionContext, dmn: NvmeDaemon): Promise<[NvmeSession, NvmeSession]> {
  const a = await connectNvme(dmn.url(), { queues: 1 });
  const b = await connectNvme(dmn.url(), { queues: 1, hostnqn: OTHER, hostid: randomBytes(16) });
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  return [a, b];
}

test('register, reserve, conflict, preempt, release and clear between two hosts', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const [sa, sb] = await twoHosts(t, dmn);
  const a = await sa.open(1);
  const b = await sb.open(1);

  await a.reservations.register(0xaaaan);
  await b.reservations.register(0xbbbbn);
  const keys = await b.reservations.readKeys();
  t.deepEqual(keys.keys, [0xaaaan, 0xbbbbn]);
  t.deepEqual(await b.reservations.readReservation(), { generation: keys.generation });
  // Registering the same key again is a no-op (Register with the key it holds).
  await a.reservations.register(0xaaaan);
  t.deepEqual((await a.reservations.readKeys()).keys, [0xaaaan, 0xbbbbn]);

  await a.reservations.reserve(0xaaaan, ReservationType.WRITE_EXCLUSIVE);
  t.deepEqual((await b.reservations.readReservation()).reservation, { key: 0xaaaan, scope: 0, type: ReservationType.WRITE_EXCLUSIVE });
  const report = await b.reservations.report();
  t.is(report.type, ReservationType.WRITE_EXCLUSIVE);
  t.deepEqual(
    report.registrants.map((r) => [r.key, r.holder]),
    [
      [0xaaaan, true],
      [0xbbbbn, false],
    ],
  );
  t.is(report.registrants.find((r) => r.key === 0xbbbbn)?.hostid, sb.hostid.toString('hex'), 'the reporting host is named by its Host Identifier');

  const conflict = await t.throwsAsync(b.write(0, Buffer.alloc(512, 2)), { instanceOf: RblkError });
  t.is(conflict?.code, 'RESERVATION_CONFLICT');
  t.deepEqual(conflict?.nvme, { sct: 0, sc: 0x83, dnr: true });
  t.true((await b.read(0, 512)).equals(Buffer.alloc(512)), 'reads pass a Write Exclusive reservation');
  await a.write(0, Buffer.alloc(512, 1));
  const taken = await t.throwsAsync(b.reservations.reserve(0xbbbbn, ReservationType.WRITE_EXCLUSIVE), { instanceOf: RblkError });
  t.is(taken?.code, 'RESERVATION_CONFLICT');
  t.regex(taken?.message ?? '', /^Reservation Acquire on namespace 1: Reservation Conflict/);
  const wrongKey = await t.throwsAsync(b.reservations.release(0xdeadn, ReservationType.WRITE_EXCLUSIVE), { instanceOf: RblkError });
  t.is(wrongKey?.code, 'RESERVATION_CONFLICT', 'a release with a key the host does not hold');

  // B preempts A: A is no longer registered and cannot write.
  await b.reservations.preempt(0xbbbbn, 0xaaaan, ReservationType.WRITE_EXCLUSIVE);
  t.deepEqual((await a.reservations.readKeys()).keys, [0xbbbbn]);
  t.deepEqual((await a.reservations.readReservation()).reservation, { key: 0xbbbbn, scope: 0, type: ReservationType.WRITE_EXCLUSIVE });
  const preempted = await t.throwsAsync(a.write(0, Buffer.alloc(512, 3)), { instanceOf: RblkError });
  t.is(preempted?.code, 'RESERVATION_CONFLICT');
  await b.write(0, Buffer.alloc(512, 4));

  // A registers again, then with another key: Register conflicts, and Replace with IEKEY takes over.
  await a.reservations.register(0xaaaan);
  await a.reservations.register(0xccccn);
  t.deepEqual((await b.reservations.readKeys()).keys.sort(), [0xbbbbn, 0xccccn]);
  await a.reservations.unregister();
  await a.reservations.unregister(); // not registered: nothing, as in SPC-5
  t.deepEqual((await b.reservations.readKeys()).keys, [0xbbbbn]);

  await b.reservations.release(0xbbbbn, ReservationType.WRITE_EXCLUSIVE);
  t.is((await a.reservations.readReservation()).reservation, undefined);
  await b.reservations.reserve(0xbbbbn, ReservationType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS);
  t.deepEqual((await a.reservations.readReservation()).reservation, { key: 0n, scope: 0, type: ReservationType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS }, 'all registrants: key 0, as SPC-5 reports it');
  const excluded = await t.throwsAsync(a.read(0, 512), { instanceOf: RblkError });
  t.is(excluded?.code, 'RESERVATION_CONFLICT', 'Exclusive Access All Registrants keeps an unregistered host from reading');

  await b.reservations.clear(0xbbbbn);
  t.deepEqual((await a.reservations.readKeys()).keys, []);
  t.is((await a.reservations.readReservation()).reservation, undefined);
  await a.write(0, Buffer.alloc(512, 5));
  t.true((await b.read(0, 512)).equals(Buffer.alloc(512, 5)));
});

test('preempt and abort, and arguments refused before anything is sent', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const [sa, sb] = await twoHosts(t, dmn);
  const a = await sa.open(1);
  const b = await sb.open(1);
  await a.reservations.register(1n);
  await b.reservations.register(2n);
  await a.reservations.reserve(1n, ReservationType.EXCLUSIVE_ACCESS);
  t.is((await b.read(0, 512).catch((e: RblkError) => e.code)) as unknown, 'RESERVATION_CONFLICT');
  await b.reservations.preempt(2n, 1n, ReservationType.EXCLUSIVE_ACCESS, { abort: true });
  t.deepEqual((await b.reservations.readReservation()).reservation, { key: 2n, scope: 0, type: ReservationType.EXCLUSIVE_ACCESS });
  t.deepEqual((await b.reservations.readKeys()).keys, [2n]);
  t.true((await b.read(0, 512)).equals(Buffer.alloc(512)));

  await t.throwsAsync(a.reservations.register(0n), { instanceOf: RangeError });
  await t.throwsAsync(a.reservations.register(-1n), { instanceOf: RangeError });
  await t.throwsAsync(a.reservations.reserve(1n, 2 as never), { instanceOf: RangeError });
  await t.throwsAsync(a.reservations.preempt(1n, 1n << 64n, ReservationType.WRITE_EXCLUSIVE), { instanceOf: RangeError });
  t.deepEqual((await b.reservations.readKeys()).keys, [2n], 'nothing refused reached the target');
});
