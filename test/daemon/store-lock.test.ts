// One daemon per store (docs/backends.md "One daemon per store"): a second real
// rblkd on the file another one serves is refused, naming the file and the
// first one's pid; a reload that opens the same file again under another name
// keeps the lock (and does not lock itself out); gateways that declare the
// store shared (alua) both serve it, as before; the lock goes with the process.
import test from 'ava';
import { join } from 'node:path';
import { baseConfig, spawnDaemon, workdir, type Workdir } from './helpers/daemon-process.js';

const SIZE = 4 * 1024 * 1024;

/** Whether a daemon that should be refused came up instead (then it is stopped), or exited. */
async function cameUp(d: ReturnType<typeof spawnDaemon>): Promise<boolean> {
  const ready = d.waitForLine(/rblkd ready/).then(
    () => true,
    () => false,
  );
  const up = await Promise.race([ready, d.exited.then(() => false)]);
  if (up) {
    d.kill('SIGTERM');
    await d.exited;
  }
  return up;
}

function configure(w: Workdir, file: string, name = 'vol', extra: Record<string, unknown> = {}): void {
  w.writeConfig(baseConfig(w, [{ name, path: file, size: SIZE, uuid: '0e6d8f2a-3c1b-4a5d-8e7f-9a0b1c2d3e4f' }], extra));
}

test('a second rblkd on a served file is refused, naming the file and the holder; a reload that reopens it keeps the lock', async (t) => {
  const a = workdir(t);
  const file = join(a.dir, 'shared.img');
  configure(a, file);
  const first = spawnDaemon(t, ['--config', a.configPath]);
  await first.waitForLine(/rblkd ready/);

  const b = workdir(t);
  configure(b, file);
  const second = spawnDaemon(t, ['--config', b.configPath]);
  t.false(await cameUp(second), 'a second rblkd served the file the first one serves');
  const exit = await second.exited;
  t.not(exit.code, 0);
  t.not(exit.code, null);
  const refusal = second.lines.find((l) => l.includes(`file ${file} is in use`));
  t.truthy(refusal, second.lines.join('\n'));
  t.regex(refusal!, new RegExp(`process ${first.child.pid} holds its lock`));

  // The same file under a new name in one reload: opened before the old volume closes.
  configure(a, file, 'renamed');
  const mark = first.lines.length;
  first.kill('SIGHUP');
  await first.waitForLine(/info: reloaded \(added renamed; removed vol\)/, mark);
  await first.waitForLine(/info: volume vol closed/, mark);
  // Closing the old volume did not release the lock the new one holds.
  const third = spawnDaemon(t, ['--config', b.configPath]);
  t.false(await cameUp(third));
  t.true(third.lines.some((l) => l.includes(`file ${file} is in use`)), third.lines.join('\n'));

  // The lock ends with the process: kill -9, and the file can be served again.
  first.kill('SIGKILL');
  await first.exited;
  const fourth = spawnDaemon(t, ['--config', b.configPath]);
  await fourth.waitForLine(/rblkd ready/);
  fourth.kill('SIGTERM');
  t.is((await fourth.exited).code, 0);
});

test('gateways that declare the store shared (alua) both serve it', async (t) => {
  const a = workdir(t);
  const file = join(a.dir, 'shared.img');
  configure(a, file, 'vol', { alua: { group: 1, peers: [{ group: 2 }] } });
  const first = spawnDaemon(t, ['--config', a.configPath]);
  await first.waitForLine(/rblkd ready/);
  const b = workdir(t);
  configure(b, file, 'vol', { alua: { group: 2, peers: [{ group: 1 }] } });
  const second = spawnDaemon(t, ['--config', b.configPath]);
  await second.waitForLine(/rblkd ready/);
  t.false(second.lines.some((l) => l.includes('is in use')));
});

test('read-only volumes share a file; a writer is refused while one serves it', async (t) => {
  const a = workdir(t);
  const file = join(a.dir, 'ro.img');
  // The first daemon creates the file, then serves it read-only after a restart.
  configure(a, file);
  const maker = spawnDaemon(t, ['--config', a.configPath]);
  await maker.waitForLine(/rblkd ready/);
  maker.kill('SIGTERM');
  await maker.exited;
  a.writeConfig(baseConfig(a, [{ name: 'vol', path: file, read_only: true }]));
  const r1 = spawnDaemon(t, ['--config', a.configPath]);
  await r1.waitForLine(/rblkd ready/);
  const b = workdir(t);
  b.writeConfig(baseConfig(b, [{ name: 'vol', path: file, read_only: true }]));
  const r2 = spawnDaemon(t, ['--config', b.configPath]);
  await r2.waitForLine(/rblkd ready/);
  const c = workdir(t);
  configure(c, file);
  const writer = spawnDaemon(t, ['--config', c.configPath]);
  t.false(await cameUp(writer));
  t.true(writer.lines.some((l) => l.includes(`file ${file} is in use`)), writer.lines.join('\n'));
});
