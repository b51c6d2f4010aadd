// attach serves a volume over NBD until SIGTERM: nbdinfo sees it, nbdcopy
// reads and writes the same bytes as rblk read/write, and on SIGTERM the
// socket goes away and the exit status is 0.
import test from 'ava';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pattern, rblk, startRblk, tempDir } from './helpers/cli.js';
import { startTargetProcess, stopAllTargets, type TargetProcess } from './helpers/target-process.js';

const exec = promisify(execFile);
const MiB = 1 << 20;
const SIZE = 8 * MiB;

let started: Promise<TargetProcess> | undefined;
const target = (): Promise<TargetProcess> =>
  (started ??= startTargetProcess(null, {
    provider: 'tcp',
    volumes: [
      { name: 'exported', lun: 0, size: SIZE },
      { name: 'byport', lun: 1, size: 1 * MiB, blockSize: 4096 },
    ],
  }));
test.after.always(stopAllTargets);

function haveTool(name: string): boolean {
  return ['/usr/bin', '/usr/local/bin', '/bin'].some((d) => existsSync(join(d, name)));
}

// Without libnbd-bin's nbdinfo/nbdcopy these tests are skips, never passes.
(haveTool('nbdinfo') && haveTool('nbdcopy') ? test : test.skip)('attach --nbd-socket: nbdinfo and nbdcopy against it, then SIGTERM removes the socket', async (t) => {
  const tp = await target();
  const dir = await tempDir(t, 'attach');
  const data = pattern(SIZE, 9);
  const w = await rblk(['write', tp.url('exported')], { input: data });
  t.is(w.code, 0, w.stderr);

  const socket = join(dir, 'nbd.sock');
  const att = await startRblk(t, ['attach', tp.url('exported'), '--nbd-socket', socket], /serving .*\n/);
  t.is(att.match[0], `serving exported (8 MiB) at nbd+unix:///exported?socket=${socket}\n`);
  const uri = `nbd+unix:///exported?socket=${socket}`;

  const info = await exec('nbdinfo', ['--size', uri]);
  t.is(info.stdout.trim(), String(SIZE));

  const out = join(dir, 'out.img');
  await exec('nbdcopy', [uri, out]);
  t.true((await readFile(out)).equals(data), 'nbdcopy read the bytes rblk wrote');

  // And the other way: what nbdcopy writes, rblk reads.
  const second = pattern(SIZE, 10);
  const src = join(dir, 'src.img');
  await writeFile(src, second);
  await exec('nbdcopy', ['--flush', src, uri]);
  const back = await rblk(['read', tp.url('exported')]);
  t.is(back.code, 0, back.stderr);
  t.true(back.stdout.equals(second), 'rblk read the bytes nbdcopy wrote');

  t.true(existsSync(socket));
  const exited = once(att.child, 'exit');
  att.child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  t.is(code, 0, att.output().err);
  t.regex(att.output().out, /detached exported\n$/);
  t.false(existsSync(socket), 'the socket is gone');
});

(haveTool('nbdinfo') ? test : test.skip)('attach --nbd-port 0 serves on 127.0.0.1 and SIGINT detaches', async (t) => {
  const tp = await target();
  const att = await startRblk(t, ['attach', tp.url('byport'), '--nbd-port', '0'], /serving byport \(1 MiB\) at (nbd:\/\/127\.0\.0\.1:\d+\/byport)\n/);
  const uri = att.match[1];
  const info = await exec('nbdinfo', ['--json', uri]);
  const doc = JSON.parse(info.stdout) as { exports: Array<{ 'export-size': number; 'block_size_minimum'?: number }> };
  t.is(doc.exports[0]['export-size'], MiB);
  const exited = once(att.child, 'exit');
  att.child.kill('SIGINT');
  const [code] = (await exited) as [number | null];
  t.is(code, 0, att.output().err);
});

/** A unix socket file nobody listens on: its server was killed before it could remove it. */
async function staleSocket(path: string): Promise<void> {
  const child = spawn(process.execPath, ['-e', "require('net').createServer().listen(process.argv[1], () => console.log('up'))", path], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(child.stdout, 'data');
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

test('a regular file at the socket path is left alone', async (t) => {
  const tp = await target();
  const dir = await tempDir(t, 'attach');
  const file = join(dir, 'precious.txt');
  await writeFile(file, 'keep me');
  const r = await rblk(['attach', tp.url('exported'), '--nbd-socket', file]);
  t.is(r.code, 1);
  t.is(r.stderr, `rblk: ${file} exists and is not a socket\n`);
  t.is(await readFile(file, 'utf8'), 'keep me');
});

test('a second attach on a live socket is refused; a stale socket file is replaced', async (t) => {
  const tp = await target();
  const dir = await tempDir(t, 'attach');
  const socket = join(dir, 'stale.sock');
  await staleSocket(socket);
  t.true(existsSync(socket));
  const first = await startRblk(t, ['attach', tp.url('exported'), '--nbd-socket', socket], /serving .*\n/);
  const second = await rblk(['attach', tp.url('exported'), '--nbd-socket', socket]);
  t.is(second.code, 1);
  t.is(second.stderr, `rblk: ${socket} is in use: another process serves NBD on it (pass --nbd-socket PATH for another)\n`);
  const exited = once(first.child, 'exit');
  first.child.kill('SIGTERM');
  t.deepEqual(await exited, [0, null]);
});
