// Persistent reservations of an rbd volume live in the cluster (docs/architecture.md
// "Reservation stores", docs/backends.md "rbd"): real rblkd gateways on one image of
// a real throw-away cluster (test/helpers/ceph-cluster.ts), started once for this
// file. Without Ceph installed, or without rblk_rbd.node, every test skips and says why.
import test, { type ExecutionContext } from 'ava';
import { connect, RblkError, ReservationType, type Session, type Volume } from '../../initiator/index.js';
import { nativeFeatures } from '../../native/binding.js';
import type { Sense } from '../../protocol/scsi/sense.js';
import { cephMissing, startCephCluster, type CephCluster } from '../helpers/ceph-cluster.js';
import { baseConfig, spawnDaemon, workdir, type DaemonProcess } from './helpers/daemon-process.js';

const MiB = 1024 * 1024;
const reason = cephMissing() ?? (nativeFeatures().rbd ? null : 'rblk_rbd.node was not built (apt-get install librbd-dev, then rebuild)');
const rbdTest = reason === null ? test.serial : test.skip;
if (reason !== null) test.skip(`rbd reservation tests: ${reason}`, () => undefined);

let cluster: CephCluster | undefined;
const IMAGES = ['bind', 'restart', 'race', 'stuck', 'dead'];
test.before(async () => {
  if (reason !== null) return;
  cluster = await startCephCluster();
  await Promise.all(IMAGES.map((name) => cluster!.createImage(name, 4 * MiB)));
});
test.after.always(async () => {
  await cluster?.stop();
});

function ceph(): CephCluster {
  if (cluster === undefined) throw new Error('the cluster did not start');
  return cluster;
}

interface Gateway {
  readonly port: number;
  readonly daemon: DaemonProcess;
}

/** rblkd serving the image as volume `vol`. */
async function gateway(t: ExecutionContext, image: string): Promise<Gateway> {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'vol', thin: true, rbd: { pool: ceph().pool, image, conf: ceph().conf, timeout_s: 3 } }]));
  const daemon = spawnDaemon(t, ['--config', w.configPath]);
  const port = await daemon.port();
  await daemon.waitForLine(/rblkd ready/);
  return { port, daemon };
}

async function stop(g: Gateway): Promise<void> {
  g.daemon.kill('SIGTERM');
  const exit = await g.daemon.exited;
  if (exit.code !== 0) throw new Error(`rblkd exited ${String(exit.code)} ${String(exit.signal)}:\n${g.daemon.lines.join('\n')}`);
}

interface Initiator {
  readonly session: Session;
  readonly vol: Volume;
  readonly attentions: Sense[];
}

async function initiator(t: ExecutionContext, g: Gateway, name: string): Promise<Initiator> {
  const session = await connect({ address: '127.0.0.1', port: g.port, provider: 'tcp', initiatorName: `iqn.2026-12.io.rblk:${name}` });
  t.teardown(() => session.close());
  const attentions: Sense[] = [];
  session.on('unitAttention', (_lun, sense) => attentions.push(sense));
  const vol = await session.open('vol');
  return { session, vol, attentions };
}

async function conflict(t: ExecutionContext, p: Promise<unknown>, what: string): Promise<void> {
  const e = await t.throwsAsync(p, { instanceOf: RblkError }, what);
  t.is(e?.code, 'RESERVATION_CONFLICT', `${what}: ${e?.message ?? ''}`);
  t.is(e?.status, 0x18, `${what}: status RESERVATION CONFLICT`);
}

const block = (v: number): Buffer => Buffer.alloc(512, v);

rbdTest('rbd reservations: a WRITE EXCLUSIVE taken through gateway A binds initiators on gateway B; B reports it; PREEMPT through B takes it over', async (t) => {
  const [ga, gb] = await Promise.all([gateway(t, 'bind'), gateway(t, 'bind')]);
  const a = await initiator(t, ga, 'a');
  const b = await initiator(t, gb, 'b');
  const c = await initiator(t, gb, 'c');

  await a.vol.reservations.register(0xaaaan);
  await a.vol.reservations.reserve(0xaaaan, ReservationType.WRITE_EXCLUSIVE);
  // When RESERVE completed, B had seen it (the writer waits for every watcher's ack).
  await conflict(t, c.vol.write(0, block(1)), 'a write from an unregistered initiator on B');
  t.true((await c.vol.read(0, 512)).equals(block(0)), 'a read passes WRITE EXCLUSIVE, and nothing was written');
  t.deepEqual(await c.vol.reservations.readKeys(), { generation: 1, keys: [0xaaaan] }, "B reports A's registrant");
  t.deepEqual(await c.vol.reservations.readReservation(), {
    generation: 1,
    reservation: { key: 0xaaaan, scope: 0, type: ReservationType.WRITE_EXCLUSIVE },
  });
  await a.vol.write(0, block(2));
  t.true((await c.vol.read(0, 512)).equals(block(2)), 'the holder writes through A; B reads it');

  // A registrant on B preempts A's key: B's initiator holds the reservation, A's conflicts.
  await b.vol.reservations.register(0xbbbbn);
  await conflict(t, b.vol.write(0, block(3)), 'a registrant that is not the holder, under WRITE EXCLUSIVE');
  await b.vol.reservations.preempt(0xbbbbn, 0xaaaan, ReservationType.WRITE_EXCLUSIVE);
  await conflict(t, a.vol.write(0, block(4)), "A's initiator, preempted through B");
  t.true(
    a.attentions.some((s) => s.key === 6 && s.asc === 0x2a && s.ascq === 0x05),
    'REGISTRATIONS PREEMPTED reached the initiator on A, raised by the change made through B',
  );
  t.deepEqual(await a.vol.reservations.readKeys(), { generation: 3, keys: [0xbbbbn] }, 'A reports what B changed');
  t.deepEqual((await a.vol.reservations.readReservation()).reservation, { key: 0xbbbbn, scope: 0, type: ReservationType.WRITE_EXCLUSIVE });
  await b.vol.write(0, block(5));
  t.true((await a.vol.read(0, 512)).equals(block(5)));

  // CLEAR through B frees the volume on A.
  await b.vol.reservations.clear(0xbbbbn);
  await a.vol.write(0, block(6));
  t.true((await c.vol.read(0, 512)).equals(block(6)));
});

rbdTest('rbd reservations: a reservation survives restarting both gateways (it lives in the cluster)', async (t) => {
  const [ga, gb] = await Promise.all([gateway(t, 'restart'), gateway(t, 'restart')]);
  const a = await initiator(t, ga, 'holder');
  await a.vol.reservations.register(0x1234n);
  await a.vol.reservations.reserve(0x1234n, ReservationType.WRITE_EXCLUSIVE);
  await a.vol.write(0, block(7));
  await a.session.close();
  await Promise.all([stop(ga), stop(gb)]);

  const [ga2, gb2] = await Promise.all([gateway(t, 'restart'), gateway(t, 'restart')]);
  for (const [g, name] of [
    [ga2, 'other-a'],
    [gb2, 'other-b'],
  ] as const) {
    const o = await initiator(t, g, name);
    t.deepEqual(await o.vol.reservations.readReservation(), {
      generation: 1,
      reservation: { key: 0x1234n, scope: 0, type: ReservationType.WRITE_EXCLUSIVE },
    });
    t.true((await o.vol.read(0, 512)).equals(block(7)), `a read through ${name} passes WRITE EXCLUSIVE`);
    await conflict(t, o.vol.write(0, block(8)), `a write through ${name}`);
  }
});

rbdTest('rbd reservations: concurrent REGISTERs through both gateways lose none (compare-and-swap retries)', async (t) => {
  const [ga, gb] = await Promise.all([gateway(t, 'race'), gateway(t, 'race')]);
  const per = 5;
  const all = await Promise.all([
    ...Array.from({ length: per }, (_, i) => initiator(t, ga, `race-a${i}`)),
    ...Array.from({ length: per }, (_, i) => initiator(t, gb, `race-b${i}`)),
  ]);
  const keys = all.map((_, i) => BigInt(0x100 + i));
  await Promise.all(all.map((x, i) => x.vol.reservations.register(keys[i])));
  for (const x of [all[0], all[per]]) {
    const got = await x.vol.reservations.readKeys();
    t.is(got.generation, 2 * per, 'one generation per registration');
    t.deepEqual([...got.keys].sort((p, q) => (p < q ? -1 : 1)), keys, 'every key is registered, as seen through either gateway');
  }
});

rbdTest('rbd reservations: an operator clears a stuck reservation by removing its RADOS object', async (t) => {
  const [ga, gb] = await Promise.all([gateway(t, 'stuck'), gateway(t, 'stuck')]);
  const a = await initiator(t, ga, 'stuck-holder');
  await a.vol.reservations.register(0x77n);
  const b = await initiator(t, gb, 'stuck-other');
  await a.vol.reservations.reserve(0x77n, ReservationType.EXCLUSIVE_ACCESS);
  await conflict(t, b.vol.write(0, block(9)), 'a write under the stuck reservation');

  // As docs/operations.md tells the operator: the record is rblk_pr.<the image's id>.
  const info = JSON.parse((await ceph().run('rbd', ['info', '--format', 'json', `${ceph().pool}/stuck`])).toString()) as { id: string };
  const record = `rblk_pr.${info.id}`;
  const objects = (await ceph().run('rados', ['-p', ceph().pool, 'ls'])).toString().split('\n');
  t.true(objects.includes(record), `${record} is in the pool: ${objects.join(' ')}`);
  const [fromA, fromB] = [ga.daemon.lines.length, gb.daemon.lines.length];
  await ceph().run('rados', ['-p', ceph().pool, 'rm', record]);
  // Both gateways' watches break with the object; each fences, then reads (or makes) the record again.
  for (const [g, from] of [
    [ga, fromA],
    [gb, fromB],
  ] as const) {
    await g.daemon.waitForLine(/reservation state may be stale: fencing/, from);
    await g.daemon.waitForLine(/the reservation record was made anew/, from);
    await g.daemon.waitForLine(/reservation state read again/, from);
  }
  // An initiator may still meet ABORTED COMMAND (the fence) or a conflict from a
  // copy not yet replaced when it is this quick; it retries, as initiators do.
  for (let tries = 1; ; tries++) {
    try {
      await b.vol.write(0, block(10));
      break;
    } catch (e) {
      if (!(e instanceof RblkError) || tries >= 40) {
        t.log(`gateway A:\n${ga.daemon.lines.join('\n')}\ngateway B:\n${gb.daemon.lines.join('\n')}`);
        throw e;
      }
      if (e.code === 'RESERVATION_CONFLICT' || e.sense?.key === 0x0b) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        continue;
      }
      throw e;
    }
  }
  t.true((await a.vol.read(0, 512)).equals(block(10)));
  t.deepEqual((await a.vol.reservations.readKeys()).keys, [], 'the record was made anew, empty');
});

rbdTest('rbd reservations: a gateway killed with SIGKILL does not hang PERSISTENT RESERVE OUT on the others; restarted, it reads the state', async (t) => {
  const [ga, gb] = await Promise.all([gateway(t, 'dead'), gateway(t, 'dead')]);
  const a = await initiator(t, ga, 'dead-holder');
  const other = await initiator(t, ga, 'dead-other');
  await a.vol.reservations.register(0x99n);
  gb.daemon.kill('SIGKILL');
  await gb.daemon.exited;
  // B's watch outlives B on the OSD until its timeout: the notify waits for it, then gives up.
  await a.vol.reservations.reserve(0x99n, ReservationType.WRITE_EXCLUSIVE);
  await conflict(t, other.vol.write(0, block(11)), 'a write through A after the RESERVE that B never acknowledged');
  const gb2 = await gateway(t, 'dead');
  const late = await initiator(t, gb2, 'dead-late');
  t.deepEqual((await late.vol.reservations.readReservation()).reservation, { key: 0x99n, scope: 0, type: ReservationType.WRITE_EXCLUSIVE });
  await conflict(t, late.vol.write(0, block(12)), 'a write through the restarted B');
  // And a change through the new B reaches A.
  await late.vol.reservations.register(0x55n);
  await late.vol.reservations.preempt(0x55n, 0x99n, ReservationType.WRITE_EXCLUSIVE);
  await conflict(t, a.vol.write(0, block(13)), 'the preempted holder on A');
  await late.vol.write(0, block(14));
  t.true((await a.vol.read(0, 512)).equals(block(14)));
});
