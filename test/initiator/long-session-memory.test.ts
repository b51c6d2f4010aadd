// A session that never loses its connection keeps nothing per command it sent:
// after tens of thousands of commands on one login, the JavaScript heap is
// back where it was (docs/initiator.md "Memory over a long session"). Each
// initiator path of the library is driven with each buffer kind: the rblk
// session (plain Buffers through the connection's I/O pool, registered memory
// through the native queue), the NVMe/TCP host, and the NBD export under fio.
import test from 'ava';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { connect, connectNvme } from '../../initiator/index.js';
import { NbdServer } from '../../initiator/nbd/index.js';
import { requireTool, runOk } from '../nbd/helpers/harness.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { startNvmeDaemon } from './helpers/nvme-daemon.js';
import { pattern, startServer } from './helpers/target.js';

// The process's fds come back too, once libfabric's per-process state is in the baseline.
checkSuiteResources(test, { warmUp: () => warmUpFabric(['tcp']) });

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const KiB = 1024;
const COMMANDS = 30_000;
const QD = 16;
/** Heap growth allowed over COMMANDS commands: far below one retained object per command. */
const SLACK = 4 * 1024 * KiB;

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

for (const registered of [false, true]) {
  test.serial(`tcp, ${registered ? 'registered memory' : 'plain Buffers'}: ${COMMANDS} reads and writes on one login leave the heap where it was`, async (t) => {
    t.timeout(120_000);
    const target = await startServer('tcp', [{ name: 'vol', lun: 0, size: 8 << 20 }]);
    const s = await connect(target.options({ queueDepth: 2 * QD, maxIo: 64 * KiB }));
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    const vol = await s.open('vol');
    // Writes of 16 KiB: above the 8 KiB immediate data, so a plain Buffer's go through the pool too.
    const data = pattern(16 * KiB, 3);
    let done = 0;
    let failures = 0;
    const run = async (count: number, worker: number): Promise<void> => {
      const w = registered ? s.allocate(16 * KiB) : Buffer.alloc(16 * KiB);
      const r = registered ? s.allocate(4 * KiB) : Buffer.alloc(4 * KiB);
      const wbuf = registered ? (w as ReturnType<typeof s.allocate>).buffer : (w as Buffer);
      data.copy(wbuf);
      const at = worker * 32 * KiB;
      for (let i = 0; i < count; i++) {
        try {
          if (i % 2 === 0) await vol.write(at, w);
          else {
            const got = await vol.read(at, r);
            if (!got.equals(data.subarray(0, 4 * KiB))) failures++;
          }
        } catch {
          failures++;
        }
        done++;
      }
    };
    const round = (count: number): Promise<void[]> => Promise.all(Array.from({ length: QD }, (_, k) => run(count / QD, k)));
    await round(2_000);
    const before = heapAfterGc();
    await round(COMMANDS);
    const after = heapAfterGc();
    t.is(failures, 0, 'every write succeeded and every read returned what was written');
    t.is(done, 2_000 + COMMANDS);
    t.is(s.reconnects, 0, 'one login');
    const perCommand = (after - before) / COMMANDS;
    t.log(`heap ${(before / 1048576).toFixed(1)} → ${(after / 1048576).toFixed(1)} MiB over ${COMMANDS} commands (${perCommand.toFixed(1)} bytes per command)`);
    t.true(after - before < SLACK, `the heap grew by ${((after - before) / 1048576).toFixed(1)} MiB over ${COMMANDS} commands`);
  });
}

for (const registered of [false, true]) {
  test.serial(`NVMe/TCP host, ${registered ? 'registered memory' : 'plain Buffers'}: ${COMMANDS} reads and writes on one connect leave the heap where it was`, async (t) => {
    t.timeout(120_000);
    const dmn = await startNvmeDaemon(t, { size: '16MiB' });
    const s = await connectNvme(dmn.url());
    t.teardown(() => s.close());
    const vol = await s.open(1);
    const data = pattern(16 * KiB, 5);
    let failures = 0;
    const run = async (count: number, worker: number): Promise<void> => {
      const w = registered ? s.allocate(16 * KiB) : Buffer.alloc(16 * KiB);
      const r = registered ? s.allocate(4 * KiB) : Buffer.alloc(4 * KiB);
      data.copy(registered ? (w as ReturnType<typeof s.allocate>).buffer : (w as Buffer));
      const at = worker * 32 * KiB;
      for (let i = 0; i < count; i++) {
        try {
          if (i % 2 === 0) await vol.write(at, w);
          else if (!(await vol.read(at, r)).equals(data.subarray(0, 4 * KiB))) failures++;
        } catch {
          failures++;
        }
      }
    };
    const round = (count: number): Promise<void[]> => Promise.all(Array.from({ length: QD }, (_, k) => run(count / QD, k)));
    await round(2_000);
    const before = heapAfterGc();
    await round(COMMANDS);
    const after = heapAfterGc();
    t.is(failures, 0, 'every write succeeded and every read returned what was written');
    t.is(s.reconnects, 0, 'one connect');
    t.log(`heap ${(before / 1048576).toFixed(1)} → ${(after / 1048576).toFixed(1)} MiB over ${COMMANDS} commands`);
    t.true(after - before < SLACK, `the heap grew by ${((after - before) / 1048576).toFixed(1)} MiB over ${COMMANDS} commands`);
  });
}

test.serial(`NBD export of an rblk volume: ${COMMANDS} fio requests on one connection leave the heap where it was`, async (t) => {
  t.timeout(120_000);
  requireTool('fio', 'fio');
  const target = await startServer('tcp', [{ name: 'vol', lun: 0, size: 8 << 20 }]);
  const s = await connect(target.options({ queueDepth: 2 * QD, maxIo: 64 * KiB }));
  const server = new NbdServer(new Map([['vol', await s.open('vol')]]));
  t.teardown(async () => {
    await server.close();
    await s.close();
    await target.close();
  });
  const { port } = await server.listen({ host: '127.0.0.1', port: 0 });
  // 4 KiB random reads and writes over 4 MiB, io_size wrapping around it: requests × 4 KiB in all.
  const fio = (requests: number): Promise<unknown> =>
    runOk(t, 'fio', ['--name=long', '--ioengine=nbd', `--uri=nbd://127.0.0.1:${port}/vol`, '--rw=randrw', '--bs=4k', `--iodepth=${QD}`, '--size=4m', `--io_size=${requests * 4}k`]);
  await fio(2_000);
  const before = heapAfterGc();
  await fio(COMMANDS);
  const after = heapAfterGc();
  t.is(s.reconnects, 0, 'one login');
  t.log(`heap ${(before / 1048576).toFixed(1)} → ${(after / 1048576).toFixed(1)} MiB over ${COMMANDS} requests`);
  t.true(after - before < SLACK, `the heap grew by ${((after - before) / 1048576).toFixed(1)} MiB over ${COMMANDS} requests`);
});

