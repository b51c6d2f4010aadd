// Snapshots and clones of file volumes (docs/operations.md "Snapshots and
// clones"), on the real rblkd:
//   - on a real XFS with reflink (a loop-mounted image made by mkfs.xfs -m
//     reflink=1): a snapshot taken under a QD32 write load holds every write
//     acknowledged before the request and none issued after its answer, block
//     by block, byte for byte, read back over rblk once exported read-only by a
//     reload; a clone made by YAML clone_of reads the same and is writable
//     without touching the snapshot or the origin;
//   - on a filesystem without reflink (the root ext4): refused, saying so, and
//     nothing left behind; --copy makes a full copy; snapshots lists it;
//     clone --copy; delete-snapshot; a memory volume has none.
// Needs root (mount) and mkfs.xfs (xfsprogs); skipped without them.
import test, { type ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Session, type Volume } from '../../initiator/index.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import { clonePath, parseSnapshotRef, snapshotBase } from '../../target/daemon/snapshots.js';
import type { VolumeConfig } from '../../config/schema.js';
import { BS, blockOf, checkSnapshot, fill, QD, readAll, snapshotUnderLoad } from './helpers/snapshot-load.js';
import { baseConfig, ctl, runDaemon, spawnDaemon, workdir, type DaemonProcess, type Workdir } from './helpers/daemon-process.js';

const BLOCKS = 16384; // 64 MiB: a full copy of it takes long enough for writes to land in the middle of an unquiesced one
const TARGET = 'iqn.2026-12.io.rblk:snapshot';

function haveXfs(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync('mkfs.xfs', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const xfsTest = haveXfs() ? test.serial : test.skip;

/** A 1 GiB XFS with reflink, loop-mounted; unmounted (which frees the loop device) and removed at teardown. */
function reflinkXfs(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-xfs-'));
  const img = join(dir, 'x.img');
  const mnt = join(dir, 'mnt');
  mkdirSync(mnt);
  let mounted = false;
  // Registered first, so it runs after the daemon's teardown (ava runs them last to first).
  t.teardown(async () => {
    for (let i = 0; mounted && i < 50; i++) {
      try {
        execFileSync('umount', [mnt], { stdio: 'pipe' });
        mounted = false;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    if (mounted) execFileSync('umount', ['-l', mnt]);
    rmSync(dir, { recursive: true, force: true });
  });
  execFileSync('truncate', ['-s', '1G', img]);
  execFileSync('mkfs.xfs', ['-q', '-m', 'reflink=1', img]);
  execFileSync('mount', ['-o', 'loop', img, mnt]);
  mounted = true;
  return mnt;
}

async function serveAndConnect(t: ExecutionContext, w: Workdir, volumes: Record<string, unknown>[]): Promise<{ d: DaemonProcess; socket: string; session: (name: string) => Promise<Session> }> {
  const socket = join(w.dir, 'rblkd.ctl');
  w.writeConfig(baseConfig(w, volumes, { target_name: TARGET, limits: { queue_depth: 64 } }));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  await d.waitForLine(/rblkd ready/);
  const session = async (name: string): Promise<Session> => {
    const s = await connect({ address: '127.0.0.1', port, provider: 'tcp', initiatorName: `iqn.2026-12.io.rblk:${name}`, targetName: TARGET, queueDepth: QD });
    t.teardown(() => s.close().catch(() => undefined));
    return s;
  };
  return { d, socket, session };
}

xfsTest('XFS reflink: a snapshot under QD32 writes holds every write acknowledged before it and none after; clone_of reads the same and is independent', async (t) => {
  t.timeout(240_000);
  const mnt = reflinkXfs(t);
  const w = workdir(t);
  const volPath = join(mnt, 'vol.img');
  const volume = { name: 'vol', path: volPath, size: `${(BLOCKS * BS) >> 20}MiB`, lun: 0 };
  const { d, socket, session } = await serveAndConnect(t, w, [volume]);
  const s1 = await session('writer');
  const vol = await s1.open('vol');
  await fill(vol, 0, BLOCKS);

  const r = await snapshotUnderLoad(s1, vol, socket, ['vol', 's1'], BLOCKS);
  const { writes, snapStart, snapEnd, taken } = r;
  t.is(taken.path, `${volPath}@s1`);
  t.is(taken.method, 'reflink');
  const before = writes.filter((x) => x.acked < snapStart).length;
  const after = writes.filter((x) => x.issued > snapEnd).length;
  t.log(`${writes.length} writes: ${before} acknowledged before the snapshot request, ${after} issued after its answer; I/O paused ${taken.pausedMs} ms`);
  t.true(before > QD && after > QD, 'the load ran on both sides of the snapshot');
  const [info] = ((await controlRequest(socket, 'sessions')) as { initiator: string | null; native: { commands: number } }[]).filter((x) => x.initiator === 'iqn.2026-12.io.rblk:writer');
  t.log(`native fast-path commands: ${info?.native.commands ?? 0}`);

  // The origin moves on: every block overwritten.
  await fill(vol, -1, BLOCKS);

  // Export the snapshot read-only and a clone of it, by a reload.
  const clonePath = join(mnt, 'clone.img');
  w.writeConfig(
    baseConfig(w, [volume, { name: 'snap', path: `${volPath}@s1`, read_only: true }, { name: 'cl', path: clonePath, clone_of: 'vol@s1' }], { target_name: TARGET, limits: { queue_depth: 64 } }),
  );
  const reloaded = (await controlRequest(socket, 'reload')) as { applied: boolean; added: string[]; errors: string[] };
  t.true(reloaded.applied, reloaded.errors.join('; '));
  t.deepEqual(reloaded.added.sort(), ['cl', 'snap']);
  t.true(existsSync(clonePath));

  const s2 = await session('reader');
  const snapVol = await s2.open('snap');
  const snap = await readAll(snapVol, BLOCKS);

  const { problems, inFlight } = checkSnapshot(snap, r, BLOCKS);
  t.log(`${inFlight} blocks had a write in flight across the snapshot`);
  t.deepEqual(problems.slice(0, 10), [], `${problems.length} blocks differ from what was acknowledged`);

  // The clone reads the snapshot byte for byte, and is its own.
  const clVol = await s2.open('cl');
  t.true((await readAll(clVol, BLOCKS)).equals(snap), 'the clone reads as the snapshot');
  const mark = blockOf(-2, 7);
  await clVol.write(7 * BS, mark);
  const back = Buffer.alloc(BS);
  await clVol.read(7 * BS, back);
  t.true(back.equals(mark), 'the clone is writable');
  await snapVol.read(7 * BS, back);
  t.true(back.equals(snap.subarray(7 * BS, 8 * BS)), 'a write to the clone leaves the snapshot alone');
  await vol.read(7 * BS, back);
  t.true(back.equals(blockOf(-1, 7)), 'and the origin');
  t.true(readFileSync(`${volPath}@s1`).equals(snap), 'the snapshot file holds what was read over rblk');

  // Listed; not deleted while served; deleted once it is not.
  const listed = (await controlRequest(socket, 'snapshots', ['vol'])) as { snapshots: { name: string; size: number; created: string }[] };
  t.deepEqual(
    listed.snapshots.map((x) => [x.name, x.size]),
    [['s1', BLOCKS * BS]],
  );
  t.false(Number.isNaN(Date.parse(listed.snapshots[0].created)));
  await t.throwsAsync(controlRequest(socket, 'delete-snapshot', ['vol', 's1']), { message: /served as volume snap/ });
  await s2.close();
  await s1.close();
  t.false(d.lines.some((l) => /\berror:/.test(l) && !/not deleted|served as volume/.test(l)), 'no error logged');
});

test.serial('no reflink (ext4): refused and nothing left; --copy copies, under QD32 writes too; snapshots, clone --copy, clone_of refused, delete-snapshot; a memory volume has none', async (t) => {
  t.timeout(120_000);
  const w = workdir(t);
  const volPath = join(w.dir, 'vol.img');
  const { socket, session } = await serveAndConnect(t, w, [
    { name: 'vol', path: volPath, size: `${(BLOCKS * BS) >> 20}MiB`, lun: 0 },
    { name: 'mem', memory: true, size: '1MiB', lun: 1 },
  ]);
  const s = await session('copier');
  const vol = await s.open('vol');
  await fill(vol, 0, BLOCKS);
  const sock = ['--socket', socket];

  const refused = await ctl(['snapshot', 'vol', 's1', ...sock]);
  t.is(refused.code, 1);
  t.regex(refused.stderr, /cannot reflink .* ask for one with --copy/);
  t.false(existsSync(`${volPath}@s1`), 'a refused snapshot leaves no file');

  const copied = await ctl(['snapshot', 'vol', 's0', '--copy', ...sock]);
  t.is(copied.code, 0, copied.stderr);
  t.regex(copied.stdout, /snapshot vol@s0 taken: .*vol\.img@s0 \(full copy, 64 MiB/);
  t.true(readFileSync(`${volPath}@s0`).equals(Buffer.concat(Array.from({ length: BLOCKS }, (_, b) => blockOf(0, b)))), 'the copy holds the volume as it was');
  t.is((await ctl(['delete-snapshot', 'vol', 's0', ...sock])).code, 0);

  // A full copy takes a while, and the volume's I/O waits for all of it: the same guarantees under QD32 writes.
  const r = await snapshotUnderLoad(s, vol, socket, ['vol', 's1', '--copy'], BLOCKS);
  t.is(r.taken.method, 'copy');
  t.log(`${r.writes.length} writes; I/O paused ${r.taken.pausedMs} ms for the copy`);
  await fill(vol, -1, BLOCKS);
  const snap = readFileSync(`${volPath}@s1`);
  const { problems } = checkSnapshot(snap, r, BLOCKS);
  t.deepEqual(problems.slice(0, 10), [], `${problems.length} blocks differ from what was acknowledged`);

  const listed = await ctl(['snapshots', 'vol', ...sock]);
  t.is(listed.code, 0);
  t.regex(listed.stdout, /^NAME\s+SIZE\s+CREATED\s+PATH\ns1\s+64 MiB\s+\d{4}-\d\d-\d\dT[\d:.]+Z\s+\S+vol\.img@s1\n$/);

  t.regex((await ctl(['clone', 'vol@s1', 'c1.img', ...sock])).stderr, /cannot reflink/);
  const cloned = await ctl(['clone', 'vol@s1', 'c1.img', '--copy', ...sock]);
  t.is(cloned.code, 0, cloned.stderr);
  t.true(readFileSync(join(w.dir, 'c1.img')).equals(snap), 'the clone, beside the volume, holds the snapshot');
  t.regex((await ctl(['clone', 'vol@s1', 'c1.img', '--copy', ...sock])).stderr, /already exists/);
  // Only an rbd clone has a parent to flatten.
  const flat = await ctl(['flatten', 'vol', ...sock]);
  t.is(flat.code, 1);
  t.regex(flat.stderr, /volume vol is a file volume: its clone is a reflink, independent of the snapshot already/);

  // clone_of where there is no reflink: the reload that adds it is refused, saying what to do.
  const volumes = [
    { name: 'vol', path: volPath, size: `${(BLOCKS * BS) >> 20}MiB`, lun: 0 },
    { name: 'mem', memory: true, size: '1MiB', lun: 1 },
  ];
  w.writeConfig(baseConfig(w, [...volumes, { name: 'cl', path: join(w.dir, 'cl.img'), clone_of: 'vol@s1' }], { target_name: TARGET, limits: { queue_depth: 64 } }));
  const refusedReload = (await controlRequest(socket, 'reload')) as { applied: boolean; errors: string[] };
  t.false(refusedReload.applied);
  t.regex(refusedReload.errors.join('\n'), /volume cl: .*cannot reflink .*rblkd ctl clone vol@s1 \S+cl\.img --copy/);
  t.false(existsSync(join(w.dir, 'cl.img')));
  w.writeConfig(baseConfig(w, volumes, { target_name: TARGET, limits: { queue_depth: 64 } }));

  const deleted = await ctl(['delete-snapshot', 'vol', 's1', ...sock]);
  t.is(deleted.code, 0, deleted.stderr);
  t.false(existsSync(`${volPath}@s1`));
  t.regex((await ctl(['delete-snapshot', 'vol', 's1', ...sock])).stderr, /volume vol has no snapshot s1/);
  t.regex((await ctl(['snapshots', 'vol', ...sock])).stdout, /volume vol has no snapshots/);

  t.regex((await ctl(['snapshot', 'mem', 's1', ...sock])).stderr, /memory volume: it has no snapshots/);
  t.regex((await ctl(['snapshot', 'nope', 's1', ...sock])).stderr, /no volume nope/);
  t.regex((await ctl(['snapshot', 'vol', '../x', ...sock])).stderr, /snapshot name '\.\.\/x' must be/);
});

test('clone_of is checked at load: an existing snapshot of another file volume of the file; a snapshot served writable is a warning', async (t) => {
  const w = workdir(t);
  const a = join(w.dir, 'a.img');
  writeFileSync(a, Buffer.alloc(1 << 20));
  copyFileSync(a, `${a}@s1`);
  w.writeConfig(
    baseConfig(w, [
      { name: 'a', path: a },
      { name: 'ok', path: join(w.dir, 'ok.img'), clone_of: 'a@s1' },
      { name: 'nosnap', path: join(w.dir, 'n.img'), clone_of: 'a@nope' },
      { name: 'novol', path: join(w.dir, 'v.img'), clone_of: 'zz@s1' },
      { name: 'mem', memory: true, size: '1MiB', clone_of: 'a@s1' },
      { name: 'bad', path: join(w.dir, 'b.img'), size: '1MiB', clone_of: 'a' },
    ]),
  );
  const r = await runDaemon(t, ['--check-config', w.configPath]);
  t.is(r.code, 78);
  const said = r.stderr;
  t.regex(said, /volumes\[2\]\.clone_of: volume a has no snapshot nope \(\S+a\.img@nope\); take it with `rblkd ctl snapshot a nope`/);
  t.regex(said, /volumes\[3\]\.clone_of: names no other file volume 'zz' of this file/);
  t.regex(said, /volumes\[4\]\.clone_of: applies only to file and rbd volumes; this one is memory/);
  t.regex(said, /volumes\[5\]\.clone_of: must be VOLUME@SNAPSHOT/);
  t.notRegex(said, /volumes\[1\]/, 'a clone_of of an existing snapshot, its file not made yet, is fine');

  // Warnings are printed with a file that has no error.
  w.writeConfig(baseConfig(w, [{ name: 'a', path: a }, { name: 'ok', path: join(w.dir, 'ok.img'), clone_of: 'a@s1' }, { name: 'rw', path: `${a}@s1` }]));
  const ok = await runDaemon(t, ['--check-config', w.configPath]);
  t.is(ok.code, 0, ok.stderr);
  t.regex(ok.stderr, /warning: volumes\[2\]\.path: is snapshot s1 of volume a, served writable: writes change the snapshot/);
});

test('snapshot references and where clones go; block devices and memory volumes say why they have no snapshots', (t) => {
  t.deepEqual(parseSnapshotRef('db@nightly'), { volume: 'db', snapshot: 'nightly' });
  t.throws(() => parseSnapshotRef('db'), { message: "'db' is not VOLUME@SNAPSHOT" });
  t.throws(() => parseSnapshotRef('db@../x'), { message: /snapshot name '\.\.\/x' must be/ });
  t.is(clonePath('/srv/rblk/db.img', 'test.img'), '/srv/rblk/test.img');
  t.is(clonePath('/srv/rblk/db.img', '/other/test.img'), '/other/test.img');
  const common = { blockSize: 512, readOnly: false, direct: false, ioEngine: 'auto', thin: false, lun: 0 } as const;
  const rbd = { ...common, name: 'r', backing: { kind: 'rbd', pool: 'rbd', image: 'db' } } as unknown as VolumeConfig;
  t.throws(() => snapshotBase(rbd), { message: /volume r is an rbd image: its snapshots are librbd's, not files/ });
  t.throws(() => snapshotBase({ ...common, name: 'd', backing: { kind: 'blockdev', path: '/dev/sdz' } }), { message: /block device \(\/dev\/sdz\): rblkd snapshots only file volumes/ });
  t.throws(() => snapshotBase({ ...common, name: 'm', backing: { kind: 'memory', size: 1 } as unknown as VolumeConfig['backing'] }), { message: /memory volume: it has no snapshots/ });
  t.is(snapshotBase({ ...common, name: 'f', backing: { kind: 'file', path: '/srv/f.img' } }), '/srv/f.img');
});
