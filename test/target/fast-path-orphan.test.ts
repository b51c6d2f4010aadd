// A connection dropped while its fast-path write is stuck in a slow device
// (docs/target.md "A lost connection's commands"). The device is a file on a
// FUSE mount served by a child process (initiator/fuse over a MemoryDevice
// whose writes wait while held), so the io_uring write really blocks in the
// kernel. The fast path must not wait for it as it closes: doing so stopped
// the event loop, and every other connection with it, until the device
// answered (here: never, since this process is the one to release it). Instead the
// ring lives on, the volume is fenced until the write lands, and the reissued
// copy and a newer write land after it.
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { connect } from '../../initiator/index.js';
import { FastPath } from '../../native/fast-path.js';
import { FileBackend } from '../../target/backend/file.js';
import { MemoryBackend } from '../../target/backend/memory.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections, type RblkConnection } from '../../target/rblk/connection.js';
import { tempDir } from '../fuse/helpers/fuse-fixture.js';
import { listenTest, memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { until } from '../../bench/kit/wait.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const MiB = 1 << 20;
const reason = FastPath.available() ? null : 'no native fast path on this host (rblk_uring.node)';
if (reason !== null) test.skip(`fast-path orphan tests: ${reason}`, () => undefined);
const fastTest = reason === null ? test.serial : test.skip;

const child = fileURLToPath(new URL('../fuse/helpers/slow-child.ts', import.meta.url));

/** The slow device: a FUSE file served by a child process whose writes can be held (helpers/slow-child.ts). */
interface Slow {
  path: string;
  hold(): Promise<void>;
  release(): void;
  /** Writes that arrived while held. */
  waiting(): number;
}

async function slowDevice(t: ExecutionContext): Promise<Slow> {
  const dir = await tempDir(t, 'orphan');
  const proc = spawn(process.execPath, ['--import=tsx', child, dir], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise((r) => proc.once('exit', r));
  t.teardown(async () => {
    proc.stdin.write('exit\n');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    proc.kill('SIGKILL');
  });
  let waiting = 0;
  const lines = createInterface({ input: proc.stdout });
  let onHeld: (() => void) | null = null;
  const ready = new Promise<string>((resolve, reject) => {
    lines.on('line', (l) => {
      if (l.startsWith('ready ')) resolve(l.slice(6));
      else if (l === 'waiting') waiting++;
      else if (l === 'held') onHeld?.();
    });
    proc.once('exit', (code) => reject(new Error(`the FUSE child exited (${code}) before it was ready`)));
  });
  const path = await ready;
  return {
    path,
    hold: () =>
      new Promise<void>((r) => {
        onHeld = r;
        proc.stdin.write('hold\n');
      }),
    release: () => void proc.stdin.write('release\n'),
    waiting: () => waiting,
  };
}

async function slowTarget(t: ExecutionContext) {
  const dev = await slowDevice(t);
  const log = memoryLog();
  const server = new TargetServer(testServerOptions(log, { fastPath: true, limits: { inCapsuleData: 512 } }), rblkConnections);
  const file = await FileBackend.open({ path: dev.path });
  const lu = new LogicalUnit({ name: 'slow', backend: file, identifier: randomUUID() });
  server.addVolume({ name: 'slow', lun: 0, lu, access: () => 'rw' });
  server.addVolume({ name: 'other', lun: 1, lu: new LogicalUnit({ name: 'other', backend: new MemoryBackend({ size: MiB }), identifier: randomUUID() }), access: () => 'rw' });
  const port = (await listenTest(server, 'tcp')).port;
  t.teardown(async () => {
    dev.release();
    await server.close();
    await file.close();
  });
  const taken = (): number => [...server.sessions].reduce((a, s) => a + ((s as RblkConnection).fastPathStats?.taken ?? 0), 0);
  return { dev, server, lu, log, port, taken };
}

fastTest('a connection dropped with its fast-path write stuck in a slow device: the loop goes on, the volume is fenced until the write lands, and nothing acknowledged is overwritten', async (t) => {
  const { dev, server, lu, log, port, taken } = await slowTarget(t);
  const s = await connect({ address: '127.0.0.1', port, provider: 'tcp', initiatorName: 'iqn.2026-12.io.rblk:orphan', targetName: TARGET_NAME, connections: 2, timeouts: { lossMs: 20_000 } });
  t.teardown(() => s.close());
  const slow = await s.open('slow');
  const other = await s.open('other');
  await until(() => [...server.sessions].filter((c) => c.isActive).length === 2, 'both connections');
  await slow.write(0, Buffer.alloc(4096, 0xa0));
  t.true(taken() > 0, 'the fast path serves the file volume');

  await dev.hold();
  const b = Buffer.alloc(4096, 0xb0);
  let bDone = false;
  const wb = slow.write(0, b).then(() => (bDone = true));
  await until(() => dev.waiting() > 0, 'the write to reach the device');
  const carrier = [...server.sessions].find((c) => ((c as RblkConnection).fastPathStats?.inFlight ?? 0) > 0);
  if (carrier === undefined) return t.fail('no connection has the write in its fast path');
  const dropped = carrier.logout('admin', 'test: drop the connection with a write in a slow device');

  // The loop was not stopped: another volume answers at once, through the other connection.
  const o = Buffer.alloc(4096, 0x0f);
  await other.write(0, o);
  t.true((await other.read(0, 4096)).equals(o), 'other volumes carry on while the write is stuck');
  await until(() => lu.fastPath.held, 'the fence');
  t.true(log.lines.some((l) => l.message.includes('native requests still in the backend: slow wait for them')));
  t.false(bDone, 'the reissued copy waits for the first one');

  dev.release();
  await wb;
  await dropped;
  const c = Buffer.alloc(4096, 0xc0);
  await slow.write(0, c);
  t.true((await slow.read(0, 4096)).equals(c), 'the newer, acknowledged write is what the volume holds');
  await until(() => !lu.fastPath.held, 'the fence to end');
  const before = taken();
  await slow.write(8192, c);
  t.true(taken() > before, 'the fast path serves the volume again');
});
