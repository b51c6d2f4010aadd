import test, { type ExecutionContext } from 'ava';
import { closeSync, existsSync, openSync, readdirSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import type { Connection } from '../../initiator/connection.js';
import { connect } from '../../initiator/index.js';
import type { RegisteredBuffer } from '../../initiator/registered-buffer.js';
import { availableRdmProviders } from '../../native/fabric.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { parseUnitSerialNumber } from '../../protocol/scsi/inquiry.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { spawnEntry } from '../../bench/kit/child.js';
import { untilValue } from '../../bench/kit/wait.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { command, login, pattern, read } from './helpers/initiator.js';

const BLOCKS = 8;
const LEN = BLOCKS * 512;
const WRITES = (4 * 2048) / BLOCKS;

async function serial(c: Connection): Promise<string> {
  const buf = await c.allocate(255);
  try {
    const r = await command(c, { lun: 0, cdb: cdb.inquiry(255, 0x80), dataIn: buf });
    if (r.status !== ScsiStatus.GOOD) throw new Error(`INQUIRY VPD 80h: status ${r.status}`);
    return parseUnitSerialNumber(Buffer.from(buf.buffer));
  } finally {
    buf.release();
  }
}

test('kill -9 during FUA writes, then a restart: every write answered GOOD reads back, with the same identity', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: '4MiB', lun: 0 }]));
  const first = spawnDaemon(t, ['--config', w.configPath]);
  const s = await login(await first.port(), { queueDepth: 4 });
  t.teardown(() => s.close());
  const identity = await serial(s);

  const acked = new Map<number, Buffer>();
  let next = 0;
  let killed = false;
  const writer = async (): Promise<void> => {
    const buf = await s.allocate(LEN);
    for (;;) {
      const i = next++;
      if (i >= WRITES) return;
      const data = pattern(LEN, 1000 + i);
      data.copy(buf.buffer);
      try {
        const r = await command(s, { lun: 0, cdb: cdb.write16(i * BLOCKS, BLOCKS, { fua: true }), dataOut: buf });
        if (r.status !== ScsiStatus.GOOD) throw new Error(`write ${i}: status ${r.status}`);
        acked.set(i, data);
      } catch (e) {
        if (!killed) throw e;
        return;
      }
      if (acked.size === 150 && !killed) {
        killed = true;
        first.kill('SIGKILL');
      }
    }
  };
  await Promise.all(Array.from({ length: 4 }, writer));
  t.deepEqual(await first.exited, { code: null, signal: 'SIGKILL' });
  t.true(acked.size >= 150);

  const second = spawnDaemon(t, ['--config', w.configPath]);
  const s2 = await login(await second.port());
  t.teardown(() => s2.close());
  t.is(await serial(s2), identity, 'the volume kept its serial number (state_dir identity)');
  const fd = openSync(join(w.state, 'a.img'), 'r');
  t.teardown(() => closeSync(fd));
  const viaSession: number[] = [];
  const viaFile: number[] = [];
  for (const [i, data] of acked) {
    const { result, data: got } = await read(s2, 0, i * BLOCKS, BLOCKS);
    if (result.status !== ScsiStatus.GOOD || !got.equals(data)) viaSession.push(i);
    const raw = Buffer.alloc(LEN);
    readSync(fd, raw, 0, LEN, i * LEN);
    if (!raw.equals(data)) viaFile.push(i);
  }
  t.deepEqual(viaSession, [], 'acknowledged writes that did not read back through a session');
  t.deepEqual(viaFile, [], 'acknowledged writes missing from the file');
  await s2.logout();
  second.kill('SIGTERM');
  t.deepEqual(await second.exited, { code: 0, signal: null });
});

/**
 * rblkd serving a 4 MiB volume `a` on one listener of `provider` (port 0 at
 * first; `config(port)` gives the config a restart on the same port takes),
 * and a library session on it whose errors are collected.
 */
/**
 * rblkd serving volume `a` on `provider`, and a session to it; busyPollMicros, on both ends
 * (docs/architecture.md "Busy polling"); reactors, rblkd's reactor threads (docs/target.md "Reactors"),
 * its default when absent.
 */
async function sessionOnDaemon(t: ExecutionContext, provider: 'tcp' | 'shm' | 'tcp;ofi_rxm', initiator: string, busyPollMicros = 0, reactors?: number) {
  const w = workdir(t);
  const config = (port: number): Record<string, unknown> =>
    baseConfig(w, [{ name: 'a', path: 'a.img', size: '4MiB', lun: 0 }], {
      listeners: [{ provider, address: '127.0.0.1', port }],
      busy_poll_us: busyPollMicros,
      ...(reactors !== undefined ? { reactors } : {}),
    });
  w.writeConfig(config(0));
  const first = spawnDaemon(t, ['--config', w.configPath]);
  if (reactors !== undefined) await first.waitForLine(new RegExp(`reactors: ${reactors} threads serve`));
  const port = Number((await first.waitForLine(new RegExp(`listening ${provider} 127\\.0\\.0\\.1:(\\d+)`)))[1]);
  const s = await connect({ address: '127.0.0.1', port, provider, initiatorName: `iqn.2026-12.io.rblk:${initiator}`, busyPollMicros });
  t.teardown(() => s.close());
  const errors: unknown[] = [];
  s.on('error', (e) => errors.push(e));
  return { w, config, first, port, s, errors, vol: await s.open('a') };
}

/** Every acknowledged write (block index → data) read back through `readBack` and from the volume file. */
async function checkAcknowledged(t: ExecutionContext, file: string, bs: number, acked: Map<number, Buffer>, readBack: (i: number) => Promise<Buffer>): Promise<void> {
  const fd = openSync(file, 'r');
  t.teardown(() => closeSync(fd));
  const viaSession: number[] = [];
  const viaFile: number[] = [];
  for (const [i, data] of acked) {
    if (!(await readBack(i)).equals(data)) viaSession.push(i);
    const raw = Buffer.alloc(bs);
    readSync(fd, raw, 0, bs, i * bs);
    if (!raw.equals(data)) viaFile.push(i);
  }
  t.deepEqual(viaSession, [], 'acknowledged writes that did not read back through the session');
  t.deepEqual(viaFile, [], 'acknowledged writes missing from the file');
}

async function listening(port = 0): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

// The same over shm (docs/transport.md "RDM endpoints"), through the library's
// session, which finds the dead daemon by keep-alive and logs in again once
// rblkd is back on the same address:port. The killed daemon's shm regions in
// /dev/shm (its listener's and its accepted endpoint's) are unlinked when the
// next shm listener starts, and the restart is not refused by them.
(availableRdmProviders().includes('shm') ? test : test.skip)('shm: kill -9 during FUA writes, a restart on the same port: the session logs in again, every acknowledged write reads back, /dev/shm is cleaned', async (t) => {
  t.timeout(120_000);
  const { w, config, first, port, s, errors, vol } = await sessionOnDaemon(t, 'shm', 'crash-shm');
  const regions = (): string[] => readdirSync('/dev/shm').filter((n) => n === `rblk_127.0.0.1_${port}` || n.startsWith(`rblk_127.0.0.1_${port}.`));

  const BS = 4096;
  const COUNT = (4 << 20) / BS;
  const acked = new Map<number, Buffer>();
  const failed: string[] = [];
  let next = 0;
  let killed = false;
  let left = new Map<string, number>(); // name -> inode
  let planted: string[] = [];
  const writer = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= COUNT) return;
      const data = pattern(BS, 2000 + i);
      try {
        await vol.write(i * BS, data, { fua: true });
        acked.set(i, data);
      } catch (e) {
        if (!killed) throw e;
        failed.push(String(e)); // failed clearly: never acknowledged, so not checked below
        continue;
      }
      if (acked.size === 150 && !killed) {
        killed = true;
        first.kill('SIGKILL');
        await first.exited;
        left = new Map(regions().map((n) => [n, statSync(`/dev/shm/${n}`).ino]));
        // Regions of other ports: one nobody holds (a killed daemon's), one whose port is held (a live owner's).
        const held = await listening();
        const free = await listening();
        const freePort = (free.address() as { port: number }).port;
        await new Promise((r) => free.close(r));
        planted = [`/dev/shm/rblk_127.0.0.1_${freePort}.7`, `/dev/shm/rblk_127.0.0.1_${(held.address() as { port: number }).port}.7`];
        for (const f of planted) writeFileSync(f, '');
        t.teardown(() => {
          held.close();
          for (const f of planted) rmSync(f, { force: true });
        });
        w.writeConfig(config(port));
        spawnDaemon(t, ['--config', w.configPath]);
      }
    }
  };
  await Promise.all(Array.from({ length: 4 }, writer));
  t.deepEqual(await first.exited, { code: null, signal: 'SIGKILL' });
  t.log(`${acked.size} writes acknowledged, ${failed.length} failed, ${s.reconnects} reconnects; left in /dev/shm by the kill: ${[...left.keys()].join(' ')}`);
  t.true(left.has(`rblk_127.0.0.1_${port}`) && left.has(`rblk_127.0.0.1_${port}.1`), 'the kill left the listener\'s and the session\'s regions (the check below checks something)');
  t.true(s.reconnects >= 1, 'the session logged in again to the restarted daemon');
  // A reconnect attempt made before the restarted rblkd holds the port is
  // refused at once (docs/transport.md "Addresses": nobody holds the
  // address:port, whatever region the killed one left) and reported as the
  // library reports every failed attempt; anything else (an attempt that sent
  // its request into the dead daemon's region and timed out) is a failure.
  const notRefused = errors.filter((e) => !/reconnecting connection \d+ .* failed: .*no shm listener holds/.test(String(e)));
  t.deepEqual(notRefused.map(String), [], 'the session reported nothing but refused reconnect attempts');
  t.true(acked.size > 150);
  // What the restart found is gone: its listener took the name again, and its
  // one session's endpoint is the first it accepted (.1, as the killed one's was).
  // The names are the killed daemon's, the files (inodes) new.
  t.deepEqual(regions().sort(), [`rblk_127.0.0.1_${port}`, `rblk_127.0.0.1_${port}.1`]);
  for (const n of regions()) t.not(statSync(`/dev/shm/${n}`).ino, left.get(n), `${n} is the restarted daemon's own`);
  t.deepEqual(planted.map((f) => existsSync(f)), [false, true], 'the region of a port nobody holds was unlinked, the held one kept');

  await checkAcknowledged(t, join(w.state, 'a.img'), BS, acked, (i) => vol.read(i * BS, BS));
});

// An initiator killed with -9 leaves its shm region (/dev/shm/rblk-i_<pid>_<n>):
// libfabric unlinks it on close and on most signals, not on SIGKILL. The next
// shm endpoint anyone opens on the host removes the regions of dead initiators
// and keeps a live one's (docs/transport.md "RDM endpoints").
(availableRdmProviders().includes('shm') ? test : test.skip)('shm: an initiator killed with -9 leaves its region, and the next shm connect removes it', async (t) => {
  t.timeout(60_000);
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: '4MiB', lun: 0 }], { listeners: [{ provider: 'shm', address: '127.0.0.1', port: 0 }] }));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = Number((await d.waitForLine(/listening shm 127\.0\.0\.1:(\d+)/))[1]);
  const bench = spawnEntry('rblk', ['bench', `rblk://127.0.0.1:${port}/a?provider=shm`, '--rw', 'read', '--bs', '4k', '--qd', '1', '--runtime', '60s']);
  t.teardown(() => bench.kill('SIGKILL'));
  // The bench's own regions only: other tests' initiators may be running beside it (setpriv execs: the pid is node's).
  const benchRegions = (): string[] => readdirSync('/dev/shm').filter((n) => n.startsWith(`rblk-i_${bench.pid}_`));
  const left = await untilValue(() => {
    const r = benchRegions();
    return r.length > 0 ? r : undefined;
  }, 'the bench\'s shm region', { ms: 30_000 });
  bench.kill('SIGKILL');
  await bench.exited;
  t.true(left.every((n) => existsSync(`/dev/shm/${n}`)), 'the kill left the initiator\'s region (the check below checks something)');
  // A region named for a live process (the daemon's) is not touched.
  const live = `/dev/shm/rblk-i_${d.child.pid}_99`;
  writeFileSync(live, '');
  t.teardown(() => rmSync(live, { force: true }));
  const s = await connect({ address: '127.0.0.1', port, provider: 'shm', initiatorName: 'iqn.2026-12.io.rblk:crash-shm-initiator' });
  t.teardown(() => s.close());
  t.true((await (await s.open('a')).read(0, 4096)).length === 4096);
  t.deepEqual(left.filter((n) => existsSync(`/dev/shm/${n}`)), [], 'the killed initiator\'s regions were unlinked');
  t.true(existsSync(live), 'a live process\'s region was kept');
});

// The library's common write (initiator/fast-io.ts, docs/initiator.md "The
// common read and write"): FUA writes from registered memory (session.allocate)
// go through the native queue with one promise each. A kill -9 of rblkd under
// them hands every command still out to the general path, which waits for the
// restarted daemon on the same port and sends it again from the same
// registered buffer: the buffers outlive the connection they were first sent
// on. Every write acknowledged reads back, through the session and in the file.
// Over tcp (MSG endpoints) and both RDM providers here (docs/transport.md "RDM endpoints"),
// and over tcp with both ends busy-polling 50 µs (docs/architecture.md "Busy polling").
// Each 4 KiB write goes as immediate data in its CMD (docs/initiator.md "Fast path").
// In the 1 KiB run each writer sends two writes at once, so they share a
// message (a train, docs/protocol.md §5.1) and the kill loses whole trains,
// whose commands are each sent again.
// In the reactors run rblkd serves the connection from 2 reactor threads, so the
// kill lands on commands a reactor answers in the wake-up that ran their I/O.
for (const [provider, spin, BS, together, reactors] of [
  ['tcp', 0, 4096, 1, undefined],
  ['shm', 0, 4096, 1, undefined],
  ['tcp;ofi_rxm', 0, 4096, 1, undefined],
  ['tcp', 50, 4096, 1, undefined],
  ['tcp', 0, 1024, 2, undefined],
  ['tcp', 0, 4096, 1, 2],
] as const) {
  const how = `${spin > 0 ? `${provider}, busy polling ${spin} µs on both ends` : provider}${BS !== 4096 ? `, ${BS}-byte writes in trains` : ''}${reactors !== undefined ? `, ${reactors} reactor threads` : ''}`;
  (provider === 'tcp' || availableRdmProviders().includes(provider) ? test : test.skip)(`${how}: kill -9 under FUA writes from registered memory (the common write): every acknowledged write reads back after the restart`, async (t) => {
    t.timeout(120_000);
    const { w, config, first, port, s, errors, vol } = await sessionOnDaemon(t, provider, `crash-registered-${provider}${spin > 0 ? '-poll' : ''}-${BS}${reactors !== undefined ? '-reactors' : ''}`, spin, reactors);

    const COUNT = (4 << 20) / BS;
    const acked = new Map<number, Buffer>();
    let next = 0;
    let killed = false;
    let fastBeforeKill = 0;
    let trainsBeforeKill = 0;
    let restarted: ReturnType<typeof spawnDaemon> | undefined;
    // One registered buffer per write in flight, for the writer's whole life: across the kill and the reconnect.
    const write = async (reg: RegisteredBuffer): Promise<boolean> => {
      const i = next++;
      if (i >= COUNT) return false;
      const data = pattern(BS, 3000 + i);
      data.copy(reg.buffer);
      await vol.write(i * BS, reg, { fua: true }); // a failure fails the test: the session rides through the restart
      acked.set(i, data);
      return true;
    };
    const writer = async (): Promise<void> => {
      const regs = Array.from({ length: together }, () => s.allocate(BS));
      try {
        for (;;) {
          const wrote = await Promise.all(regs.map(write));
          if (!wrote.every(Boolean)) return;
          if (acked.size >= 150 && !killed) {
            killed = true;
            fastBeforeKill = s.fastPathCommands;
            trainsBeforeKill = s.fastPathTrains;
            first.kill('SIGKILL');
            await first.exited;
            w.writeConfig(config(port));
            restarted = spawnDaemon(t, ['--config', w.configPath]);
          }
        }
      } finally {
        for (const r of regs) r.release();
      }
    };
    await Promise.all(Array.from({ length: 4 }, writer));
    t.deepEqual(await first.exited, { code: null, signal: 'SIGKILL' });
    t.log(`${acked.size} writes acknowledged, ${s.reconnects} reconnects, ${s.fastPathCommands} through the native queue (${fastBeforeKill} before the kill, ${trainsBeforeKill} trains of several among them)`);
    t.is(acked.size, COUNT, 'every write was acknowledged in the end: none failed across the kill');
    t.true(fastBeforeKill >= 150, 'the writes before the kill went through the native queue (the common write)');
    if (BS < 4096) t.true(trainsBeforeKill > 0, 'writes went several to a message before the kill');
    t.true(s.fastPathCommands > fastBeforeKill + 100, 'and so did the writes after the reconnect');
    t.true(s.reconnects >= 1, 'the session logged in again to the restarted daemon');
    const unexpected = errors.filter((e) => !/reconnecting connection \d+ .* failed/.test(String(e)));
    t.deepEqual(unexpected.map(String), [], 'the session reported nothing but failed reconnect attempts');

    const back = s.allocate(BS);
    t.teardown(() => back.release());
    await checkAcknowledged(t, join(w.state, 'a.img'), BS, acked, (i) => {
      back.buffer.fill(0);
      return vol.read(i * BS, back);
    });
    await s.close();
    restarted!.kill('SIGTERM');
    t.deepEqual(await restarted!.exited, { code: 0, signal: null });
  });
}
