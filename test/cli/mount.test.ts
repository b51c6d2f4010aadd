// mount --mkfs ext4 → files → umount → mount again: the files are there;
// list shows the mount only while it exists; attach --fuse and detach. Runs
// where FUSE, loop devices and mkfs.ext4 are available (as root).
import test, { type ExecutionContext } from 'ava';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readAttachmentRecords, type AttachmentRecord } from '../../initiator/fuse/attachment-record.js';
import { cleanupStaleAttachment } from '../../initiator/fuse/index.js';
import { isMountPoint } from '../../native/fuse.js';
import { pattern, rblk, startRblk, tempDir } from './helpers/cli.js';
import { startTargetProcess, stopAllTargets, type TargetProcess } from './helpers/target-process.js';

const MiB = 1 << 20;

function canMount(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root';
  if (!existsSync('/dev/fuse')) return 'no /dev/fuse';
  if (!existsSync('/dev/loop-control')) return 'no loop devices';
  if (!['/usr/sbin/mkfs.ext4', '/sbin/mkfs.ext4'].some((p) => existsSync(p))) return 'no mkfs.ext4';
  return undefined;
}
const skip = canMount();

let started: Promise<TargetProcess> | undefined;
const target = (): Promise<TargetProcess> =>
  (started ??= startTargetProcess(null, {
    provider: 'tcp',
    volumes: [
      { name: 'fs', lun: 0, size: 32 * MiB },
      { name: 'file', lun: 1, size: 2 * MiB },
      { name: 'blank', lun: 2, size: 8 * MiB },
    ],
  }));
test.after.always(stopAllTargets);

/** A state directory whose attachments are torn down when the test ends, whatever state it left them in. */
async function stateDir(t: ExecutionContext): Promise<string> {
  const dir = await tempDir(t, 'mount');
  const state = join(dir, 'state');
  t.teardown(async () => {
    const { records } = await readAttachmentRecords(state);
    for (const rec of records) {
      try {
        process.kill(rec.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await new Promise((r) => setTimeout(r, 200));
      await cleanupStaleAttachment(state, rec).catch((e: unknown) => t.log(`cleanup of ${rec.id}: ${String(e)}`));
    }
    if (!t.passed && existsSync(join(state, 'mount.log'))) t.log(await readFile(join(state, 'mount.log'), 'utf8'));
  });
  return state;
}

async function listJson(state: string): Promise<Array<AttachmentRecord & { state: string }>> {
  const r = await rblk(['list', '--state-dir', state, '--json']);
  if (r.code !== 0) throw new Error(`rblk list: ${r.stderr}`);
  return (JSON.parse(r.out) as { attachments: Array<AttachmentRecord & { state: string }> }).attachments;
}

function backingFile(loop: string): string | null {
  const p = `/sys/block/${loop.replace('/dev/', '')}/loop/backing_file`;
  return existsSync(p) ? p : null;
}

// Decided once, at load: where it cannot run the test is a skip, never a pass.
const mountTest = skip === undefined ? test : test.skip;

mountTest('mount --mkfs ext4, write files, umount, mount again: the files are intact', async (t) => {
  const tp = await target();
  const state = await stateDir(t);
  const mnt = join(state, '..', 'mnt');

  const m1 = await rblk(['mount', tp.url('fs'), mnt, '--mkfs', 'ext4', '--yes', '--state-dir', state]);
  t.is(m1.code, 0, m1.stderr);
  t.regex(m1.out, new RegExp(`^mounted fs \\(32 MiB\\) on ${mnt.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(ext4 on /dev/loop\\d+\\), served by pid \\d+\\n$`));
  t.true(await isMountPoint(mnt));

  const listed = await listJson(state);
  t.is(listed.length, 1);
  t.like(listed[0], { kind: 'mount', mountpoint: mnt, fsType: 'ext4', state: 'active', size: 32 * MiB, label: tp.url('fs') });
  const loop = listed[0].loopDevice ?? '';
  t.regex(loop, /^\/dev\/loop\d+$/);
  const text = await rblk(['list', '--state-dir', state]);
  t.regex(text.out, new RegExp(`^ID\\s+KIND.*\\n${listed[0].id}\\s+mount\\s+${listed[0].pid}\\s+active\\s+32 MiB\\s+`));

  const blob = pattern(3 * MiB + 123, 5);
  await writeFile(join(mnt, 'hello.txt'), 'hello from rblk\n');
  await mkdir(join(mnt, 'sub'));
  await writeFile(join(mnt, 'sub', 'blob.bin'), blob);

  const u1 = await rblk(['umount', mnt, '--state-dir', state]);
  t.is(u1.code, 0, u1.stderr);
  t.is(u1.out, `unmounted ${mnt}\n`);
  t.false(await isMountPoint(mnt));
  t.false(existsSync(mnt), 'the mount point rblk created is removed again');
  t.is(backingFile(loop), null, 'the loop device is detached');
  t.is((await rblk(['list', '--state-dir', state])).out, 'no attachments\n');

  const m2 = await rblk(['mount', tp.url('fs'), mnt, '--state-dir', state]);
  t.is(m2.code, 0, m2.stderr);
  t.deepEqual((await readdir(mnt)).sort(), ['hello.txt', 'lost+found', 'sub']);
  t.is(await readFile(join(mnt, 'hello.txt'), 'utf8'), 'hello from rblk\n');
  t.true((await readFile(join(mnt, 'sub', 'blob.bin'))).equals(blob));

  const u2 = await rblk(['detach', mnt, '--state-dir', state]);
  t.is(u2.code, 0, u2.stderr);
  t.false(await isMountPoint(mnt));
  t.deepEqual((await readAttachmentRecords(state)).records, []);
});

mountTest('attach --fuse serves the volume as a file; detach ends it; unknown targets are an error', async (t) => {
  const tp = await target();
  const state = await stateDir(t);
  const dir = join(state, '..', 'fuse');
  await mkdir(dir);
  const data = pattern(2 * MiB, 6);
  t.is((await rblk(['write', tp.url('file')], { input: data })).code, 0);

  const att = await startRblk(t, ['attach', tp.url('file'), '--fuse', dir, '--state-dir', state], /attached .*\n/);
  t.is(att.match[0], `attached file (2 MiB) as ${join(dir, 'volume')}\n`);
  t.true((await readFile(join(dir, 'volume'))).equals(data));
  const listed = await listJson(state);
  t.like(listed[0], { kind: 'fuse', fuseDir: dir, file: join(dir, 'volume'), state: 'active', pid: att.child.pid });

  const missing = await rblk(['detach', join(state, 'nothing-here'), '--state-dir', state]);
  t.is(missing.code, 1);
  t.is(missing.stderr, `rblk: no rblk attachment at ${join(state, 'nothing-here')} (see rblk list)\n`);

  const exited = new Promise<number | null>((r) => att.child.once('exit', (code) => r(code)));
  const d = await rblk(['detach', dir, '--state-dir', state]);
  t.is(d.code, 0, d.stderr);
  t.is(d.out, `detached ${dir}\n`);
  t.is(await exited, 0);
  t.false(await isMountPoint(dir));
  t.deepEqual((await readAttachmentRecords(state)).records, []);
});

mountTest('mount of a volume without a filesystem says so and suggests --mkfs; nothing is left behind', async (t) => {
  const tp = await target();
  const state = await stateDir(t);
  const mnt = join(state, '..', 'blank-mnt');
  const r = await rblk(['mount', tp.url('blank'), mnt, '--state-dir', state]);
  t.is(r.code, 1);
  t.is(r.stderr, "rblk: cannot mount blank: it holds no filesystem (blkid finds none): make one with --mkfs ext4 --yes (this destroys the volume's data)\n");
  t.deepEqual((await readAttachmentRecords(state)).records, []);
  t.false(existsSync(mnt), 'the mount point it created is gone again');
});
