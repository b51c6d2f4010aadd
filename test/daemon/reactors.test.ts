// rblkd with reactor threads (docs/target.md "Reactors", docs/operations.md
// "reactors"): the real daemon with `reactors: 2`, real libfabric endpoints
// on tcp and sockets, a real O_DIRECT file. Several sessions at once move
// data that is read back and compared; `rblkd ctl status` shows the threads
// and how many connections each serves; an initiator killed with -9 while
// its commands are on a reactor leaves nothing behind (the daemon's fds come
// back) and the next session works; SIGTERM drains and exits 0.
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { connect, type Session } from '../../initiator/index.js';
import { FastPath } from '../../native/fast-path.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import { diesWithParent } from '../../bench/parent-death.js';
import { baseConfig, ROOT, spawnDaemon, workdir, type DaemonProcess } from './helpers/daemon-process.js';

const TARGET = 'iqn.2026-12.io.rblk:reactors';
const MiB = 1 << 20;
const enabled = FastPath.available();
const reactorTest = enabled ? test.serial : test.serial.skip;

const fdsOf = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Served {
  d: DaemonProcess;
  ports: Record<'tcp' | 'sockets', number>;
  socket: string;
}

async function serve(t: ExecutionContext): Promise<Served> {
  const w = workdir(t);
  const socket = join(w.dir, 'rblkd.ctl');
  w.writeConfig(
    baseConfig(w, [{ name: 'vol', path: 'vol.img', size: '16MiB', lun: 0 }], {
      target_name: TARGET,
      reactors: 2,
      listeners: [
        { provider: 'tcp', address: '127.0.0.1', port: 0 },
        { provider: 'sockets', address: '127.0.0.1', port: 0 },
      ],
      limits: { queue_depth: 32 },
    }),
  );
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const ports = {
    tcp: Number((await d.waitForLine(/listening tcp 127\.0\.0\.1:(\d+)/))[1]),
    sockets: Number((await d.waitForLine(/listening sockets 127\.0\.0\.1:(\d+)/))[1]),
  };
  await d.waitForLine(/reactors: 2 threads serve the fast path's connections \(reactors: 2\)/);
  await d.waitForLine(/rblkd ready/);
  return { d, ports, socket };
}

const session = (port: number, provider: string, name: string): Promise<Session> =>
  connect({ address: '127.0.0.1', port, provider, initiatorName: `iqn.2026-12.io.rblk:${name}`, targetName: TARGET, busyRetries: 0 });

async function reactorLoad(socket: string): Promise<number[]> {
  const s = (await controlRequest(socket, 'status')) as { reactors: { setting: unknown; threads: number[] } };
  return s.reactors.threads;
}

/** Polls until the daemon serves no connection on any reactor, bounded. */
async function reactorsIdle(socket: string): Promise<number[]> {
  let load = await reactorLoad(socket);
  for (let i = 0; i < 100 && load.some((n) => n > 0); i++) {
    await sleep(50);
    load = await reactorLoad(socket);
  }
  return load;
}

reactorTest('rblkd reactors: 2: four sessions on tcp and sockets, served by both threads, write and read back the same bytes; the fds come back', async (t) => {
  const { d, ports, socket } = await serve(t);
  // The baseline after one session, so that what the fabric opens once per provider is in it.
  for (const provider of ['tcp', 'sockets'] as const) {
    const s0 = await session(ports[provider], provider, `warm-${provider}`);
    await (await s0.open('vol')).write(0, Buffer.alloc(4096, 1));
    await s0.close();
  }
  t.deepEqual(await reactorsIdle(socket), [0, 0]);
  const base = fdsOf(d.child.pid!);

  const sessions: Session[] = [];
  for (const [i, provider] of (['tcp', 'sockets', 'tcp', 'sockets'] as const).entries()) sessions.push(await session(ports[provider], provider, `s${i}`));
  try {
    // Each connection went to the least loaded thread: two each.
    t.deepEqual(await reactorLoad(socket), [2, 2]);
    await Promise.all(
      sessions.map(async (s, i) => {
        const v = await s.open('vol');
        const region = 4 * MiB * i;
        const ops: Promise<void>[] = [];
        const sent: Buffer[] = [];
        for (let k = 0; k < 64; k++) {
          const data = Buffer.alloc(k % 4 === 0 ? 64 * 1024 : 4096, (i * 64 + k) & 0xff);
          for (let j = 0; j < data.length; j += 512) data[j] = k;
          sent.push(data);
          ops.push(v.write(region + k * 64 * 1024, data, { fua: k % 3 === 0 }));
        }
        await Promise.all(ops);
        const back = await Promise.all(sent.map((data, k) => v.read(region + k * 64 * 1024, data.length)));
        for (const [k, b] of back.entries()) t.true(b.equals(sent[k]), `session ${i}, write ${k} read back different bytes`);
      }),
    );
  } finally {
    for (const s of sessions) await s.close();
  }
  t.deepEqual(await reactorsIdle(socket), [0, 0]);
  let fds = fdsOf(d.child.pid!);
  for (let i = 0; i < 100 && fds > base; i++) {
    await sleep(50);
    fds = fdsOf(d.child.pid!);
  }
  t.true(fds <= base, `rblkd holds ${fds} fds, ${base} before the sessions`);
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});

reactorTest('rblkd reactors: 2: an initiator killed with -9 while 32 commands run on a reactor: rblkd lives, its fds come back, and the next session reads what it wrote', async (t) => {
  const { d, ports, socket } = await serve(t);
  {
    const s0 = await session(ports.tcp, 'tcp', 'warm');
    await (await s0.open('vol')).write(0, Buffer.alloc(4096, 1));
    await s0.close();
  }
  t.deepEqual(await reactorsIdle(socket), [0, 0]);
  const base = fdsOf(d.child.pid!);
  for (let round = 0; round < 3; round++) {
    const [cmd, ...args] = diesWithParent([process.execPath, '--import=tsx', join(ROOT, 'test', 'daemon', 'helpers', 'rbd-io-peer.ts'), String(ports.tcp), TARGET]);
    const peer = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    t.teardown(() => void peer.kill('SIGKILL'));
    const exited = new Promise((r) => peer.once('exit', r));
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: peer.stdout }).on('line', (l) => l === 'busy' && resolve());
      peer.once('exit', (code) => reject(new Error(`the peer exited (${code}) before it was busy`)));
    });
    t.is((await reactorLoad(socket)).reduce((a, b) => a + b, 0), 1, 'the peer\'s connection is on a reactor');
    await sleep(100 + 100 * round);
    peer.kill('SIGKILL');
    await exited;
    t.deepEqual(await reactorsIdle(socket), [0, 0], 'the dead connection left its reactor');
  }
  let fds = fdsOf(d.child.pid!);
  for (let i = 0; i < 100 && fds > base; i++) {
    await sleep(50);
    fds = fdsOf(d.child.pid!);
  }
  t.true(fds <= base, `rblkd holds ${fds} fds, ${base} before the killed initiators`);

  const s = await session(ports.sockets, 'sockets', 'after');
  try {
    const v = await s.open('vol');
    const data = Buffer.alloc(128 * 1024, 0x6b);
    await v.write(MiB, data, { fua: true });
    t.true((await v.read(MiB, data.length)).equals(data));
  } finally {
    await s.close();
  }
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});
