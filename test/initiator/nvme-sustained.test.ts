// 20 s of sustained NVMe/TCP I/O through the rblk library's host
// (initiator/nvme/): one connect, QD8 random 4 KiB reads and writes, each
// read checked against what was last acknowledged for its block, no error,
// no reconnect. Two sessions at once, each on its half of the volume: one
// with plain buffers, one with header and data digests, registered buffers
// and FUA writes, so every buffer kind and both framings stay up for the
// whole run. The IOPS is logged for docs/performance.md, never asserted.
import test from 'ava';
import { connectNvme } from '../../initiator/index.js';
import { assertReturned, baseline, checkSuiteResources } from '../helpers/resources.js';
import { startNvmeDaemon } from './helpers/nvme-daemon.js';
import { startLoad, verifyAll } from './helpers/nvme-load.js';

checkSuiteResources(test);

const SECONDS = 20;

test.serial(`${SECONDS} s of QD8 random 4K read/write with verify, plain and (digests, registered buffers, FUA) side by side: zero errors, zero reconnects, rblkd's fds come back`, async (t) => {
  t.timeout((SECONDS + 60) * 1000);
  const dmn = await startNvmeDaemon(t, { size: '64MiB' });
  // A warm-up session first: what rblkd starts once on first I/O (libuv's thread pool) belongs to the baseline.
  const warm = await connectNvme(dmn.url());
  t.teardown(() => warm.close());
  const wv = await warm.open(1);
  await Promise.all(Array.from({ length: 16 }, (_, i) => wv.write(i * 4096, Buffer.alloc(4096)).then(() => wv.read(i * 4096, 4096))));
  await warm.close();
  const daemonBase = await baseline(dmn.d.child.pid!);
  const half = (32 << 20) / 4096;
  const kinds = [
    { name: 'plain', query: '', load: { workers: 8, blocks: half } },
    { name: 'digests+registered+FUA', query: '?digest=header,data', load: { workers: 8, blocks: half, offsetBlocks: half, registered: true, fua: true } },
  ];
  const sessions = await Promise.all(kinds.map((k) => connectNvme(dmn.url(k.query))));
  let closed = false;
  t.teardown(async () => {
    if (!closed) await Promise.all(sessions.map((s) => s.close()));
  });
  const vols = await Promise.all(sessions.map((s) => s.open(1)));
  const loads = kinds.map((k, i) => startLoad(vols[i], k.load));
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const results = await Promise.all(loads.map((l) => l.stop()));
  for (const [i, k] of kinds.entries()) {
    const r = results[i];
    const s = sessions[i];
    t.deepEqual(r.errors, [], k.name);
    t.is(r.mismatches, 0, `${k.name}: every read matched the last acknowledged write`);
    t.is(s.reconnects, 0, k.name);
    t.is(s.reissued, 0, k.name);
    t.true(r.reads > 0 && r.writes > 0, k.name);
    t.is(await verifyAll(vols[i], loads[i].written, 4096, k.load.offsetBlocks ?? 0), 0, k.name);
    t.log(`${k.name}: ${r.ops} commands in ${SECONDS} s: ${Math.round(r.ops / SECONDS)} IOPS (${r.reads} reads, ${r.writes} writes)`);
  }
  await Promise.all(sessions.map((s) => s.close()));
  closed = true;
  await assertReturned(t, daemonBase, { what: 'rblkd' });
});
