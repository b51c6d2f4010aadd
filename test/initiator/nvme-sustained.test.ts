// 20 s of sustained NVMe/TCP I/O through the rblk library's host
// (initiator/nvme/): one connect, QD8 random 4 KiB reads and writes, each
// read checked against what was last acknowledged for its block, no error,
// no reconnect. The IOPS is logged for docs/performance.md, never asserted.
import test from 'ava';
import { connectNvme } from '../../initiator/index.js';
import { assertReturned, baseline, checkSuiteResources } from '../helpers/resources.js';
import { startNvmeDaemon } from './helpers/nvme-daemon.js';
import { startLoad, verifyAll } from './helpers/nvme-load.js';

checkSuiteResources(test);

const SECONDS = 20;

test.serial(`${SECONDS} s of QD8 random 4K read/write with verify: zero errors, zero reconnects, rblkd's fds come back`, async (t) => {
  t.timeout((SECONDS + 60) * 1000);
  const dmn = await startNvmeDaemon(t, { size: '64MiB' });
  // A warm-up session first: what rblkd starts once on first I/O (libuv's thread pool) belongs to the baseline.
  const warm = await connectNvme(dmn.url());
  t.teardown(() => warm.close());
  const wv = await warm.open(1);
  await Promise.all(Array.from({ length: 16 }, (_, i) => wv.write(i * 4096, Buffer.alloc(4096)).then(() => wv.read(i * 4096, 4096))));
  await warm.close();
  const daemonBase = await baseline(dmn.d.child.pid!);
  const s = await connectNvme(dmn.url());
  let closed = false;
  t.teardown(async () => {
    if (!closed) await s.close();
  });
  const vol = await s.open(1);
  const load = startLoad(vol, { workers: 8, blocks: (64 << 20) / 4096 });
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const r = await load.stop();
  t.deepEqual(r.errors, []);
  t.is(r.mismatches, 0, 'every read matched the last acknowledged write');
  t.is(s.reconnects, 0);
  t.is(s.reissued, 0);
  t.true(r.reads > 0 && r.writes > 0);
  t.is(await verifyAll(vol, load.written), 0);
  t.log(`${r.ops} commands in ${SECONDS} s: ${Math.round(r.ops / SECONDS)} IOPS (${r.reads} reads, ${r.writes} writes)`);
  await s.close();
  closed = true;
  await assertReturned(t, daemonBase, { what: 'rblkd' });
});
