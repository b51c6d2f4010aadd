// The store lock of file and block-device backends (docs/backends.md "One
// daemon per store"), against another process that holds flock on the store
// (util-linux flock(1), as a second rblkd would): refused with EBUSY naming the
// store and the holder's pid; read-only opens share; backends of one process
// share the lock, which is released when the last of them closes; a shared
// store (alua) takes none.
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BlockDeviceBackend } from '../../target/backend/blockdev.js';
import { FileBackend } from '../../target/backend/file.js';
import { expectCode, tempDir } from './helpers.js';
import { attachLoop, run } from './loop-device.js';

const SIZE = 1 << 20;

/**
 * flock(1) holding `path` (exclusive, or shared) until it is killed or the test
 * ends; resolves once it holds it. -o: the command it runs does not inherit the
 * lock, so the flock process is the one holder; its process group is killed.
 */
async function holder(t: ExecutionContext, path: string, mode: '-x' | '-s'): Promise<{ pid: number; kill(): Promise<void> }> {
  const child = spawn('flock', ['-o', mode, path, '-c', 'echo locked; exec sleep 600'], { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async (): Promise<void> => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // Already gone.
    }
    await exited;
  };
  t.teardown(kill);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`flock exited with ${code}`)));
  });
  return { pid: child.pid!, kill };
}

/** Whether another process can take the lock now (flock -n exits 1 when it cannot). */
async function lockable(path: string): Promise<boolean> {
  try {
    await run('flock', ['-n', '-x', path, 'true']);
    return true;
  } catch {
    return false;
  }
}

test('file: a store another process holds is refused, naming the file and its pid; it opens once the holder is gone', async (t) => {
  const path = join(await tempDir(t), 'held.img');
  await writeFile(path, Buffer.alloc(SIZE));
  const h = await holder(t, path, '-x');
  const inUse = new RegExp(`^file ${path.replace(/[.]/g, '\\.')} is in use: process ${h.pid} holds its lock`);
  await expectCode(t, FileBackend.open({ path }), 'EBUSY', inUse);
  await expectCode(t, FileBackend.open({ path, readOnly: true }), 'EBUSY', inUse);
  // Gateways of a shared store take no lock.
  const shared = await FileBackend.open({ path, shared: true });
  await shared.close();
  await h.kill();
  const b = await FileBackend.open({ path });
  t.false(await lockable(path), 'the backend holds the lock now');
  await b.close();
  t.true(await lockable(path), 'close released it');
});

test('file: read-only backends share the store with other readers, not with a writer', async (t) => {
  const path = join(await tempDir(t), 'ro.img');
  await writeFile(path, Buffer.alloc(SIZE));
  await holder(t, path, '-s');
  const ro = await FileBackend.open({ path, readOnly: true });
  t.teardown(() => ro.close());
  await expectCode(t, FileBackend.open({ path }), 'EBUSY', /is in use: process \d+ holds its lock/);
});

test('file: backends of one process share the lock until the last one closes', async (t) => {
  const path = join(await tempDir(t), 'twice.img');
  await writeFile(path, Buffer.alloc(SIZE));
  const a = await FileBackend.open({ path });
  const b = await FileBackend.open({ path });
  await a.close();
  t.false(await lockable(path), 'the first backend closed, the second still holds the store');
  const buf = Buffer.alloc(4096, 7);
  await b.write(buf, 0);
  await b.close();
  t.true(await lockable(path), 'the last close released it');
});

test('blockdev: a device another process holds is refused, naming it and its pid; a read-only export shares a reader', async (t) => {
  const file = join(await tempDir(t), 'dev.img');
  await writeFile(file, Buffer.alloc(SIZE));
  // Like the other block-device tests, this needs losetup (root, or the disk group).
  const device = await attachLoop(t, file);
  const h = await holder(t, device, '-s');
  await expectCode(t, BlockDeviceBackend.open({ path: device }), 'EBUSY', new RegExp(`^block device ${device} is in use: process ${h.pid} holds its lock`));
  const ro = await BlockDeviceBackend.open({ path: device, readOnly: true });
  await ro.close();
  await h.kill();
  const rw = await BlockDeviceBackend.open({ path: device });
  t.false(await lockable(device));
  await rw.close();
  t.true(await lockable(device));
});
