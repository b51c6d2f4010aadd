// Snapshots and clones of an rbd volume (docs/operations.md "Snapshots and
// clones"): librbd's own, through the rbd addon (native/src/rbd/rbd-snap.cc),
// against the throw-away Ceph cluster (test/helpers/ceph-cluster.ts) and the
// real rblkd. A snapshot taken under QD32 writes holds every write
// acknowledged before the request and none issued after its answer, as `rbd
// export` reads it, and as it reads over rblk once served read-only; its
// clone, served by a reload, reads the same and is writable without touching
// the snapshot or the origin. Skipped
// without Ceph or without rblk_rbd.node.
import test from 'ava';
import { connect, type Session } from '../../initiator/index.js';
import { nativeFeatures } from '../../native/binding.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import { cephMissing, startCephCluster, type CephCluster } from '../helpers/ceph-cluster.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { BS, blockOf, checkSnapshot, fill, QD, readAll, snapshotUnderLoad } from './helpers/snapshot-load.js';

const BLOCKS = 4096; // 16 MiB
const TARGET = 'iqn.2026-12.io.rblk:rbd-snapshot';
const reason = cephMissing() ?? (nativeFeatures().rbd ? null : 'rblk_rbd.node was not built (apt-get install librbd-dev, then rebuild)');
const rbdTest = reason === null ? test.serial : test.skip;
if (reason !== null) test.skip(`rbd snapshot tests: ${reason}`, () => undefined);

let cluster: CephCluster | undefined;
test.before(async () => {
  if (reason !== null) return;
  cluster = await startCephCluster();
  await cluster.createImage('snapvol', BLOCKS * BS);
});
test.after.always(async () => {
  await cluster?.stop();
});

rbdTest('rbd: a snapshot under QD32 writes holds every write acknowledged before it and none after; served read-only (rbd.snapshot) and cloned, it reads the same over rblk; the clone is independent', async (t) => {
  t.timeout(240_000);
  const ceph = cluster!;
  const w = workdir(t);
  const socket = `${w.dir}/rblkd.ctl`;
  const rbd = (image: string): Record<string, unknown> => ({ pool: ceph.pool, image, conf: ceph.conf, timeout_s: 10 });
  const volumes: Record<string, unknown>[] = [{ name: 'vol', rbd: rbd('snapvol'), lun: 0 }];
  const extra = { target_name: TARGET, limits: { queue_depth: 64 } };
  w.writeConfig(baseConfig(w, volumes, extra));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  await d.waitForLine(/rblkd ready/);
  const session = async (name: string): Promise<Session> => {
    const s = await connect({ address: '127.0.0.1', port, provider: 'tcp', initiatorName: `iqn.2026-12.io.rblk:${name}`, targetName: TARGET, queueDepth: QD });
    t.teardown(() => s.close().catch(() => undefined));
    return s;
  };

  const s1 = await session('writer');
  const vol = await s1.open('vol');
  await fill(vol, 0, BLOCKS);
  const r = await snapshotUnderLoad(s1, vol, socket, ['vol', 's1'], BLOCKS);
  t.is(r.taken.method, 'rbd');
  t.is(r.taken.path, `${ceph.pool}/snapvol@s1`);
  const before = r.writes.filter((x) => x.acked < r.snapStart).length;
  const after = r.writes.filter((x) => x.issued > r.snapEnd).length;
  t.log(`${r.writes.length} writes: ${before} acknowledged before the snapshot request, ${after} issued after its answer; I/O paused ${r.taken.pausedMs} ms`);
  t.true(before > QD && after > QD, 'the load ran on both sides of the snapshot');
  await fill(vol, -1, BLOCKS);

  // The snapshot as Ceph's own tool reads it.
  const snap = await ceph.run('rbd', ['export', `${ceph.pool}/snapvol@s1`, '-']);
  t.is(snap.length, BLOCKS * BS);
  const { problems, inFlight } = checkSnapshot(snap, r, BLOCKS);
  t.log(`${inFlight} blocks had a write in flight across the snapshot`);
  t.deepEqual(problems.slice(0, 10), [], `${problems.length} blocks differ from what was acknowledged`);

  const listed = (await controlRequest(socket, 'snapshots', ['vol'])) as { snapshots: { name: string; size: number; created: string; path: string }[] };
  t.deepEqual(
    listed.snapshots.map((x) => [x.name, x.size, x.path]),
    [['s1', BLOCKS * BS, `${ceph.pool}/snapvol@s1`]],
  );
  t.false(Number.isNaN(Date.parse(listed.snapshots[0].created)));
  await t.throwsAsync(controlRequest(socket, 'snapshot', ['vol', 's1']), { message: /EEXIST|exists/ });

  // A clone, served by a reload, reads the snapshot byte for byte and is its own.
  const cloned = (await controlRequest(socket, 'clone', ['vol@s1', 'snapclone'])) as { path: string; method: string };
  t.deepEqual([cloned.path, cloned.method], [`${ceph.pool}/snapclone`, 'rbd']);
  // The snapshot itself is served only read-only.
  w.writeConfig(baseConfig(w, [...volumes, { name: 'snap', rbd: { ...rbd('snapvol'), snapshot: 's1' }, lun: 2 }], extra));
  const refused = (await controlRequest(socket, 'reload')) as { applied: boolean; errors: string[] };
  t.false(refused.applied);
  t.regex(refused.errors.join('\n'), /rbd\.snapshot: a snapshot is served read-only: give read_only: true/);
  w.writeConfig(baseConfig(w, [...volumes, { name: 'cl', rbd: rbd('snapclone'), lun: 1 }, { name: 'snap', rbd: { ...rbd('snapvol'), snapshot: 's1' }, read_only: true, lun: 2 }], extra));
  const reloaded = (await controlRequest(socket, 'reload')) as { applied: boolean; added: string[]; errors: string[] };
  t.true(reloaded.applied, reloaded.errors.join('; '));
  t.deepEqual(reloaded.added.sort(), ['cl', 'snap']);
  const s2 = await session('reader');
  const snapVol = await s2.open('snap');
  t.true((await readAll(snapVol, BLOCKS)).equals(snap), 'the snapshot, served read-only, reads over rblk as rbd export reads it');
  await t.throwsAsync(snapVol.write(0, blockOf(-3, 0)), undefined, 'and refuses writes');
  await t.throwsAsync(controlRequest(socket, 'snapshot', ['snap', 'x']), { message: /a snapshot has no snapshots/ });
  const cl = await s2.open('cl');
  t.true((await readAll(cl, BLOCKS)).equals(snap), 'the clone reads as the snapshot');
  const mark = blockOf(-2, 7);
  await cl.write(7 * BS, mark);
  const back = Buffer.alloc(BS);
  await cl.read(7 * BS, back);
  t.true(back.equals(mark), 'the clone is writable');
  t.true((await ceph.run('rbd', ['export', `${ceph.pool}/snapvol@s1`, '-'])).equals(snap), 'a write to the clone leaves the snapshot alone');
  await vol.read(7 * BS, back);
  t.true(back.equals(blockOf(-1, 7)), 'and the origin');

  // A snapshot with a clone is not deleted; without, it is.
  await s2.close();
  w.writeConfig(baseConfig(w, [...volumes, { name: 'cl', rbd: rbd('snapclone'), lun: 1 }], extra));
  // The writer's session still sees LUN 2, so removing 'snap' needs force (docs/operations.md "Removing a volume in use").
  const unforced = (await controlRequest(socket, 'reload')) as { applied: boolean; inUse: { volume: string }[] };
  t.deepEqual([unforced.applied, unforced.inUse.map((u) => u.volume)], [false, ['snap']]);
  t.true(((await controlRequest(socket, 'reload', ['force'])) as { applied: boolean }).applied);
  await t.throwsAsync(controlRequest(socket, 'delete-snapshot', ['vol', 's1']), { message: /snapshot vol@s1 has clones/ });
  await controlRequest(socket, 'snapshot', ['vol', 's2']);
  await controlRequest(socket, 'delete-snapshot', ['vol', 's2']);
  t.deepEqual(((await controlRequest(socket, 'snapshots', ['vol'])) as { snapshots: { name: string }[] }).snapshots.map((x) => x.name), ['s1']);
  await t.throwsAsync(controlRequest(socket, 'clone', ['vol@nope', 'x']), { message: /volume vol has no snapshot nope/ });
  await t.throwsAsync(controlRequest(socket, 'clone', ['vol@s1', 'other/x']), { message: /give its name/ });
  await s1.close();
});

rbdTest('rbd: clone_of in the YAML (VOLUME@SNAP and POOL/IMAGE@SNAP) makes a librbd clone at the open that finds no image; it reads the snapshot byte for byte, its writes touch neither parent, and once flattened (ctl flatten) the snapshot can be deleted and the clone still reads the same after a restart', async (t) => {
  t.timeout(240_000);
  const ceph = cluster!;
  const blocks = 1024; // 4 MiB
  await ceph.createImage('clonebase', blocks * BS);
  const w = workdir(t);
  const socket = `${w.dir}/rblkd.ctl`;
  const rbd = (image: string): Record<string, unknown> => ({ pool: ceph.pool, image, conf: ceph.conf, timeout_s: 10 });
  const base = { name: 'base', rbd: rbd('clonebase'), lun: 0 };
  const extra = { target_name: TARGET, limits: { queue_depth: 64 } };
  w.writeConfig(baseConfig(w, [base], extra));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  await d.waitForLine(/rblkd ready/);
  const session = async (name: string, p = port): Promise<Session> => {
    const s = await connect({ address: '127.0.0.1', port: p, provider: 'tcp', initiatorName: `iqn.2026-12.io.rblk:${name}`, targetName: TARGET, queueDepth: QD });
    t.teardown(() => s.close().catch(() => undefined));
    return s;
  };
  const s1 = await session('clone-writer');
  const vol = await s1.open('base');
  await fill(vol, 11, blocks);
  await controlRequest(socket, 'snapshot', ['base', 'gold']);
  // The origin moves on: the clones must read the snapshot, not the image.
  await fill(vol, 12, blocks);
  const snap = await ceph.run('rbd', ['export', `${ceph.pool}/clonebase@gold`, '-']);
  t.true(snap.subarray(0, BS).equals(blockOf(11, 0)));

  // A clone_of that cannot be made is refused as the file volume's is, naming the key.
  w.writeConfig(baseConfig(w, [base, { name: 'bad', rbd: rbd('x'), clone_of: `otherpool/clonebase@gold`, lun: 3 }], extra));
  const refused = (await controlRequest(socket, 'reload')) as { applied: boolean; errors: string[] };
  t.false(refused.applied);
  t.regex(refused.errors.join('\n'), /clone_of: otherpool\/clonebase@gold: a clone is made in its parent's pool/);

  // A snapshot that does not exist is found at the open: the reload is refused, saying which, and nothing is made.
  w.writeConfig(baseConfig(w, [base, { name: 'bad', rbd: rbd('nosnapclone'), clone_of: 'base@nosuch', lun: 3 }], extra));
  const missing = (await controlRequest(socket, 'reload')) as { applied: boolean; errors: string[] };
  t.false(missing.applied);
  t.regex(missing.errors.join('\n'), /volume bad: .*clone_of \S+\/clonebase@nosuch: rbd image \S+\/clonebase has no snapshot nosuch/);
  await t.throwsAsync(ceph.run('rbd', ['info', `${ceph.pool}/nosnapclone`]));

  const volumes = [base, { name: 'cl', rbd: rbd('yamlclone'), clone_of: 'base@gold', lun: 1 }, { name: 'cl2', rbd: rbd('yamlclone2'), clone_of: `${ceph.pool}/clonebase@gold`, lun: 2 }];
  w.writeConfig(baseConfig(w, volumes, extra));
  const reloaded = (await controlRequest(socket, 'reload')) as { applied: boolean; added: string[]; errors: string[] };
  t.true(reloaded.applied, reloaded.errors.join('; '));
  t.deepEqual(reloaded.added.sort(), ['cl', 'cl2']);
  for (const image of ['yamlclone', 'yamlclone2']) {
    const info = JSON.parse((await ceph.run('rbd', ['info', '--format', 'json', `${ceph.pool}/${image}`])).toString()) as { parent?: { image: string; snapshot: string } };
    t.like(info.parent, { image: 'clonebase', snapshot: 'gold' }, `${image} is a librbd clone of clonebase@gold`);
  }

  const s2 = await session('clone-reader');
  const cl = await s2.open('cl');
  const cl2 = await s2.open('cl2');
  t.true((await readAll(cl, blocks)).equals(snap), 'clone_of VOLUME@SNAP reads the snapshot byte for byte');
  t.true((await readAll(cl2, blocks)).equals(snap), 'clone_of POOL/IMAGE@SNAP too');
  const mark = blockOf(-7, 9);
  await cl.write(9 * BS, mark);
  const back = Buffer.alloc(BS);
  await cl.read(9 * BS, back);
  t.true(back.equals(mark), 'the clone is writable');
  await cl2.read(9 * BS, back);
  t.true(back.equals(blockOf(11, 9)), 'the other clone of the same snapshot does not see it');
  t.true((await ceph.run('rbd', ['export', `${ceph.pool}/clonebase@gold`, '-'])).equals(snap), 'a write to the clone leaves the snapshot alone');
  await vol.read(9 * BS, back);
  t.true(back.equals(blockOf(12, 9)), 'and the origin');

  // Flatten: refused where there is no parent; then the snapshot can go.
  await t.throwsAsync(controlRequest(socket, 'delete-snapshot', ['base', 'gold']), { message: /snapshot base@gold has clones: flatten them \(`rblkd ctl flatten CLONE`/ });
  await t.throwsAsync(controlRequest(socket, 'flatten', ['base']), { message: /volume base \(.*clonebase\) is not a clone/ });
  t.deepEqual(await controlRequest(socket, 'flatten', ['cl']), { volume: 'cl', path: `${ceph.pool}/yamlclone` });
  t.deepEqual(await controlRequest(socket, 'flatten', ['cl2']), { volume: 'cl2', path: `${ceph.pool}/yamlclone2` });
  for (const image of ['yamlclone', 'yamlclone2']) {
    const info = JSON.parse((await ceph.run('rbd', ['info', '--format', 'json', `${ceph.pool}/${image}`])).toString()) as { parent?: unknown };
    t.is(info.parent, undefined, `${image} has no parent once flattened`);
  }
  await controlRequest(socket, 'delete-snapshot', ['base', 'gold']);
  t.deepEqual(((await controlRequest(socket, 'snapshots', ['base'])) as { snapshots: unknown[] }).snapshots, []);
  const expected = Buffer.from(snap);
  mark.copy(expected, 9 * BS);
  t.true((await readAll(cl, blocks)).equals(expected), 'the flattened clone, its parent snapshot deleted, reads what it held');
  t.true((await readAll(cl2, blocks)).equals(snap));
  await s2.close();
  await s1.close();

  // A restart with the same file: the images exist, clone_of (its snapshot gone now) has no further effect.
  d.kill('SIGTERM');
  t.is((await d.exited).code, 0);
  const again = spawnDaemon(t, ['--config', w.configPath]);
  const port2 = await again.port();
  await again.waitForLine(/rblkd ready/);
  const s3 = await session('clone-after', port2);
  t.true((await readAll(await s3.open('cl'), blocks)).equals(expected), 'after a restart the clone reads the same');
  await s3.close();
});
