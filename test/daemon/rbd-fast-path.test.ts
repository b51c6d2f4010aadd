// RBD volumes on the target's native fast path (docs/target.md "Fast path";
// native/src/core/fast-rbd.h), against the throw-away cluster of bench/ceph-cluster.ts
// and a target in this process, so that the fast path's own counters say which
// path answered. Without Ceph or rblk_rbd.node every test skips and says why.
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { connect, RblkError, ReservationType, type Session } from '../../initiator/index.js';
import { nativeFeatures } from '../../native/binding.js';
import { FastPath } from '../../native/fast-path.js';
import { Reactors } from '../../native/reactors.js';
import { diesWithParent } from '../../bench/parent-death.js';
import { FileBackend } from '../../target/backend/file.js';
import { RbdBackend } from '../../target/backend/rbd/rbd-backend.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { SharedReservationStore } from '../../target/scsi/reservations/shared-reservation-store.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections, type RblkConnection } from '../../target/rblk/connection.js';
import { cephMissing, startCephCluster, type CephCluster } from '../helpers/ceph-cluster.js';
import { listenTest, memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';
import { resources } from '../helpers/resources.js';
import { prng } from '../protocol/fuzz-corpus.js';
import { ROOT } from './helpers/daemon-process.js';
import { until } from '../../bench/kit/wait.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const reason =
  cephMissing() ??
  (nativeFeatures().rbd ? null : 'rblk_rbd.node was not built (apt-get install librbd-dev, then rebuild)') ??
  (FastPath.available() ? null : 'no native fast path on this host (rblk_uring.node)');
// One at a time: tests pause the cluster.
const rbdTest = reason === null ? test.serial : test.skip;
if (reason !== null) test.skip(`rbd fast path tests: ${reason}`, () => undefined);

let cluster: CephCluster | undefined;
test.before(async () => {
  if (reason === null) cluster = await startCephCluster();
});
test.after.always(async () => {
  await cluster?.stop();
});

function ceph(): CephCluster {
  if (cluster === undefined) throw new Error('the cluster did not start');
  return cluster;
}

interface Served {
  port: number;
  server: TargetServer;
  rbd: RbdBackend;
  /** Fast-path commands taken and handed off so far, over every session (ended ones included). */
  taken(): number;
  handedOff(): number;
  /** Sessions so far whose connection a reactor thread served. */
  onReactor(): number;
  log: ReturnType<typeof memoryLog>;
  lu: LogicalUnit;
}

/** A target in this process with rbd volume `vol` on `image` at LUN 0 and, with file, a file volume `file` at LUN 1. */
async function serve(t: ExecutionContext, image: string, fastPath: boolean, o: { file?: boolean; timeoutSeconds?: number; reactors?: number; sharedReservations?: boolean } = {}): Promise<Served> {
  const log = memoryLog();
  // Reactor threads (docs/target.md "Reactors"): librbd's eventfd then sits in a reactor's epoll set.
  const pool = (o.reactors ?? 0) > 0 ? Reactors.start(o.reactors!) : null;
  const server = new TargetServer({ ...testServerOptions(log, { fastPath, limits: { queueDepth: 32, dataBuffers: 32 } }), reactors: pool }, rblkConnections);
  const rbd = await RbdBackend.open({ pool: ceph().pool, image, conf: ceph().conf, timeoutSeconds: o.timeoutSeconds ?? 3, readOnly: false });
  // Reservations in the cluster unless told otherwise (without them, nothing but the backend itself tells the gate of a fence).
  const store = o.sharedReservations === false ? undefined : await SharedReservationStore.open(await rbd.openSharedRecord('pr'), log);
  const lu = new LogicalUnit({ name: 'vol', backend: rbd, identifier: randomUUID(), limits: { maxTransferBlocks: 2048 }, reservationStore: store, log });
  rbd.onResize(() => void lu.refreshCapacity().catch(() => undefined));
  server.addVolume({ name: 'vol', lun: 0, lu, access: () => 'rw' });
  let file: FileBackend | null = null;
  let dir: string | null = null;
  if (o.file === true) {
    dir = await mkdtemp(join(tmpdir(), 'rblk-rbdfast-'));
    file = await FileBackend.open({ path: join(dir, 'f'), size: 4 * MiB });
    server.addVolume({ name: 'file', lun: 1, lu: new LogicalUnit({ name: 'file', backend: file, identifier: randomUUID(), limits: { maxTransferBlocks: 2048 } }), access: () => 'rw' });
  }
  const port = (await listenTest(server, 'tcp')).port;
  // Sessions' counters vanish with them: sampled on every call, the ended ones kept.
  const seen = new Map<RblkConnection, { taken: number; handedOff: number; reactor: number }>();
  const sample = (): void => {
    for (const s of server.sessions) {
      const st = (s as RblkConnection).fastPathStats;
      if (st !== null) seen.set(s as RblkConnection, { taken: st.taken, handedOff: st.handedOff, reactor: st.reactor });
    }
  };
  const timer = setInterval(sample, 20);
  t.teardown(async () => {
    for (const l of log.lines) if (l.level === 'error' || l.level === 'warn') t.log(l.level, l.message, JSON.stringify(l.meta ?? {}));
    clearInterval(timer);
    await server.close();
    pool?.close();
    await rbd.close();
    await file?.close();
    if (dir !== null) await rm(dir, { recursive: true, force: true });
  });
  const sum = (k: 'taken' | 'handedOff'): number => {
    sample();
    return [...seen.values()].reduce((a, v) => a + v[k], 0);
  };
  const onReactor = (): number => {
    sample();
    return [...seen.values()].filter((v) => v.reactor >= 0).length;
  };
  return { port, server, rbd, taken: () => sum('taken'), handedOff: () => sum('handedOff'), onReactor, log, lu };
}

async function session(t: ExecutionContext, port: number, name = 'iqn.2026-12.io.rblk:rbdfast', connections = 1): Promise<Session> {
  const s = await connect({ address: '127.0.0.1', port, provider: 'tcp', initiatorName: name, targetName: TARGET_NAME, busyRetries: 0, connections });
  t.teardown(() => s.close());
  return s;
}

/**
 * A seeded mix of READ, WRITE and FUA WRITE, up to 16 at once on distinct
 * 64 KiB chunks, against a model of the image; every read is checked. Resolves the model.
 */
async function mix(v: { write(o: number, d: Uint8Array, w?: { fua?: boolean }): Promise<void>; read(o: number, n: number): Promise<Buffer> }, size: number, seed: number, t: ExecutionContext): Promise<Buffer> {
  const model = Buffer.alloc(size);
  const rand = prng(seed);
  const int = (n: number): number => Math.floor(rand() * n);
  const chunk = 64 * KiB;
  const chunks = size / chunk;
  for (let batch = 0; batch < 30; batch++) {
    const used = new Set<number>();
    const ops: Promise<void>[] = [];
    for (let i = 0; i < 16; i++) {
      const c = int(chunks);
      if (used.has(c)) continue;
      used.add(c);
      const blocks = 1 + int(128); // 512 B .. 64 KiB
      const at = c * chunk + int(128 - blocks + 1) * 512;
      const length = blocks * 512;
      if (rand() < 0.55) {
        const data = Buffer.alloc(length);
        for (let j = 0; j < length; j++) data[j] = (seed * 7 + batch * 13 + i * 29 + j * 31 + (j >> 9)) & 0xff;
        data.copy(model, at);
        ops.push(v.write(at, data, { fua: rand() < 0.3 }));
      } else {
        const want = Buffer.from(model.subarray(at, at + length));
        ops.push(v.read(at, length).then((got) => void t.true(got.equals(want), `seed ${seed} batch ${batch}: the read at ${at}+${length} differs`)));
      }
    }
    await Promise.all(ops);
  }
  return model;
}

rbdTest('rbd fast path: a seeded mix of READ, WRITE and FUA WRITE reads back, and rbd export holds the same bytes, with the fast path on and off', async (t) => {
  const size = 4 * MiB;
  const exports: Buffer[] = [];
  for (const [fast, reactors] of [[true, 0], [false, 0], [true, 2]] as const) {
    const image = `mix-${fast ? 'on' : 'off'}-${reactors}`;
    await ceph().createImage(image, size);
    const srv = await serve(t, image, fast, { reactors });
    const s = await session(t, srv.port);
    const v = await s.open('vol');
    const model = await mix(v, size, 41, t);
    await s.close();
    const taken = srv.taken();
    t.is(srv.onReactor(), reactors > 0 ? 1 : 0, 'the session\'s connection was on a reactor exactly when there were some');
    if (fast) t.true(taken > 100, `the fast path took ${taken} commands`);
    else t.is(taken, 0, 'fast_path off: nothing went the native way');
    t.is(srv.handedOff(), 0, 'no command failed');
    const exported = await ceph().run('rbd', ['export', `${ceph().pool}/${image}`, '-']);
    t.is(exported.length, size);
    t.true(exported.equals(model), `fast path ${fast ? 'on' : 'off'}: rbd export holds what was written`);
    exports.push(exported);
  }
  t.true(exports[0]!.equals(exports[1]!), 'the same bytes whichever path wrote them');
  t.true(exports[2]!.equals(exports[1]!), 'the same bytes with the fast path on a reactor thread');
});

for (const reactors of [0, 2]) {
rbdTest(`rbd fast path${reactors > 0 ? ' on a reactor thread' : ''}: an rbd LUN and a file LUN in one session both go native; a reservation sends the rbd LUN to JavaScript until released; a resize re-publishes the capacity`, async (t) => {
  await ceph().createImage(`both-${reactors}`, 4 * MiB);
  const srv = await serve(t, `both-${reactors}`, true, { file: true, reactors });
  const s = await session(t, srv.port);
  const rbd = await s.open('vol');
  const file = await s.open('file');
  const a = Buffer.alloc(64 * KiB, 0xa1);
  const b = Buffer.alloc(64 * KiB, 0xb2);

  let before = srv.taken();
  for (let i = 0; i < 8; i++) await rbd.write(i * a.length, a);
  t.is(srv.taken() - before, 8, 'the rbd LUN\'s writes went native');
  before = srv.taken();
  for (let i = 0; i < 8; i++) await file.write(i * b.length, b);
  t.is(srv.taken() - before, 8, 'the file LUN\'s writes went native');
  before = srv.taken();
  const [ra, rb] = await Promise.all([rbd.read(7 * a.length, a.length), file.read(7 * b.length, b.length)]);
  t.true(ra.equals(a));
  t.true(rb.equals(b));
  t.is(srv.taken() - before, 2, 'one read of each, at once, both native');
  t.is(srv.onReactor(), reactors > 0 ? 1 : 0, 'the session was on a reactor exactly when there were some');

  // A registration (kept in the cluster, in the image's rblk_pr record) revokes the rbd LUN.
  await rbd.reservations.register(0x1234n);
  await rbd.reservations.reserve(0x1234n, ReservationType.WRITE_EXCLUSIVE);
  before = srv.taken();
  await rbd.write(0, b);
  t.true((await rbd.read(0, b.length)).equals(b));
  t.is(srv.taken() - before, 0, 'with a reservation held, the rbd LUN goes through JavaScript');
  const fileBefore = srv.taken();
  await file.read(0, 4096);
  t.is(srv.taken() - fileBefore, 1, 'the file LUN of the same session stays native');
  await rbd.reservations.release(0x1234n, ReservationType.WRITE_EXCLUSIVE);
  await rbd.reservations.unregister();
  before = srv.taken();
  t.true((await rbd.read(0, b.length)).equals(b));
  t.is(srv.taken() - before, 1, 'released and unregistered: native again');

  // rbd resize from outside: past the old end is refused until the capacity is re-published, then native.
  const resized = new Promise<number>((resolve) => rbd.once('resize', () => resolve(rbd.size)));
  await ceph().run('rbd', ['resize', '--size', `${8 * MiB}B`, `${ceph().pool}/both-${reactors}`]);
  let seen = false;
  void resized.then(() => (seen = true));
  while (!seen) {
    await rbd.read(0, 512).catch(() => undefined);
    if (!seen) await new Promise((r) => setTimeout(r, 100));
  }
  t.is(await resized, 8 * MiB);
  const c = Buffer.alloc(4096, 0xc3);
  before = srv.taken();
  await rbd.write(6 * MiB, c);
  t.true((await rbd.read(6 * MiB, c.length)).equals(c));
  t.is(srv.taken() - before, 2, 'past the old end, natively: the new capacity was published');
});
}

rbdTest('rbd fast path: a paused cluster (SIGSTOP) crashes nothing; its commands complete or fail with ABORTED COMMAND after the resume, and I/O works again', async (t) => {
  await ceph().createImage('paused', 4 * MiB);
  const srv = await serve(t, 'paused', true, { timeoutSeconds: 2 });
  const s = await session(t, srv.port);
  const v = await s.open('vol');
  const data = Buffer.alloc(4096, 0x77);
  await v.write(0, data);
  const before = srv.taken();
  ceph().pause();
  let resumed = false;
  t.teardown(async () => {
    if (!resumed) await ceph().resume();
  });
  const ops = Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? v.write((i + 1) * 4096, data, { fua: i % 4 === 0 }) : v.read(0, 4096).then(() => undefined)));
  const settled = Promise.allSettled(ops);
  // Resume once the fast path holds them at the paused store, not after a guessed sleep.
  await until(() => srv.taken() - before >= 1, 'the fast path to take one of them', { ms: 30_000 });
  resumed = true;
  await ceph().resume();
  const results = await settled;
  t.true(srv.taken() - before >= 1, 'they were taken natively');
  for (const r of results) {
    if (r.status === 'fulfilled') continue;
    t.true(r.reason instanceof RblkError, String(r.reason));
    t.is((r.reason as RblkError).sense?.key, 0x0b, String(r.reason));
  }
  t.pass();
  // librados reconnects: retried as an initiator would (bounded tries, not timed).
  const again = Buffer.alloc(4096, 0x78);
  for (let tries = 1; ; tries++) {
    try {
      await v.write(8 * 4096, again);
      break;
    } catch (e) {
      if (!(e instanceof RblkError) || e.sense?.key !== 0x0b || tries >= 60) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  t.true((await v.read(8 * 4096, 4096)).equals(again));
});

for (const reactors of [0, 2]) {
rbdTest(`rbd fast path${reactors > 0 ? ' on a reactor thread' : ''}: an initiator killed (its connection dropped) with librbd I/O in flight: the target survives, its fds return, and the next session works`, async (t) => {
  await ceph().createImage(`killed-${reactors}`, 4 * MiB);
  const srv = await serve(t, `killed-${reactors}`, true, { timeoutSeconds: 2, reactors });
  // The baseline after one session, so what librados and the fabric open once is in it.
  {
    const s0 = await session(t, srv.port, 'iqn.2026-12.io.rblk:warm');
    await (await s0.open('vol')).write(0, Buffer.alloc(4096, 1));
    await s0.close();
  }
  for (let i = 0; i < 100 && srv.server.sessions.size > 0; i++) await new Promise((r) => setTimeout(r, 50));
  const base = resources().fds;
  const before = srv.taken();

  for (const paused of [true, false]) {
    if (paused) ceph().pause();
    const [cmd, ...args] = diesWithParent([process.execPath, '--import=tsx', join(ROOT, 'test', 'daemon', 'helpers', 'rbd-io-peer.ts'), String(srv.port), TARGET_NAME]);
    const peer = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    t.teardown(() => void peer.kill('SIGKILL'));
    const exited = new Promise((r) => peer.once('exit', r));
    const lines = createInterface({ input: peer.stdout });
    await new Promise<void>((resolve, reject) => {
      lines.on('line', (l) => l === 'busy' && resolve());
      peer.once('exit', (code) => reject(new Error(`the peer exited (${code}) before it was busy`)));
    });
    // Let its commands reach librbd (on a paused cluster they stay there), then kill it.
    await new Promise((r) => setTimeout(r, 300));
    peer.kill('SIGKILL');
    await exited;
    for (let i = 0; i < 200 && srv.server.sessions.size > 0; i++) await new Promise((r) => setTimeout(r, 50));
    t.is(srv.server.sessions.size, 0, 'the dropped session is gone');
    if (paused) await ceph().resume();
  }
  t.true(srv.taken() - before > 0, 'the killed initiators\' commands were taken natively');
  if (reactors > 0) t.true(srv.onReactor() >= 1, 'the killed initiators were served by a reactor');
  else t.is(srv.onReactor(), 0);

  // Everything the dead sessions held comes back once librbd has answered (polled, bounded).
  let fds = resources().fds;
  for (let i = 0; i < 200 && fds > base; i++) {
    await new Promise((r) => setTimeout(r, 50));
    fds = resources().fds;
  }
  t.true(fds <= base, `${fds} fds open, baseline ${base}`);

  const s = await session(t, srv.port);
  const v = await s.open('vol');
  const c = Buffer.alloc(64 * KiB, 0x3c);
  for (let tries = 1; ; tries++) {
    try {
      await v.write(MiB, c, { fua: true });
      break;
    } catch (e) {
      if (!(e instanceof RblkError) || e.sense?.key !== 0x0b || tries >= 60) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  t.true((await v.read(MiB, c.length)).equals(c));
  t.true((await ceph().run('rbd', ['export', `${ceph().pool}/killed-${reactors}`, '-'])).subarray(MiB, MiB + c.length).equals(c));
});
}

rbdTest('rbd fast path: a registration made through another gateway of the image (kept in the cluster) sends this gateway\'s I/O to JavaScript, and its removal brings the fast path back', async (t) => {
  await ceph().createImage('twogw', 4 * MiB);
  const one = await serve(t, 'twogw', true);
  const two = await serve(t, 'twogw', true);
  const a = await (await session(t, one.port, 'iqn.2026-12.io.rblk:gw-a')).open('vol');
  const b = await (await session(t, two.port, 'iqn.2026-12.io.rblk:gw-b')).open('vol');
  const d = Buffer.alloc(4096, 0x4b);
  await b.write(0, d);
  // The first command after login reports the unit attention, through JavaScript: one more to see the path.
  let before = two.taken();
  await b.write(4096, d);
  t.is(two.taken() - before, 1, 'gateway two serves natively to begin with');

  // PERSISTENT RESERVE OUT completes once every gateway has read the new record.
  await a.reservations.register(0x77n);
  before = two.taken();
  await b.write(0, d);
  t.true((await b.read(0, 4096)).equals(d));
  t.is(two.taken() - before, 0, 'a registration through gateway one revokes gateway two\'s fast path');

  await a.reservations.unregister();
  before = two.taken();
  for (let i = 0; i < 3; i++) t.true((await b.read(0, 4096)).equals(d));
  t.true(two.taken() - before >= 2, 'unregistered through gateway one: gateway two is native again');
});

rbdTest('rbd fast path: a connection dropped with a write still in librbd fences the volume until librbd has answered it; the reissued copy and a newer write land after it', async (t) => {
  await ceph().createImage('orphan', 4 * MiB);
  const srv = await serve(t, 'orphan', true, { timeoutSeconds: 20 });
  const s = await session(t, srv.port, 'iqn.2026-12.io.rblk:orphan', 2);
  const v = await s.open('vol');
  await v.write(0, Buffer.alloc(8192, 0x01));
  for (let i = 0; i < 200 && [...srv.server.sessions].filter((c) => c.isActive).length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  const before = srv.taken();
  ceph().pause();
  let resumed = false;
  t.teardown(async () => {
    if (!resumed) await ceph().resume();
  });
  const b = Buffer.alloc(8192, 0xb0);
  let bDone = false;
  const wb = v.write(0, b).then(() => (bDone = true));
  const carrierOf = (): RblkConnection | undefined => [...srv.server.sessions].find((c) => ((c as RblkConnection).fastPathStats?.inFlight ?? 0) > 0) as RblkConnection | undefined;
  for (let i = 0; i < 200 && carrierOf() === undefined; i++) await new Promise((r) => setTimeout(r, 10));
  const carrier = carrierOf();
  if (carrier === undefined) return t.fail('the write never reached the fast path');
  t.true(srv.taken() > before, 'the write was taken natively, into librbd');
  // The target drops the connection while librbd holds the write (a paused cluster); the initiator reissues it on the other one.
  const dropped = carrier.logout('admin', 'test: drop the connection with a write in librbd');
  for (let i = 0; i < 200 && !srv.lu.fastPath.held; i++) await new Promise((r) => setTimeout(r, 10));
  t.true(srv.lu.fastPath.held, 'the volume is fenced: the fast path is off for every connection');
  t.true(srv.log.lines.some((l) => l.message.includes('native requests still in the backend')), 'and the fence is logged');
  t.false(bDone);
  resumed = true;
  await ceph().resume();
  await wb;
  await dropped;
  const c = Buffer.alloc(8192, 0xc0);
  await v.write(0, c);
  t.true((await v.read(0, c.length)).equals(c), 'the newer, acknowledged write is what the image holds');
  t.true((await ceph().run('rbd', ['export', `${ceph().pool}/orphan`, '-'])).subarray(0, c.length).equals(c), 'as rbd export sees it');
  for (let i = 0; i < 200 && srv.lu.fastPath.held; i++) await new Promise((r) => setTimeout(r, 10));
  t.false(srv.lu.fastPath.held, 'the fence ends once librbd has answered');
  const taken = srv.taken();
  await v.write(4096 * 4, c.subarray(0, 4096));
  t.true(srv.taken() > taken, 'and the fast path serves the volume again');
});

rbdTest('rbd fast path: a gateway fenced out of the cluster stops submitting natively at once, and once served again through a new client a session that logged in while it was fenced runs natively', async (t) => {
  await ceph().createImage('fenced', 4 * MiB);
  // Reservations kept in this process: a shared record going stale and read again would re-decide the fast path
  // too, and the test is of the backend's own signal (Backend.onFastPathChange).
  const a = await serve(t, 'fenced', true, { sharedReservations: false });
  await a.rbd.publishGateway(1);
  const d = (n: number): Buffer => Buffer.alloc(4096, n);
  const early = await (await session(t, a.port, 'iqn.2026-12.io.rblk:early')).open('vol');
  await early.write(0, d(1)); // the login's unit attention, through JavaScript
  let before = a.taken();
  await early.write(4096, d(2));
  t.is(a.taken() - before, 1, 'before the fence: native');

  // Another gateway of the image fences this one (what FENCE GATEWAY has it do, docs/backends.md "Fencing another gateway").
  const other = await RbdBackend.open({ pool: ceph().pool, image: 'fenced', conf: ceph().conf, timeoutSeconds: 3, readOnly: false });
  t.teardown(() => other.close());
  const fence = await other.fenceGateway(1);
  t.is(fence.kind, 'fenced');
  // The OSD refuses the fenced client from the fencing gateway's next operation on (it carries the blocklist's
  // map epoch, docs/backends.md "Fencing another gateway"), as an initiator's reissued write would: one first.
  await other.read(Buffer.alloc(4096), 0);
  await t.throwsAsync(early.write(8192, d(3)), { instanceOf: RblkError }, 'the blocklisted client refuses the write');
  // The write's EBLOCKLISTED is proof enough: the backend is fenced before the command is answered, whatever
  // the image's watch has said by then (docs/backends.md "A fenced gateway learns of it").
  t.true(a.rbd.fenced, 'the backend knows it is fenced');
  before = a.taken();
  await t.throwsAsync(early.write(8192, d(3)), { instanceOf: RblkError, message: /NOT READY/ }, 'fenced: refused through JavaScript');
  t.is(a.taken() - before, 0, 'fenced: nothing is submitted natively to the dead client');

  // A session that logs in while the volume is fenced is refused the fast path (its target is gone; even
  // READ CAPACITY is refused, so it cannot open the volume yet)...
  const lateSession = await session(t, a.port, 'iqn.2026-12.io.rblk:late');
  await t.throwsAsync(lateSession.open('vol'), { instanceOf: RblkError, message: /NOT READY/ });
  await early.close();
  // ...and gets it once the backend serves again through a new client (the daemon calls recover() once the LU is idle).
  t.not(await a.rbd.recover(), '', 'a new client, published again');
  const late = await lateSession.open('vol');
  before = a.taken();
  await late.write(12288, d(5));
  await late.write(16384, d(6));
  t.is(a.taken() - before, 2, 'the session that logged in while fenced is native now');
  t.true((await late.read(12288, 8192)).equals(Buffer.concat([d(5), d(6)])));
  const image = await ceph().run('rbd', ['export', `${ceph().pool}/fenced`, '-']);
  t.true(image.subarray(12288, 20480).equals(Buffer.concat([d(5), d(6)])), 'rbd export holds what the new client wrote');
  t.true(image.subarray(8192, 12288).equals(Buffer.alloc(4096)), 'the refused write never landed');
});

for (const path of [
  { name: 'the fast path', fastPath: true, reactors: 0 },
  { name: 'the fast path on a reactor thread', fastPath: true, reactors: 2 },
  { name: 'JavaScript (rbd fast_path off)', fastPath: false, reactors: 0 },
] as const) {
rbdTest(`rbd fenced gateway: the first write refused with EBLOCKLISTED on ${path.name} fences the backend before the write is answered; the next is refused NOT READY through JavaScript`, async (t) => {
  const image = `first-errno-${path.fastPath ? 'on' : 'off'}-${path.reactors}`;
  await ceph().createImage(image, 4 * MiB);
  // No record in the cluster: its watch is not the signal under test.
  const a = await serve(t, image, path.fastPath, { sharedReservations: false, reactors: path.reactors });
  const notices: string[] = [];
  a.rbd.onNotice((n) => notices.push(n.message));
  await a.rbd.publishGateway(1);
  const d = (n: number): Buffer => Buffer.alloc(4096, n);
  const v = await (await session(t, a.port, 'iqn.2026-12.io.rblk:first-errno')).open('vol');
  await v.write(0, d(1)); // the login's unit attention, through JavaScript
  let before = a.taken();
  await v.write(4096, d(2));
  t.is(a.taken() - before, path.fastPath ? 1 : 0, path.fastPath ? 'native before the fence' : 'through JavaScript');
  t.is(a.onReactor(), path.reactors > 0 ? 1 : 0);

  const other = await RbdBackend.open({ pool: ceph().pool, image, conf: ceph().conf, timeoutSeconds: 3, readOnly: false });
  t.teardown(() => other.close());
  t.is((await other.fenceGateway(1)).kind, 'fenced');
  // As above: the fencing gateway's next operation brings the OSD the blocklist's map.
  await other.read(Buffer.alloc(4096), 0);
  const refused = await t.throwsAsync(v.write(8192, d(3)), { instanceOf: RblkError }, 'the blocklisted client refuses the write');
  t.is((refused as RblkError | undefined)?.sense?.key, 0x02, `NOT READY whichever signal came first: ${String(refused)}`);
  t.true(a.rbd.fenced, 'the backend knew it was fenced by the time the write was answered');
  before = a.taken();
  await t.throwsAsync(v.write(8192, d(3)), { instanceOf: RblkError, message: /NOT READY/ }, 'fenced: refused through JavaScript');
  t.is(a.taken() - before, 0, 'nothing more is submitted natively to the dead client');
  t.true((await ceph().run('rbd', ['export', `${ceph().pool}/${image}`, '-'])).subarray(8192, 12288).equals(Buffer.alloc(4096)), 'the refused write never landed');
  t.is(notices.filter((m) => m.includes('blocklisted this gateway')).length, 1, 'the backend said so once, whichever signals came');
});
}

rbdTest('rbd fenced gateway: an idle gateway that owned the exclusive lock learns of its fence from the image\'s watch, with no I/O of its own to fail', async (t) => {
  await ceph().createImage('idle-fenced', 4 * MiB);
  const a = await serve(t, 'idle-fenced', true, { sharedReservations: false });
  const notices: string[] = [];
  a.rbd.onNotice((n) => notices.push(n.message));
  await a.rbd.publishGateway(1);
  const s = await session(t, a.port, 'iqn.2026-12.io.rblk:idle');
  // A write takes the image's exclusive lock: at the fence librbd then releases it and refreshes the image itself,
  // which takes the watch's EBLOCKLISTED before rblk can see it in a re-read of the size.
  await (await s.open('vol')).write(0, Buffer.alloc(4096, 1));
  await s.close();
  const other = await RbdBackend.open({ pool: ceph().pool, image: 'idle-fenced', conf: ceph().conf, timeoutSeconds: 3, readOnly: false });
  t.teardown(() => other.close());
  t.is((await other.fenceGateway(1)).kind, 'fenced');
  // Nothing here fails a command: only the watch (and the probe it sends, native/rbd.ts) can tell the backend.
  // Polled, bounded by a guard against a hang, not a measure of speed.
  for (let i = 0; i < 600 && !a.rbd.fenced; i++) await new Promise((r) => setTimeout(r, 50));
  t.true(a.rbd.fenced, 'the backend heard of the fence from the watch');
  t.is(notices.filter((m) => m.includes('blocklisted this gateway')).length, 1, 'and said so once');
  const late = await session(t, a.port, 'iqn.2026-12.io.rblk:idle-late');
  await t.throwsAsync(late.open('vol'), { instanceOf: RblkError, message: /NOT READY/ }, 'a new session is refused while fenced');
});
