// The NBD export over a real rblk Volume (in-process target on libfabric's tcp
// provider) while the target's connection is lost: every write the client is
// told is done must be on the target's medium, byte for byte, and every read
// must return the right bytes or an error — never an acknowledged empty write
// or a reply sent from memory its connection released (docs/nbd.md "Memory").
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { connect, type Session } from '../../initiator/index.js';
import type { Volume } from '../../initiator/volume.js';
import { startRblk } from '../cli/helpers/cli.js';
import { baseConfig, spawnDaemon, workdir } from '../daemon/helpers/daemon-process.js';
import { GatedBackend } from '../initiator/helpers/gated-backend.js';
import { pattern, startServer, until as within, type TestTarget } from '../initiator/helpers/target.js';
import { requireTool, run, serve } from './helpers/harness.js';
import { E, RawClient } from './helpers/raw-client.js';

const MiB = 1 << 20;
const SIZE = 8 * MiB;

interface Rig {
  backend: GatedBackend;
  session: Session;
  volume: Volume;
  /** The target currently listening (replaced by restart()). */
  target(): TestTarget;
  /** Closes the target (every connection is lost) and starts it again on the same port and backend. */
  restart(between?: () => void | Promise<void>): Promise<void>;
}

/** The old listener's port can stay busy for a moment after close (connections still being torn down). */
async function listenAgain(spec: Parameters<typeof startServer>[1], port: number): Promise<TestTarget> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await startServer('tcp', spec, { port });
    } catch (e) {
      if ((e as { code?: string }).code !== 'FI_EADDRINUSE' || attempt >= 100) throw e;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

async function rig(t: ExecutionContext): Promise<Rig> {
  const backend = new GatedBackend(SIZE, { name: 'vol0' });
  const identifier = randomUUID();
  const spec = [{ name: 'vol0', lun: 0, backend, identifier, blockSize: 4096 as const }];
  let current = await startServer('tcp', spec);
  const port = current.port;
  const session = await connect(current.options({ timeouts: { lossMs: 20_000 }, reconnect: { initialDelayMs: 10, maxDelayMs: 50 } }));
  t.teardown(async () => {
    await session.close();
    await current.close();
  });
  const volume = await session.open('vol0');
  return {
    backend,
    session,
    volume,
    target: () => current,
    async restart(between) {
      // The target logs the session out at once but finishes closing only when
      // its commands have settled: what is held in the backend is let go in between.
      const closing = current.close();
      await within(() => session.state !== 'connected', 'the session to see the target go');
      await between?.();
      await closing;
      current = await listenAgain(spec, port);
    },
  };
}

test.serial('a write whose connection is lost while the target holds it is written again with its own bytes, or fails', async (t) => {
  const r = await rig(t);
  // The export's buffers are the session's registered memory (BlockDevice.allocate), which outlives the connection.
  let lent = 0;
  const allocate = r.volume.allocate.bind(r.volume);
  r.volume.allocate = (n: number) => (lent++, allocate(n));
  const { address } = await serve(t, new Map([['vol0', r.volume]]), { unix: true });
  const client = await RawClient.open(address, 'vol0', { structured: true });
  t.teardown(() => client.destroy());

  // Warm the export's buffers with a write and a read of the same size.
  const size = 128 * 1024;
  t.is((await client.write(0, pattern(size, 1))).error, 0);
  t.true((await client.read(0, size)).data.equals(pattern(size, 1)));
  t.true(lent >= 1, 'the export took its buffers from the session');

  // The next write reaches the backend and is held there; the target then goes
  // away and the held write fails, so only a re-send can put the bytes down.
  const gate = r.backend.hold('write');
  const data = pattern(size, 2);
  const pending = client.write(MiB, data);
  await gate.reached;
  await r.restart(() => {
    r.backend.fail('write', 'EIO');
    gate.release();
  });
  r.backend.heal('write');
  const reply = await pending;
  const stored = Buffer.alloc(size);
  await r.backend.inner.read(stored, MiB);
  if (reply.error === 0) t.true(stored.equals(data), 'the write was acknowledged but the target does not hold its bytes');
  else t.is(reply.error, E.EIO);
  // Whatever the client was told, the export and the session are still usable.
  await within(() => r.session.state === 'connected', 'the session to reconnect');
  t.is((await client.write(2 * MiB, data)).error, 0);
  await r.backend.inner.read(stored, 2 * MiB);
  t.true(stored.equals(data), 'a write after the reconnect');
  t.true((await client.read(2 * MiB, size)).data.equals(data), 'a read after the reconnect');
});

test.serial('a read whose connection is lost while the target holds it returns the right bytes', async (t) => {
  const r = await rig(t);
  const { address } = await serve(t, new Map([['vol0', r.volume]]), { unix: true });
  const client = await RawClient.open(address, 'vol0', { structured: true });
  t.teardown(() => client.destroy());
  const size = 128 * 1024;
  const data = pattern(size, 3);
  t.is((await client.write(3 * MiB, data)).error, 0);
  t.true((await client.read(3 * MiB, size)).data.equals(data));

  const gate = r.backend.hold('read');
  const pending = client.read(3 * MiB, size);
  await gate.reached;
  await r.restart(() => gate.release());
  const reply = await pending;
  t.is(reply.error, 0);
  t.true(reply.data.equals(data), 'the read returned other bytes');
});

// fio is a child of this process: it would inherit the fds of an in-process
// target's listener and keep its port bound, so the target and the export are
// processes of their own here, as in production (rblkd, rblk attach).
test.serial('fio randwrite 4k with crc32c verify through rblk attach while rblkd is killed and restarted: nothing acknowledged is lost', async (t) => {
  t.timeout(120_000);
  requireTool('fio', 'fio');
  const w = workdir(t);
  const volumes = [{ name: 'disk', path: join(w.dir, 'disk.img'), size: '16MiB', block_size: 4096 }];
  const limits = { limits: { max_io: '128KiB', queue_depth: 16, drain_timeout_ms: 2000 } };
  w.writeConfig(baseConfig(w, volumes, limits));
  let daemon = spawnDaemon(t, ['--config', w.configPath]);
  const port = await daemon.port();
  const cfg = baseConfig(w, volumes, limits);
  (cfg.listeners as { port: number }[])[0].port = port;
  w.writeConfig(cfg);

  const socket = join(w.dir, 'nbd.sock');
  const attach = await startRblk(t, ['attach', `rblk://127.0.0.1:${port}/disk?provider=tcp`, '--nbd-socket', socket], /serving .*\n/);
  const fio = run(t, 'fio', [
    '--name=restarts',
    '--ioengine=nbd',
    `--uri=nbd+unix:///disk?socket=${socket}`,
    '--rw=randwrite',
    '--bs=4k',
    '--iodepth=16',
    '--size=6m',
    '--verify=crc32c',
    '--do_verify=1',
    '--verify_fatal=1',
    '--verify_state_save=0',
  ]);
  let finished = false;
  void fio.then(
    () => (finished = true),
    () => (finished = true),
  );

  // A restart each time the export has taken in another 1 MiB from fio, so
  // every one lands under load whatever the machine's speed: first SIGKILL,
  // then SIGTERM (a drain).
  let restarts = 0;
  while (restarts < 2 && !finished) {
    const start = received(attach.child.pid);
    while (!finished && received(attach.child.pid) - start < MiB) await new Promise((r) => setTimeout(r, 5));
    if (finished) break;
    const signal = restarts % 2 === 0 ? 'SIGKILL' : 'SIGTERM';
    daemon.kill(signal);
    await daemon.exited;
    daemon = spawnDaemon(t, ['--config', w.configPath]);
    t.is(await daemon.port(), port);
    restarts++;
  }
  const result = await fio;
  t.log(`${restarts} restarts of rblkd under fio`);
  t.is(restarts, 2, 'fio finished before rblkd could be killed and drained under it');
  t.is(result.code, 0, `fio failed (a verify error is a block it was told was written that is not there):\n${result.stderr}${result.stdout.slice(-3000)}`);
});

/** Bytes a process has read from files and sockets so far (/proc/<pid>/io rchar), 0 once it is gone. */
function received(pid: number | undefined): number {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    return Number(/^rchar: (\d+)$/m.exec(io)?.[1] ?? 0);
  } catch {
    return 0;
  }
}
