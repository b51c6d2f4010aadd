// ext4 on an rblk volume survives the target dying mid-workload: rblk mount
// --mkfs ext4 against a real rblkd, a file workload with fsync, kill -9 of
// rblkd in the middle, restart on the same config; the initiator reconnects,
// the workload completes, every file reads back after a remount, and e2fsck
// finds the filesystem clean.
import test from 'ava';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { readAttachmentRecords } from '../../initiator/fuse/attachment-record.js';
import { cleanupStaleAttachment } from '../../initiator/fuse/index.js';
import { baseConfig, spawnDaemon, workdir } from '../daemon/helpers/daemon-process.js';
import { pattern, rblk } from './helpers/cli.js';

const run = promisify(execFile);
const FILES = 40;
const FILE_SIZE = 256 * 1024;

test('ext4 on rblk: kill -9 the target mid-workload, restart it, the workload completes and fsck is clean', async (t) => {
  t.timeout(120_000);
  const w = workdir(t);
  const image = join(w.dir, 'fs.img');
  const state = join(w.dir, 'run');
  const mnt = join(w.dir, 'mnt');
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
  });

  // First start on a free port, then pin that port so the restart reuses it.
  w.writeConfig(baseConfig(w, [{ name: 'fs', path: image, size: '64MiB' }], { limits: { max_io: '128KiB', queue_depth: 16, keepalive_ms: 1000 } }));
  const first = spawnDaemon(t, ['--config', w.configPath]);
  const port = await first.port();
  const cfg = baseConfig(w, [{ name: 'fs', path: image, size: '64MiB' }], { limits: { max_io: '128KiB', queue_depth: 16, keepalive_ms: 1000 } });
  (cfg.listeners as { port: number }[])[0].port = port;
  w.writeConfig(cfg);

  const url = `rblk://127.0.0.1:${port}/fs?provider=tcp`;
  const m = await rblk(['mount', url, mnt, '--mkfs', 'ext4', '--yes', '--state-dir', state]);
  t.is(m.code, 0, m.stderr);

  let written = 0;
  const workload = (async () => {
    for (let i = 0; i < FILES; i++) {
      const fh = await open(join(mnt, `f${i}.bin`), 'w');
      await fh.write(pattern(FILE_SIZE, i + 1));
      await fh.sync();
      await fh.close();
      written++;
    }
  })();
  while (written < FILES / 4) await new Promise((r) => setTimeout(r, 20));
  first.kill('SIGKILL');
  const gone = await first.exited;
  t.is(gone.signal, 'SIGKILL');
  t.log(`killed rblkd after ${written} files`);
  await new Promise((r) => setTimeout(r, 300));
  const second = spawnDaemon(t, ['--config', w.configPath]);
  t.is(await second.port(), port);
  await workload;
  t.is(written, FILES, 'the workload completed after the restart');

  const u1 = await rblk(['umount', mnt, '--state-dir', state]);
  t.is(u1.code, 0, u1.stderr);
  const m2 = await rblk(['mount', url, mnt, '--state-dir', state]);
  t.is(m2.code, 0, m2.stderr);
  for (let i = 0; i < FILES; i++) t.true((await readFile(join(mnt, `f${i}.bin`))).equals(pattern(FILE_SIZE, i + 1)), `f${i}.bin intact`);
  const u2 = await rblk(['umount', mnt, '--state-dir', state]);
  t.is(u2.code, 0, u2.stderr);

  // The volume's backing file is the ext4 image itself.
  second.kill('SIGTERM');
  t.is((await second.exited).code, 0);
  t.true(existsSync(image));
  const fsck = await run('e2fsck', ['-fn', image]).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
  );
  t.is(fsck.code, 0, fsck.out);
});
