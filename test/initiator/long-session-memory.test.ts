// A session that never loses its connection keeps nothing per command it sent:
// after tens of thousands of commands on one login, the JavaScript heap is
// back where it was (docs/initiator.md "Memory over a long session"). Each
// initiator path of the library is driven with each buffer kind: the rblk
// session (plain Buffers through the connection's I/O pool, registered memory
// through the native queue), the NVMe/TCP host, and the NBD export under fio.
import test, { type ExecutionContext } from 'ava';
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

/** A volume of either session kind, as this file drives it. */
interface Vol {
  write(offset: number, data: never): Promise<unknown>;
  read(offset: number, into: never): Promise<Buffer>;
}

/**
 * QD workers each writing 16 KiB (above the 8 KiB immediate data, so a plain
 * Buffer's go through the pool too) and reading its first 4 KiB back, on
 * buffers from `buffer` (plain or registered): a warm-up round, then COMMANDS
 * commands between two heap measurements. Returns the heap before and after
 * and the commands that failed or read back other bytes.
 */
async function measure(vol: Vol, buffer: (size: number) => { view: Buffer; io: unknown }): Promise<{ before: number; after: number; failures: number }> {
  const data = pattern(16 * KiB, 3);
  let failures = 0;
  const run = async (count: number, worker: number): Promise<void> => {
    const w = buffer(16 * KiB);
    const r = buffer(4 * KiB);
    data.copy(w.view);
    const at = worker * 32 * KiB;
    for (let i = 0; i < count; i++) {
      try {
        if (i % 2 === 0) await vol.write(at, w.io as never);
        else if (!(await vol.read(at, r.io as never)).equals(data.subarray(0, 4 * KiB))) failures++;
      } catch {
        failures++;
      }
    }
  };
  const round = (count: number): Promise<void[]> => Promise.all(Array.from({ length: QD }, (_, k) => run(count / QD, k)));
  await round(2_000);
  const before = heapAfterGc();
  await round(COMMANDS);
  return { before, after: heapAfterGc(), failures };
}

function assertFlat(t: ExecutionContext, m: { before: number; after: number; failures: number }): void {
  t.is(m.failures, 0, 'every write succeeded and every read returned what was written');
  t.log(`heap ${(m.before / 1048576).toFixed(1)} → ${(m.after / 1048576).toFixed(1)} MiB over ${COMMANDS} commands (${((m.after - m.before) / COMMANDS).toFixed(1)} bytes per command)`);
  t.true(m.after - m.before < SLACK, `the heap grew by ${((m.after - m.before) / 1048576).toFixed(1)} MiB over ${COMMANDS} commands`);
}

/** Plain Buffers, or registered memory from `allocate`. */
function buffers(registered: boolean, allocate: (size: number) => { buffer: Buffer }): (size: number) => { view: Buffer; io: unknown } {
  return (size) => {
    if (!registered) {
      const b = Buffer.alloc(size);
      return { view: b, io: b };
    }
    const m = allocate(size);
    return { view: m.buffer, io: m };
  };
}

for (const registered of [false, true]) {
  const kind = registered ? 'registered memory' : 'plain Buffers';
  test.serial(`rblk session over tcp, ${kind}: ${COMMANDS} reads and writes on one login leave the heap where it was`, async (t) => {
    t.timeout(120_000);
    const target = await startServer('tcp', [{ name: 'vol', lun: 0, size: 8 << 20 }]);
    const s = await connect(target.options({ queueDepth: 2 * QD, maxIo: 64 * KiB }));
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    assertFlat(t, await measure(await s.open('vol'), buffers(registered, (n) => s.allocate(n))));
    t.is(s.reconnects, 0, 'one login');
  });

  test.serial(`NVMe/TCP host, ${kind}: ${COMMANDS} reads and writes on one connect leave the heap where it was`, async (t) => {
    t.timeout(120_000);
    const dmn = await startNvmeDaemon(t, { size: '16MiB' });
    const s = await connectNvme(dmn.url());
    t.teardown(() => s.close());
    assertFlat(t, await measure(await s.open(1), buffers(registered, (n) => s.allocate(n))));
    t.is(s.reconnects, 0, 'one connect');
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

