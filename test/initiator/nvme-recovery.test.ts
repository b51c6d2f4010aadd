// Recovery of the NVMe/TCP host (initiator/nvme/session.ts): an administrator
// kicking the controller's queues (`rblkd ctl kick`) or rblkd killed and
// started again mid-I/O costs the caller nothing: every command completes,
// every acknowledged write reads back. Past the loss window the error is a
// typed CONNECTION_LOST naming the cause (docs/nvme.md "The rblk library as
// an NVMe/TCP host").
import test from 'ava';
import { connectNvme, hasCode } from '../../initiator/index.js';
import { assertReturned, baseline, checkSuiteResources } from '../helpers/resources.js';
import { fileBytes } from '../daemon/helpers/daemon-process.js';
import { freePort, startNvmeDaemon } from './helpers/nvme-daemon.js';
import { startLoad, until, verifyAll } from './helpers/nvme-load.js';

checkSuiteResources(test);

const FAST = { reconnect: { initialDelayMs: 20, maxDelayMs: 200 }, timeouts: { lossMs: 30_000 } };

test.serial("kicking the admin queue and then an I/O queue mid-I/O: the I/O completes, nothing is lost, rblkd's fds come back", async (t) => {
  const dmn = await startNvmeDaemon(t);
  // A warm-up session first: what rblkd starts once on first I/O (libuv's thread pool) belongs to the baseline.
  const warm = await connectNvme(dmn.url());
  t.teardown(() => warm.close());
  const wv = await warm.open(1);
  // Blocks beyond the 2048 the load below uses.
  await Promise.all(Array.from({ length: 16 }, (_, i) => wv.write((3000 + i) * 4096, Buffer.alloc(4096)).then(() => wv.read((3000 + i) * 4096, 4096))));
  await warm.close();
  const daemonBase = await baseline(dmn.d.child.pid!);
  const s = await connectNvme(dmn.url(), FAST);
  t.teardown(() => s.close());
  const vol = await s.open(1);
  const load = startLoad(vol, { workers: 8, blocks: 2048 });
  await until(() => load.ops > 200, 'I/O before the kick');
  const admin = (await dmn.sessions()).find((x) => x.id.endsWith('.0'))!;
  await dmn.kick(admin.id);
  await until(() => s.reconnects >= 1, 'the controller to come back');
  const after = load.ops;
  await until(() => load.ops > after + 200, 'I/O after the first reconnect');
  const io = (await dmn.sessions()).find((x) => x.id.endsWith('.2'))!;
  t.truthy(io, 'the new controller has an I/O queue 2');
  await dmn.kick(io.id);
  await until(() => s.reconnects >= 2, 'the controller to come back again');
  const again = load.ops;
  await until(() => load.ops > again + 200, 'I/O after the second reconnect');
  const r = await load.stop();
  t.deepEqual(r.errors, [], 'no error reached the caller');
  t.is(r.mismatches, 0);
  t.is(await verifyAll(vol, load.written), 0, 'every acknowledged write reads back');
  t.true(r.writes > 0 && r.reads > 0);
  t.log(`${r.ops} commands, ${s.reconnects} reconnects, ${s.reissued} reissued`);
  await s.close();
  await assertReturned(t, daemonBase, { what: 'rblkd' });
});

test.serial('rblkd killed and started again mid-I/O, plain and (digests, registered buffers, FUA) sessions: no acknowledged write is lost, no error surfaces', async (t) => {
  const port = await freePort();
  const first = await startNvmeDaemon(t, { port });
  // Two sessions on disjoint halves of the 16 MiB volume: the second's
  // registered buffers outlive the reconnect and its FUA writes were
  // acknowledged only once durable (docs/nvme.md "Registered buffers").
  const half = (8 << 20) / 4096;
  const kinds = [
    { name: 'plain', query: '', load: { workers: 8, blocks: half, readShare: 0.3 } },
    { name: 'digests+registered+FUA', query: '?digest=header,data', load: { workers: 4, blocks: half, readShare: 0.3, offsetBlocks: half, registered: true, fua: true } },
  ];
  const sessions = await Promise.all(kinds.map((k) => connectNvme(first.url(k.query), FAST)));
  t.teardown(() => Promise.all(sessions.map((s) => s.close())));
  const vols = await Promise.all(sessions.map((s) => s.open(1)));
  const loads = kinds.map((k, i) => startLoad(vols[i], k.load));
  await until(() => loads.every((l) => l.ops > 150), 'I/O before the kill');
  first.kill('SIGKILL');
  await first.d.exited;
  const second = await startNvmeDaemon(t, { port, w: first.w });
  t.is(second.port, port);
  await until(() => sessions.every((s) => s.reconnects >= 1), 'the sessions to reconnect to the new rblkd');
  const after = loads.map((l) => l.ops);
  await until(() => loads.every((l, i) => l.ops > after[i] + 150), 'I/O on the new rblkd');
  const results = await Promise.all(loads.map((l) => l.stop()));
  for (const [i, k] of kinds.entries()) {
    const r = results[i];
    t.deepEqual(r.errors, [], k.name);
    t.is(r.mismatches, 0, k.name);
    t.is(await verifyAll(vols[i], loads[i].written, 4096, k.load.offsetBlocks ?? 0), 0, `${k.name}: every write acknowledged before or after the kill reads back`);
    t.log(`${k.name}: ${r.ops} commands, ${sessions[i].reconnects} reconnects, ${sessions[i].reissued} reissued`);
  }
  // The FUA session's acknowledged writes are in the file itself, not only readable through rblkd.
  const fua = loads[1].written;
  let missing = 0;
  for (const [block, data] of fua) if (!fileBytes(second.file, (half + block) * 4096, 4096).equals(data)) missing++;
  t.is(missing, 0, 'acknowledged FUA writes missing from the volume file');
});

test.serial('with rblkd gone for longer than the loss window: CONNECTION_LOST naming the cause', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const s = await connectNvme(dmn.url(), { reconnect: { initialDelayMs: 20, maxDelayMs: 100 }, timeouts: { lossMs: 1500, connectMs: 1000 } });
  t.teardown(() => s.close());
  const vol = await s.open(1);
  await vol.write(0, Buffer.alloc(4096, 7));
  dmn.kill('SIGKILL');
  await dmn.d.exited;
  const e = await t.throwsAsync(vol.read(0, 4096));
  t.true(hasCode(e, 'CONNECTION_LOST'), String(e));
  t.regex(e!.message, /timeouts\.lossMs.*last cause: .*(ECONNREFUSED|closed|refused)/);
  t.is(s.paths[0].state === 'live', false);
});
