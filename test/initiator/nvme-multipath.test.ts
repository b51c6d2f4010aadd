// Multipath of the NVMe/TCP host (initiator/nvme/session.ts): two paths to
// one subsystem, the first through a TCP relay in this process that the test
// can take away. Both controllers come up and report ANA (Optimized); I/O
// goes to the first path named; when it is lost and cannot reconnect, I/O
// fails over to the second without an error, and comes back to the first
// once it reconnects (docs/nvme.md "The rblk library as an NVMe/TCP host").
import test from 'ava';
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { connectNvme } from '../../initiator/index.js';
import { checkSuiteResources } from '../helpers/resources.js';
import { freePort, NQN, startNvmeDaemon } from './helpers/nvme-daemon.js';
import { startLoad, until, verifyAll } from './helpers/nvme-load.js';

checkSuiteResources(test);

/** A TCP relay on `port` to `to`; down() closes it and every connection through it. */
async function relay(port: number, to: number): Promise<{ down(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((a) => {
    const b = tcpConnect({ host: '127.0.0.1', port: to });
    for (const s of [a, b]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    a.pipe(b);
    b.pipe(a);
    a.on('close', () => b.destroy());
    b.on('close', () => a.destroy());
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    async down() {
      const closed = new Promise<void>((r) => server.close(() => r()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

test.serial('two paths: I/O on the first, failover to the second when it is lost, back when it returns', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const relayPort = await freePort();
  let r1 = await relay(relayPort, dmn.port);
  t.teardown(() => r1.down());
  const s = await connectNvme(`nvme+tcp://127.0.0.1:${relayPort},127.0.0.1:${dmn.port}/${NQN}`, { reconnect: { initialDelayMs: 20, maxDelayMs: 200 }, queues: 2 });
  t.teardown(() => s.close());
  t.deepEqual(s.paths.map((p) => p.state), ['live', 'live']);
  t.deepEqual(s.paths.map((p) => p.ana), [{ 1: 1 }, { 1: 1 }], 'both controllers report namespace 1 Optimized (ANA log 0Ch)');
  const cntlids = s.paths.map((p) => p.cntlid);
  const vol = await s.open(1);
  const writesBy = async (): Promise<Map<number, number>> => {
    const m = new Map<number, number>();
    for (const x of await dmn.sessions()) {
      const c = Number(/^nvme-(\d+)\./.exec(x.id)?.[1]);
      m.set(c, (m.get(c) ?? 0) + x.writeBytes);
    }
    return m;
  };
  await vol.write(8 << 20, Buffer.alloc(64 * 1024, 1)); // beyond the blocks the load below uses
  const first = await writesBy();
  t.true((first.get(cntlids[0]!) ?? 0) >= 64 * 1024, 'the first path carried the write');
  t.is(first.get(cntlids[1]!) ?? 0, 0, 'the second path carried nothing');

  const load = startLoad(vol, { workers: 8, blocks: 1024 });
  await until(() => load.ops > 100, 'I/O on the first path');
  await r1.down();
  await until(() => s.paths[0].state !== 'live', 'the first path to be lost');
  const at = load.ops;
  await until(() => load.ops > at + 300, 'I/O on the second path');
  t.is(s.paths[1].state, 'live');
  const onSecond = (await writesBy()).get(s.paths[1].cntlid!) ?? 0;
  t.true(onSecond > 0, 'the second path carried the writes after the loss');

  r1 = await relay(relayPort, dmn.port);
  await until(() => s.paths[0].state === 'live', 'the first path to come back');
  const back = s.paths[0].cntlid!;
  const before = (await writesBy()).get(back) ?? 0;
  const at2 = load.ops;
  await until(() => load.ops > at2 + 300, 'I/O after the first path returned');
  const r = await load.stop();
  t.true(((await writesBy()).get(back) ?? 0) > before, 'I/O is back on the preferred first path');
  t.deepEqual(r.errors, []);
  t.is(r.mismatches, 0, r.found.join('; '));
  t.is(await verifyAll(vol, load.written), 0);
  t.true(s.reconnects >= 1);
});
