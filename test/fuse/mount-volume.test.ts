// mountVolume end to end on real FUSE, loop devices and ext4: make a
// filesystem, write files, unmount, check it with e2fsck, mount it again and
// read them back; read-only volumes; a failed mount and a busy unmount leave
// nothing half done. At the end nothing of ours is mounted or attached.
import test, { type ExecutionContext } from 'ava';
import { mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  attachFuse,
  cleanupStaleAttachment,
  mountVolume,
  NoFilesystemError,
  readAttachmentRecords,
  unmountVolume,
  type MountedVolume,
} from '../../initiator/fuse/index.js';
import { attachLoop, detachLoop, loopBackingFile, loopDirectIo } from '../../initiator/fuse/loop-device.js';
import { CommandError, run } from '../../initiator/fuse/run.js';
import { listMounts } from '../../native/fuse.js';
import { MemoryDevice, randomize } from '../helpers/memory-device.js';
import { mountsUnder } from './helpers/fuse-fixture.js';

const MiB = 1 << 20;
let root = '';

test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'rblk-mnt-'));
});

/** Loop devices whose backing file is under root (losetup -a). */
async function loopsUnder(dir: string): Promise<string[]> {
  const out = await run('losetup', ['--list', '--noheadings', '--output', 'NAME,BACK-FILE']);
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter(([, file]) => file !== undefined && file.startsWith(`${dir}/`))
    .map(([name]) => name);
}

test.after.always('nothing of ours is left mounted or attached', async (t) => {
  // Whatever a failed test left behind goes first (records name it all).
  for (const stateDir of await readdir(root).catch(() => [] as string[])) {
    const { records } = await readAttachmentRecords(join(root, stateDir));
    for (const rec of records) await cleanupStaleAttachment(join(root, stateDir), rec).catch(() => undefined);
  }
  const mounts = await mountsUnder(root);
  const loops = await loopsUnder(root);
  await rm(root, { recursive: true, force: true });
  t.deepEqual(mounts, [], 'mounts under the test root');
  t.deepEqual(loops, [], 'loop devices over files under the test root');
});

async function scratch(t: ExecutionContext): Promise<{ stateDir: string; mnt: string }> {
  const base = await mkdtemp(join(root, 't-'));
  return { stateDir: join(base, 'state'), mnt: join(base, 'mnt') };
}

function unmountAtEnd(t: ExecutionContext, vol: MountedVolume): void {
  t.teardown(() => vol.unmount({ force: true }).catch((err: unknown) => t.log(`teardown: ${String(err)}`)));
}

async function assertGone(t: ExecutionContext, vol: MountedVolume): Promise<void> {
  const mounted = (await listMounts()).map((m) => m.mountpoint);
  t.false(mounted.includes(vol.mountpoint), 'filesystem unmounted');
  t.false(mounted.includes(vol.fuseDir), 'FUSE unmounted');
  t.not(await loopBackingFile(vol.loopDevice), vol.file, 'loop device detached');
  await t.throwsAsync(stat(vol.fuseDir), { code: 'ENOENT' });
  t.deepEqual((await readAttachmentRecords(vol.stateDir)).records, []);
}

test.serial('mkfs ext4, write, unmount, fsck clean, mount again: files intact', async (t) => {
  const { stateDir, mnt } = await scratch(t);
  const dev = new MemoryDevice({ size: 64 * MiB, blockSize: 4096 });
  const vol = await mountVolume(dev, mnt, { mkfs: 'ext4', stateDir, label: 'rblk://127.0.0.1/vol0' });
  unmountAtEnd(t, vol);

  t.is(vol.fsType, 'ext4');
  t.true(await loopDirectIo(vol.loopDevice), 'the loop device uses direct I/O');
  const { records } = await readAttachmentRecords(stateDir);
  t.is(records.length, 1);
  t.like(records[0], {
    kind: 'mount',
    pid: process.pid,
    label: 'rblk://127.0.0.1/vol0',
    loopDevice: vol.loopDevice,
    mountpoint: vol.mountpoint,
    fsType: 'ext4',
    file: vol.file,
    createdMountpoint: true,
  });

  const big = randomize(Buffer.alloc(3 * MiB + 123));
  await writeFile(join(mnt, 'hello.txt'), 'hello, volume\n');
  await mkdir(join(mnt, 'sub'));
  await writeFile(join(mnt, 'sub', 'big.bin'), big);
  const flushesBefore = dev.count('flush');
  await unmountVolume(vol);
  t.true(dev.count('flush') > flushesBefore, 'unmount flushed the device');
  await assertGone(t, vol);
  await t.throwsAsync(stat(mnt), { code: 'ENOENT' }, 'the mount point it created is removed');

  // e2fsck -fn through a fresh FUSE file and a read-only loop device.
  const fuseDir = await mkdtemp(join(root, 'fsck-'));
  const att = await attachFuse(dev, fuseDir);
  try {
    const loop = await attachLoop(att.path, { readOnly: true, sectorSize: 4096, directIo: true });
    try {
      await t.notThrowsAsync(run('e2fsck', ['-fn', loop]), 'e2fsck -fn reports a clean filesystem');
    } finally {
      await detachLoop(loop, att.path);
    }
  } finally {
    await att.close();
  }

  await mkdir(mnt);
  const again = await mountVolume(dev, mnt, { stateDir });
  unmountAtEnd(t, again);
  t.is(again.fsType, 'ext4');
  t.is(await readFile(join(mnt, 'hello.txt'), 'utf8'), 'hello, volume\n');
  t.true((await readFile(join(mnt, 'sub', 'big.bin'))).equals(big));
  await unmountVolume(again);
  await assertGone(t, again);
  t.true((await stat(mnt)).isDirectory(), 'an existing mount point is kept');
});

test.serial('a read-only volume mounts read-only and refuses mkfs', async (t) => {
  const { stateDir, mnt } = await scratch(t);
  const rw = new MemoryDevice({ size: 32 * MiB });
  const vol = await mountVolume(rw, mnt, { mkfs: 'ext4', stateDir });
  unmountAtEnd(t, vol);
  await writeFile(join(mnt, 'kept.txt'), 'kept');
  await unmountVolume(vol);

  const ro = new MemoryDevice({ size: rw.size, readOnly: true });
  rw.data.copy(ro.data);
  await t.throwsAsync(mountVolume(ro, mnt, { mkfs: 'ext4', stateDir }), {
    message: 'cannot make a filesystem on a read-only volume',
  });
  const rov = await mountVolume(ro, mnt, { stateDir });
  unmountAtEnd(t, rov);
  t.true((await readAttachmentRecords(stateDir)).records[0]?.readOnly);
  t.is(await readFile(join(mnt, 'kept.txt'), 'utf8'), 'kept');
  await t.throwsAsync(writeFile(join(mnt, 'new.txt'), 'x'), { code: 'EROFS' });
  const m = (await listMounts()).find((e) => e.mountpoint === rov.mountpoint);
  t.is(m?.source, rov.loopDevice);
  await unmountVolume(rov);
  await assertGone(t, rov);
  t.is(ro.calls.filter((c) => c.op !== 'read').length, 0, 'nothing but reads reached the read-only device');
});

test.serial('a failed mount undoes the loop device, the FUSE mount and the record', async (t) => {
  const { stateDir, mnt } = await scratch(t);
  // All zeroes: there is no filesystem to mount.
  const dev = new MemoryDevice({ size: 16 * MiB });
  const err = await t.throwsAsync(mountVolume(dev, mnt, { stateDir }));
  // mount(8) failed, and blkid found nothing there: the error says so (and suggests --mkfs in the CLI).
  t.true(err instanceof NoFilesystemError, String(err));
  t.true(err?.cause instanceof CommandError, String(err?.cause));
  t.regex((err?.cause as Error | undefined)?.message ?? '', /^mount .* failed/);
  t.deepEqual((await readAttachmentRecords(stateDir)).records, []);
  t.deepEqual(await mountsUnder(join(stateDir, '..')), []);
  t.deepEqual(await loopsUnder(stateDir), []);
  t.deepEqual(await readdir(stateDir).then((names) => names.filter((n) => n.startsWith('fuse-'))), []);
  await t.throwsAsync(stat(mnt), { code: 'ENOENT' });
});

test.serial('a busy filesystem is not unmounted without force, and nothing below it is touched', async (t) => {
  const { stateDir, mnt } = await scratch(t);
  const dev = new MemoryDevice({ size: 32 * MiB });
  const vol = await mountVolume(dev, mnt, { mkfs: 'ext4', stateDir });
  unmountAtEnd(t, vol);
  const fh = await open(join(mnt, 'open.txt'), 'w');
  try {
    await fh.write('busy');
    const err = await t.throwsAsync(unmountVolume(vol));
    t.regex(err?.message ?? '', /busy/i);
    t.true((await listMounts()).some((m) => m.mountpoint === vol.mountpoint), 'still mounted');
    t.is(await loopBackingFile(vol.loopDevice), vol.file, 'loop device still attached');
    t.is((await readAttachmentRecords(stateDir)).records.length, 1, 'record kept');
  } finally {
    await fh.close();
  }
  await unmountVolume(vol);
  await assertGone(t, vol);
});
