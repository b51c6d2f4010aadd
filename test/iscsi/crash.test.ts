// kill -9 of rblkd under a stock iSCSI initiator's FUA writes (docs/iscsi.md):
// qemu-io, through qemu's libiscsi driver, writes every 4 KiB block of the
// volume six times over with FUA, one write at a time; rblkd is killed with
// -9 twice mid-stream and started again on the same port each time. libiscsi
// logs in again by itself and sends the interrupted command again, so the run
// ends with every write acknowledged, and the volume then holds the last
// write of every block: in the file itself, and read back through the
// listener by another stock client (qemu-img convert).
import test from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { hasCommand } from '../../bench/peers/children.js';
import { baseConfig, spawnDaemon, workdir, type DaemonProcess } from '../daemon/helpers/daemon-process.js';

const BS = 4096;
const BLOCKS = 1024;
const PASSES = 6;
const WRITES = BLOCKS * PASSES;
const IQN = 'iqn.2026-11.io.rblk:target';
/** The byte write i fills its block with (qemu-io -P): differs between the passes over one block. */
const fill = (i: number): number => (i % 251) + 1;
/** A block watched to time the kills, and the writes of it after which each kill comes. */
const WATCH = 100;
const KILL_AFTER = [WATCH, WATCH + 3 * BLOCKS];

const haveQemu = hasCommand('qemu-io') && hasCommand('qemu-img');

if (!haveQemu) test.skip('iSCSI kill -9: qemu-io and qemu-img (qemu-utils) are not installed', () => undefined);
(haveQemu ? test : test.skip)('iSCSI: kill -9 twice under qemu-io\'s FUA writes, restarts on the same port: libiscsi rides through, every write is acknowledged and in the volume', async (t) => {
  t.timeout(180_000);
  const w = workdir(t);
  const config = (port: number): Record<string, unknown> =>
    baseConfig(w, [{ name: 'a', path: 'a.img', size: `${(BLOCKS * BS) >> 20}MiB`, lun: 0 }], { listeners: [{ protocol: 'iscsi', address: '127.0.0.1', port }] });
  w.writeConfig(config(0));
  let d: DaemonProcess = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.iscsiPort();
  await d.waitForLine(/rblkd ready/);
  w.writeConfig(config(port));
  const url = `iscsi://127.0.0.1:${port}/${IQN}/0`;

  const qemu = spawn('qemu-io', ['-f', 'raw', url], { stdio: ['pipe', 'pipe', 'pipe'] });
  t.teardown(() => qemu.kill('SIGKILL'));
  let out = '';
  let err = '';
  qemu.stdout.on('data', (b: Buffer) => (out += b.toString()));
  qemu.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<number | null>((r) => qemu.on('close', (code) => r(code)));
  const commands: string[] = [];
  for (let i = 0; i < WRITES; i++) commands.push(`write -f -P ${fill(i)} ${(i % BLOCKS) * BS} ${BS}`);
  qemu.stdin.end(commands.join('\n') + '\nquit\n');

  // Each kill waits until the watched block holds the given write: the writes are sequential, so all before it are done.
  const file = join(w.state, 'a.img');
  const watched = Buffer.alloc(BS);
  const kills: { running: boolean }[] = [];
  for (const after of KILL_AFTER) {
    for (;;) {
      const fd = openSync(file, 'r');
      try {
        readSync(fd, watched, 0, BS, WATCH * BS);
      } finally {
        closeSync(fd);
      }
      if (watched[0] === fill(after) && watched[BS - 1] === fill(after)) break;
      if (qemu.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    kills.push({ running: qemu.exitCode === null });
    d.kill('SIGKILL');
    t.deepEqual(await d.exited, { code: null, signal: 'SIGKILL' });
    d = spawnDaemon(t, ['--config', w.configPath]);
    await d.waitForLine(/rblkd ready/);
  }
  const code = await exited;
  t.log(`qemu-io's stderr: ${err.trim().split('\n').slice(0, 6).join(' | ') || '(empty)'}`);
  t.deepEqual(kills, KILL_AFTER.map(() => ({ running: true })), 'both kills came while qemu-io was writing (the checks below check something)');
  t.is(code, 0, err);
  t.is(out.match(/wrote 4096\/4096 bytes at offset \d+$/gm)?.length ?? 0, WRITES, 'every write was acknowledged');

  // The last pass wrote every block last.
  const expected = Buffer.alloc(BLOCKS * BS);
  for (let b = 0; b < BLOCKS; b++) expected.fill(fill((PASSES - 1) * BLOCKS + b), b * BS, (b + 1) * BS);
  const wrong = (got: Buffer): number[] => {
    const bad: number[] = [];
    for (let b = 0; b < BLOCKS; b++) if (!got.subarray(b * BS, (b + 1) * BS).equals(expected.subarray(b * BS, (b + 1) * BS))) bad.push(b);
    return bad;
  };
  t.deepEqual(wrong(readFileSync(file)), [], 'blocks of the file without their last acknowledged write');
  const copy = join(w.dir, 'copy.img');
  const convert = spawnSync('qemu-img', ['convert', '-f', 'raw', '-O', 'raw', url, copy], { encoding: 'utf8', timeout: 60_000 });
  t.is(convert.status, 0, convert.stderr);
  t.deepEqual(wrong(readFileSync(copy)), [], 'blocks read back through the listener (qemu-img) without their last acknowledged write');
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});
