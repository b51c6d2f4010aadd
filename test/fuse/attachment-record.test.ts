import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  isOwnerAlive,
  readAttachmentRecords,
  removeAttachmentRecord,
  writeAttachmentRecord,
  type AttachmentRecord,
} from '../../initiator/fuse/index.js';

function sample(id: string, createdAt: string): AttachmentRecord {
  return {
    id,
    kind: 'mount',
    pid: process.pid,
    createdAt,
    label: 'rblk://127.0.0.1/vol0',
    fuseDir: '/run/rblk/fuse-x',
    file: '/run/rblk/fuse-x/volume',
    size: 1 << 20,
    blockSize: 512,
    readOnly: false,
    loopDevice: '/dev/loop7',
    mountpoint: '/mnt/v',
    fsType: 'ext4',
    createdMountpoint: false,
  };
}

test('records round-trip, oldest first; bad files are reported, not thrown', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'rblk-state-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  t.deepEqual(await readAttachmentRecords(join(dir, 'missing')), { records: [], problems: [] });
  const b = sample('2-bbbb', '2026-01-02T00:00:00.000Z');
  const a = sample('1-aaaa', '2026-01-01T00:00:00.000Z');
  const path = await writeAttachmentRecord(dir, b);
  t.is(path, join(dir, 'attachments', '2-bbbb.json'));
  await writeAttachmentRecord(dir, a);
  await writeFile(join(dir, 'attachments', 'junk.json'), '{"id": 1}');
  await writeFile(join(dir, 'attachments', 'torn.json'), '{"id": "torn"');
  const { records, problems } = await readAttachmentRecords(dir);
  t.deepEqual(records, [a, b]);
  t.deepEqual(problems.map((p) => p.path).sort(), [join(dir, 'attachments', 'junk.json'), join(dir, 'attachments', 'torn.json')]);
  await removeAttachmentRecord(dir, a.id);
  await removeAttachmentRecord(dir, a.id);
  t.deepEqual((await readAttachmentRecords(dir)).records, [b]);
  await t.throwsAsync(writeAttachmentRecord(dir, sample('../evil', a.createdAt)), { message: 'invalid attachment id "../evil"' });
});

test('isOwnerAlive tells a running process from a gone one', (t) => {
  t.true(isOwnerAlive(sample('1-a', '')));
  // Above the kernel's pid_max limit (4194304): never a live process.
  t.false(isOwnerAlive({ ...sample('1-a', ''), pid: 4_194_305 }));
});
