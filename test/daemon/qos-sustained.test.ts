// QoS limits sustained (docs/operations.md "QoS limits"), on the real rblkd:
//   - three volumes limited to 1,000 IOPS each, read at QD32 for RBLK_QOS_SUSTAIN_S
//     seconds (20 by default) through the three front ends at once: the rblk
//     library (the native fast path on), a raw iSCSI session and a raw NVMe/TCP
//     I/O queue. Each logs in once and is the same session at the end; no
//     command fails; every read is compared with the bytes the volume's file
//     was made with; each front end's count over the window is the limit's,
//     within 10%.
//   - kill -9 under a throttled QD32 write load (FUA writes, the fast path on,
//     write_iops 200):
//     after a restart, every block reads the last write acknowledged for it, or
//     the one in flight after it when the kill came; through a session and in
//     the file.
import test from 'ava';
import { closeSync, mkdirSync, openSync, readSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from '../../initiator/index.js';
import { FastPath } from '../../native/fast-path.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import type { SessionInfo } from '../../target/connection/environment.js';
import { RawHost } from '../../bench/soak/nvme-raw-host.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { loginStatus, RawInitiator } from '../iscsi/raw-initiator.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { command, login, read } from './helpers/initiator.js';
import { QD, rate, volumeLoad, within, iscsiLoad, nvmeLoad } from './helpers/qos-load.js';
import { blockOf, BS } from './helpers/snapshot-load.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric(['tcp']) });

const SECONDS = Number(process.env.RBLK_QOS_SUSTAIN_S ?? 20);
const TARGET = 'iqn.2026-12.io.rblk:qos-sustained';
const NQN = 'nqn.2026-12.io.rblk:qos-sustained';
const LIMIT = 1000;
const VOLUME_BLOCKS = 4096; // 16 MiB of 4 KiB blocks
/**
 * The rate over a long window is the feature here, not how short a stall the
 * bucket forgives: at the default 100 ms, a stall of the daemon or of this
 * process longer than that (seen on this shared two-core machine, loaded
 * beyond 8) loses its time for good, and three front ends at once make them
 * likelier. A 1 s burst is made up after such a stall; it adds at most 1,000
 * commands at the start, which the warm-up spends, and moves a window's count
 * by at most that (5% of 20 s) when a stall straddles its end.
 */
const BURST_MS = 1000;
/** Spends the burst (1,000 commands) even at a few thousand IOPS unthrottled, and settles. */
const WARM_UP_MS = 2000;

const native = FastPath.available() ? test.serial : test.serial.skip;

/** A volume's file as the test makes it: block i of volume v is blockOf(v, i). */
function image(v: number): Buffer {
  return Buffer.concat(Array.from({ length: VOLUME_BLOCKS }, (_, i) => blockOf(v, i)));
}

native(`${SECONDS} s at QD32 on every front end at once (rblk with the fast path, iSCSI, NVMe/TCP): 1,000 IOPS within 10% on each, one login each, every read compared, none failed`, async (t) => {
  t.timeout((SECONDS + 60) * 1000);
  const w = workdir(t);
  mkdirSync(w.state, { recursive: true });
  const names = ['rblk', 'iscsi', 'nvme'] as const;
  const images = names.map((_, v) => image(v + 1));
  names.forEach((n, v) => writeFileSync(join(w.state, `${n}.img`), images[v]!));
  w.writeConfig(
    baseConfig(
      w,
      names.map((n, lun) => ({ name: n, path: `${n}.img`, lun, qos: { iops: LIMIT, burst_ms: BURST_MS } })),
      {
        target_name: TARGET,
        nqn: NQN,
        listeners: [
          { provider: 'tcp', address: '127.0.0.1', port: 0 },
          { protocol: 'iscsi', address: '127.0.0.1', port: 0 },
          { protocol: 'nvme-tcp', address: '127.0.0.1', port: 0 },
        ],
        limits: { queue_depth: 64 },
      },
    ),
  );
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const tcp = await d.port();
  const iport = await d.iscsiPort();
  const nport = Number((await d.waitForLine(/listening nvme-tcp 127\.0\.0\.1:(\d+)/))[1]);
  await d.waitForLine(/rblkd ready/);
  const socket = join(w.dir, 'rblkd.ctl');

  const s = await connect({ address: '127.0.0.1', port: tcp, provider: 'tcp', initiatorName: 'iqn.2026-12.io.rblk:sustained-rblk', targetName: TARGET, queueDepth: QD });
  t.teardown(() => s.close().catch(() => undefined));
  const vol = await s.open('rblk');

  const c = await RawInitiator.open(iport);
  t.teardown(() => c.close());
  t.is(loginStatus((await c.login({ initiator: 'iqn.2026-12.io.rblk:sustained-iscsi', target: TARGET }))!), 0);
  c.command({ itt: 1, cdb: Buffer.alloc(16), edtl: 0, lun: 1 }); // takes the POWER ON unit attention
  await c.next(0x21);

  const admin = await RawHost.open(nport);
  const io = await RawHost.open(nport);
  t.teardown(() => {
    io.close();
    admin.close();
  });
  const cntlid = await admin.enable(NQN);
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 63, subnqn: NQN, cntlid })).statusField, 0);

  const sessions = async (): Promise<SessionInfo[]> => (await controlRequest(socket, 'sessions')) as SessionInfo[];
  const before = await sessions();
  const nativeBefore = before.find((x) => x.initiator?.endsWith(':sustained-rblk'))!.native.commands;

  // The blocks read are those the volume's first 2 MiB (iSCSI, NVMe) or all 16 MiB (rblk) hold.
  const loads = [volumeLoad(vol, VOLUME_BLOCKS, QD, images[0]), iscsiLoad(c, { lun: 1, expect: images[1] }), nvmeLoad(io, { nsid: 3, expect: images[2] })];
  let rates: number[];
  try {
    rates = await Promise.all(loads.map((l) => rate(l, SECONDS * 1000, WARM_UP_MS)));
  } finally {
    await Promise.all(loads.map((l) => l.stop()));
  }
  names.forEach((n, i) => {
    within(t, rates[i]!, LIMIT, `${n}, ${SECONDS} s window`);
    t.is(loads[i]!.failure, null, `${n}: no command failed and no read differed`);
    t.is(loads[i]!.verified, loads[i]!.completed, `${n}: every read was compared`);
    t.true(loads[i]!.completed >= LIMIT * SECONDS * 0.9, `${n}: ${loads[i]!.completed} reads`);
  });
  t.log(`reads compared: ${names.map((n, i) => `${n} ${loads[i]!.verified}`).join(', ')}`);

  // One login each: the sessions at the end are those of the start.
  const after = await sessions();
  t.deepEqual(after.map((x) => x.id).sort(), before.map((x) => x.id).sort(), 'no session ended or was added');
  t.is(s.reconnects, 0, 'the rblk library never reconnected');
  t.is(s.state, 'connected');
  const rblk = after.find((x) => x.initiator?.endsWith(':sustained-rblk'))!;
  t.true(rblk.native.active, 'the rblk session is still on the native fast path');
  // The fast path runs what the bucket has room for and leaves the rest to JavaScript to wait (docs/target.md "Fast path").
  t.log(`rblk session: ${rblk.native.commands - nativeBefore} commands on the fast path, ${rblk.native.qosParked} of them parked natively for their QoS turn, ${rblk.native.qosDeferred} left to JavaScript`);
  t.true(rblk.native.commands > nativeBefore && rblk.native.qosParked > 0 && rblk.native.qosReleased > 0, 'the fast path ran commands and held those without room natively until their turn');
  const vols = (await controlRequest(socket, 'volumes')) as { name: string; qos: { throttledCommands: number } }[];
  for (const n of names) t.true(vols.find((v) => v.name === n)!.qos.throttledCommands > 0, `${n} was throttled`);
  t.deepEqual(
    d.lines.filter((l) => /\berror\b/i.test(l)),
    [],
    'rblkd logged no error',
  );

  await s.close();
  c.close();
  io.close();
  admin.close();
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});

/**
 * Below what FUA writes reach on a busy two-core machine (about 400 a second
 * seen), so that the limit, not the disk, holds them back.
 */
const WRITE_LIMIT = 200;

native(`kill -9 under a throttled QD32 FUA write load (${WRITE_LIMIT} IOPS, fast path on): after a restart every block holds its last acknowledged write, or the one in flight after it`, async (t) => {
  t.timeout(120_000);
  const w = workdir(t);
  const blocks = 256; // 1 MiB: each of the QD writers owns every QD-th block, 8 of them, each written again and again
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: `${(blocks * BS) >> 20}MiB`, lun: 0, qos: { write_iops: WRITE_LIMIT } }], { limits: { queue_depth: 64 } }));
  const first = spawnDaemon(t, ['--config', w.configPath]);
  const c = await login(await first.port(), { queueDepth: QD });
  t.teardown(() => c.close());
  const socket = join(w.dir, 'rblkd.ctl');

  /** Per block: the last write acknowledged GOOD, and one issued after it not (yet) answered. */
  const acked = new Map<number, number>();
  const inFlight = new Map<number, number>();
  let nextId = 1;
  let acknowledged = 0;
  let killed = false;
  let failure: Error | null = null;
  const started = performance.now();
  const writer = async (worker: number): Promise<void> => {
    const buf = await c.allocate(BS);
    try {
      for (let k = 0; !killed; k++) {
        const block = worker + QD * ((k * 7) % (blocks / QD));
        const id = nextId++;
        blockOf(id, block).copy(buf.buffer);
        inFlight.set(block, id);
        let r;
        try {
          r = await command(c, { lun: 0, cdb: cdb.write16((block * BS) / 512, BS / 512, { fua: true }), dataOut: buf });
        } catch (e) {
          if (!killed) failure ??= e as Error;
          return;
        }
        if (r.status !== ScsiStatus.GOOD) {
          failure ??= new Error(`write of block ${block}: status ${r.status}`);
          return;
        }
        if (killed) return; // answered after the kill was sent: not counted as acknowledged before it
        acked.set(block, id);
        inFlight.delete(block);
        acknowledged++;
      }
    } finally {
      buf.release();
    }
  };
  const writers = Array.from({ length: QD }, (_, i) => writer(i));
  // Past the burst and into the throttle; the daemon's own account says it is throttling.
  await new Promise((r) => setTimeout(r, 2500));
  const vols = (await controlRequest(socket, 'volumes')) as { name: string; qos: { throttledCommands: number } }[];
  const throttled = vols[0]!.qos.throttledCommands;
  const rateBefore = acknowledged / ((performance.now() - started) / 1000);
  killed = true;
  first.kill('SIGKILL');
  await Promise.all(writers);
  t.deepEqual(await first.exited, { code: null, signal: 'SIGKILL' });
  t.log(`${nextId - 1} writes issued, ${acknowledged} acknowledged (${acked.size} blocks), ${inFlight.size} in flight at the kill; ${throttled} throttled; ${rateBefore.toFixed(0)} IOPS`);
  t.is(failure, null);
  t.true(throttled > 0, 'the load was throttled when the kill came');
  t.true(rateBefore < WRITE_LIMIT * 1.5, `writes ran at ${rateBefore.toFixed(0)} IOPS before the kill: throttled to about ${WRITE_LIMIT}`);
  t.true(acknowledged > blocks, `${acknowledged} writes acknowledged, over ${acked.size} blocks: blocks were written more than once`);

  const second = spawnDaemon(t, ['--config', w.configPath]);
  const c2 = await login(await second.port());
  t.teardown(() => c2.close());
  const fd = openSync(join(w.state, 'a.img'), 'r');
  t.teardown(() => closeSync(fd));
  const viaSession: number[] = [];
  const viaFile: number[] = [];
  const ok = (block: number, got: Buffer): boolean => {
    const last = acked.get(block);
    const pending = inFlight.get(block);
    // Never written: zeroes, unless the write in flight landed.
    const allowed = [last !== undefined ? blockOf(last, block) : Buffer.alloc(BS), ...(pending !== undefined ? [blockOf(pending, block)] : [])];
    return allowed.some((b) => b.equals(got));
  };
  for (let block = 0; block < blocks; block++) {
    const { result, data } = await read(c2, 0, (block * BS) / 512, BS / 512);
    if (result.status !== ScsiStatus.GOOD || !ok(block, data)) viaSession.push(block);
    const raw = Buffer.alloc(BS);
    readSync(fd, raw, 0, BS, block * BS);
    if (!ok(block, raw)) viaFile.push(block);
  }
  t.deepEqual(viaSession.slice(0, 20), [], `${viaSession.length} blocks read through a session without their last acknowledged write`);
  t.deepEqual(viaFile.slice(0, 20), [], `${viaFile.length} blocks of the file without their last acknowledged write`);
  await c2.logout();
  second.kill('SIGTERM');
  t.deepEqual(await second.exited, { code: 0, signal: null });
});
