// Multipath (docs/initiator.md "Multipath", docs/operations.md "Several
// gateways"): two real rblkd processes serve one file with one identity (the
// same `uuid`) and a target port group each; one session names both. Checked:
// kill -9 and SIGTERM of the active gateway under a write load (no error, every
// acknowledged write reads back, from the session and from the file), an ALUA
// state change by reload moving I/O, a path coming back, and a gateway of
// another device refused. No timing is asserted: waits are for events.
import test, { type ExecutionContext } from 'ava';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type RegisteredBuffer, type Session, type Volume } from '../../initiator/index.js';
import type { PathInfo } from '../../initiator/paths.js';
import { nativeFeatures } from '../../native/binding.js';
import { cephMissing, startCephCluster } from '../helpers/ceph-cluster.js';
import { execFileSync } from 'node:child_process';
import { controlRequest } from '../../target/daemon/control-client.js';
import { run } from '../iscsi/portal-fixture.js';
import { closedPort, rblk } from '../cli/helpers/cli.js';
import { baseConfig, spawnDaemon, workdir, type DaemonProcess, type Workdir } from './helpers/daemon-process.js';
import { pattern } from '../../bench/kit/pattern.js';
import { until } from '../../bench/kit/wait.js';

/** A bound on a hang (failover included), inside the tests' own timeouts. */
const GUARD = { ms: 90_000 };

const MiB = 1024 * 1024;
const SIZE = 8 * MiB;
const BLOCK = 4096;
const UUID = '5b0c7a2e-1d4f-4e8a-9c3b-7f6e5d4c3b2a';

interface Gateway {
  d: DaemonProcess;
  port: number;
  w: Workdir;
}

interface Alua {
  group: number;
  state: string;
  peers: { group: number; state: string }[];
}

function aluaFor(group: number, state: string, peerState: string): Alua {
  return { group, state, peers: [{ group: group === 1 ? 2 : 1, state: peerState }] };
}

/** rblkd serving `file` as volume `vol` with the shared identity; `port` fixed for a restart. */
async function gateway(t: ExecutionContext, file: string, alua: Alua, port = 0, uuid = UUID, w = workdir(t), extra: Record<string, unknown> = {}): Promise<Gateway> {
  const config = baseConfig(w, [{ name: 'vol', path: file, size: SIZE, uuid }], { alua, ...extra });
  (config.listeners as { port: number }[])[0].port = port;
  w.writeConfig(config);
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const bound = await d.port();
  await d.waitForLine(/rblkd ready/);
  return { d, port: bound, w };
}

function reconfigure(g: Gateway, file: string, alua: Alua): void {
  const config = baseConfig(g.w, [{ name: 'vol', path: file, size: SIZE, uuid: UUID }], { alua });
  (config.listeners as { port: number }[])[0].port = g.port;
  g.w.writeConfig(config);
}

async function session(t: ExecutionContext, ports: number[]): Promise<Session> {
  const s = await connect({ paths: ports.map((port) => ({ address: '127.0.0.1', port })), provider: 'tcp', initiatorName: 'iqn.2026-11.io.rblk:mp', pathCheckMs: 200, timeouts: { lossMs: 20_000 } });
  t.teardown(() => s.close());
  return s;
}

/** Resolves when the session's paths satisfy `ok`, checked at each `path` event. */
function pathsWhere(s: Session, ok: (p: PathInfo[]) => boolean): Promise<PathInfo[]> {
  return new Promise((resolve) => {
    if (ok(s.paths)) {
      resolve(s.paths);
      return;
    }
    const on = (): void => {
      if (!ok(s.paths)) return;
      s.off('path', on);
      resolve(s.paths);
    };
    s.on('path', on);
  });
}

/**
 * Writers, each on its own blocks, write until stop() and keep the last
 * acknowledged content of every block; an error of any write is kept too.
 */
function writeLoad(v: Volume, writers = 8, registered: RegisteredBuffer | null = null) {
  const acked = new Map<number, Buffer>();
  const errors: unknown[] = [];
  let count = 0;
  let stopped = false;
  const blocks = SIZE / BLOCK;
  const perWriter = Math.floor(blocks / writers);
  const running = Array.from({ length: writers }, async (_, w) => {
    for (let n = 0; !stopped; n++) {
      const block = w * perWriter + (n % perWriter);
      const data = pattern(BLOCK, w * 1_000_003 + n);
      try {
        if (registered === null) await v.write(block * BLOCK, data);
        else {
          // Zero-copy: the writer's slice of the session's registered memory carries it.
          const slot = registered.buffer.subarray(w * BLOCK, (w + 1) * BLOCK);
          data.copy(slot);
          await v.write(block * BLOCK, slot);
        }
        acked.set(block, data);
        count++;
      } catch (e) {
        errors.push(e);
        return;
      }
    }
  });
  return {
    acked,
    errors,
    get count() {
      return count;
    },
    async stop() {
      stopped = true;
      await Promise.all(running);
    },
  };
}

async function verify(t: ExecutionContext, v: Volume, file: string, acked: Map<number, Buffer>): Promise<void> {
  let bad = 0;
  const onDisk = readFileSync(file);
  for (const [block, data] of acked) {
    if (!(await v.read(block * BLOCK, BLOCK)).equals(data)) bad++;
    if (!onDisk.subarray(block * BLOCK, (block + 1) * BLOCK).equals(data)) bad++;
  }
  t.is(bad, 0, `every one of ${acked.size} acknowledged blocks reads back, through the session and from the file`);
}

function sharedFile(t: ExecutionContext): string {
  const w = workdir(t);
  const file = join(w.dir, 'shared.img');
  writeFileSync(file, Buffer.alloc(0));
  return file;
}

test.serial('two gateways of one file: both paths verified, I/O on the active/optimized one; kill -9 of it under writes loses no acknowledged write and surfaces no error; it comes back and takes the I/O again', async (t) => {
  const file = sharedFile(t);
  const a = await gateway(t, file, aluaFor(1, 'active-optimized', 'active-non-optimized'));
  const b = await gateway(t, file, aluaFor(2, 'active-non-optimized', 'active-optimized'));
  const s = await session(t, [b.port, a.port]);
  // Named second, a is still chosen: it is the active/optimized group.
  t.like(s.paths, [
    { index: 0, port: b.port, state: 'ready', alua: 'active-non-optimized', group: 2 },
    { index: 1, port: a.port, state: 'active', alua: 'active-optimized', group: 1 },
  ]);
  const v = await s.open('vol');
  const load = writeLoad(v);
  await until(() => load.count >= 200, 'load.count >= 200', GUARD);
  a.d.kill('SIGKILL');
  await a.d.exited;
  const atKill = load.count;
  await until(() => load.count >= atKill + 300 || load.errors.length > 0, 'load.count >= atKill + 300 || load.errors.length > 0', GUARD);
  t.like(s.paths, [{ state: 'active' }, { state: 'down' }]);
  await load.stop();
  t.deepEqual(load.errors, [], 'no write failed');
  await verify(t, v, file, load.acked);

  // The gateway comes back on its port: the re-check verifies it and I/O returns to it.
  const again = await gateway(t, file, aluaFor(1, 'active-optimized', 'active-non-optimized'), a.port, UUID, a.w);
  await pathsWhere(s, (p) => p[1].state === 'active');
  const load2 = writeLoad(v, 4);
  await until(() => load2.count >= 100, 'load2.count >= 100', GUARD);
  // b goes: the writes continue, so they were on the gateway that came back.
  b.d.kill('SIGKILL');
  await b.d.exited;
  const atKill2 = load2.count;
  await until(() => load2.count >= atKill2 + 100 || load2.errors.length > 0, 'load2.count >= atKill2 + 100 || load2.errors.length > 0', GUARD);
  await load2.stop();
  t.deepEqual(load2.errors, []);
  await verify(t, v, file, load2.acked);
  again.d.kill('SIGTERM');
  await again.d.exited;
});

test.serial('registered (zero-copy) buffers: kill -9 of the active gateway under writes from them loses no acknowledged write and surfaces no error; the buffer carries I/O on the other path', async (t) => {
  const file = sharedFile(t);
  const a = await gateway(t, file, aluaFor(1, 'active-optimized', 'active-non-optimized'));
  const b = await gateway(t, file, aluaFor(2, 'active-non-optimized', 'active-optimized'));
  const s = await session(t, [a.port, b.port]);
  const v = await s.open('vol');
  const writers = 8;
  const memory = s.allocate(writers * BLOCK);
  t.teardown(() => memory.release());
  const load = writeLoad(v, writers, memory);
  await until(() => load.count >= 200, 'load.count >= 200', GUARD);
  a.d.kill('SIGKILL');
  await a.d.exited;
  const atKill = load.count;
  await until(() => load.count >= atKill + 300 || load.errors.length > 0, 'load.count >= atKill + 300 || load.errors.length > 0', GUARD);
  await load.stop();
  t.deepEqual(load.errors, [], 'no write failed');
  t.true(memory.valid, 'the registered buffer outlived the gateway');
  t.is(memory.buffer.length, writers * BLOCK, 'its memory was never detached');
  await verify(t, v, file, load.acked);
  b.d.kill('SIGTERM');
  await b.d.exited;
});

test.serial('a gateway down when the session logs in is one path missing, not a failed login; when it starts, it is verified and takes the I/O', async (t) => {
  const file = sharedFile(t);
  const aPort = await closedPort();
  const b = await gateway(t, file, aluaFor(2, 'active-non-optimized', 'active-optimized'));
  const s = await session(t, [aPort, b.port]);
  t.like(s.paths, [{ state: 'down' }, { state: 'active' }]);
  const v = await s.open('vol');
  const load = writeLoad(v, 4);
  await until(() => load.count >= 100, 'load.count >= 100', GUARD);
  const a = await gateway(t, file, aluaFor(1, 'active-optimized', 'active-non-optimized'), aPort);
  await pathsWhere(s, (p) => p[0].state === 'active' && p[0].alua === 'active-optimized');
  // b goes away: writes go on, so they run through a.
  b.d.kill('SIGKILL');
  await b.d.exited;
  const atKill = load.count;
  await until(() => load.count >= atKill + 100 || load.errors.length > 0, 'load.count >= atKill + 100 || load.errors.length > 0', GUARD);
  await load.stop();
  t.deepEqual(load.errors, []);
  await verify(t, v, file, load.acked);
  a.d.kill('SIGTERM');
  await a.d.exited;
});

test('no gateway answering at login is LOGIN_FAILED, as for one address', async (t) => {
  const ports = [await closedPort(), await closedPort()];
  const e = await t.throwsAsync(connect({ paths: ports.map((port) => ({ address: '127.0.0.1', port })), provider: 'tcp', timeouts: { connectMs: 2000 } }));
  t.is((e as { code?: string } | undefined)?.code, 'LOGIN_FAILED');
});

test.serial('a gateway that hangs (SIGSTOP: no FIN, no RST, like a dead host) under writes is found by the keep-alive, not the command timeout; the writes move', async (t) => {
  const file = sharedFile(t);
  // keepalive_ms 1000: sessions negotiate a 500 ms keep-alive (docs/protocol.md §13).
  const fast = { limits: { keepalive_ms: 1000 } };
  const a = await gateway(t, file, aluaFor(1, 'active-optimized', 'active-non-optimized'), 0, UUID, workdir(t), fast);
  const b = await gateway(t, file, aluaFor(2, 'active-non-optimized', 'active-optimized'), 0, UUID, workdir(t), fast);
  // A command timeout far beyond the test's own guard: only the keep-alive can find the hang in time.
  const s = await connect({ paths: [a.port, b.port].map((port) => ({ address: '127.0.0.1', port })), provider: 'tcp', initiatorName: 'iqn.2026-11.io.rblk:mp-hang', timeouts: { commandMs: 600_000, lossMs: 600_000 } });
  t.teardown(() => s.close());
  const v = await s.open('vol');
  const load = writeLoad(v);
  await until(() => load.count >= 200, 'load.count >= 200', GUARD);
  a.d.kill('SIGSTOP');
  await pathsWhere(s, (p) => p[0].state === 'down' && p[1].state === 'active');
  t.regex(s.paths[0].reason ?? '', /KEEPALIVE_RSP/);
  const atHang = load.count;
  await until(() => load.count >= atHang + 300 || load.errors.length > 0, 'load.count >= atHang + 300 || load.errors.length > 0', GUARD);
  // Killed while stopped: the writes it had taken in never run (docs/initiator.md "Multipath" on a gateway that comes back from a hang).
  a.d.kill('SIGKILL');
  await a.d.exited;
  await load.stop();
  t.deepEqual(load.errors, []);
  await verify(t, v, file, load.acked);
});

test.serial('SIGTERM (a drain) of the active gateway under writes: the I/O moves, no error, no acknowledged write lost', async (t) => {
  const file = sharedFile(t);
  const a = await gateway(t, file, aluaFor(1, 'active-optimized', 'active-optimized'));
  const b = await gateway(t, file, aluaFor(2, 'active-optimized', 'active-optimized'));
  const s = await session(t, [a.port, b.port]);
  t.like(s.paths, [{ state: 'active' }, { state: 'ready' }]);
  const v = await s.open('vol');
  const load = writeLoad(v);
  await until(() => load.count >= 200, 'load.count >= 200', GUARD);
  a.d.kill('SIGTERM');
  t.is((await a.d.exited).code, 0, 'the drained gateway exits cleanly');
  const atStop = load.count;
  await until(() => load.count >= atStop + 300 || load.errors.length > 0, 'load.count >= atStop + 300 || load.errors.length > 0', GUARD);
  await load.stop();
  t.deepEqual(load.errors, []);
  t.like(s.paths, [{ state: 'down' }, { state: 'active' }]);
  await verify(t, v, file, load.acked);
});

test.serial('an ALUA change by reload (SIGHUP): the active gateway goes standby, 2A/06 and 04/0B move the I/O to the peer; back to active/optimized moves it back', async (t) => {
  const file = sharedFile(t);
  const a = await gateway(t, file, aluaFor(1, 'active-optimized', 'active-non-optimized'));
  const b = await gateway(t, file, aluaFor(2, 'active-non-optimized', 'active-optimized'));
  const s = await session(t, [a.port, b.port]);
  const attentions: string[] = [];
  s.on('unitAttention', (_lun, sense) => attentions.push(`${sense.key}/${sense.asc.toString(16)}/${sense.ascq.toString(16)}`));
  const v = await s.open('vol');
  const load = writeLoad(v);
  await until(() => load.count >= 100, 'load.count >= 100', GUARD);
  reconfigure(a, file, aluaFor(1, 'standby', 'active-optimized'));
  let mark = a.d.lines.length;
  a.d.kill('SIGHUP');
  await a.d.waitForLine(/target port group 1 is standby/, mark);
  t.deepEqual(((await controlRequest(join(a.w.dir, 'rblkd.ctl'), 'status')) as { alua: unknown }).alua, {
    group: 1,
    state: 'standby',
    peers: [{ group: 2, state: 'active-optimized' }],
  });
  await pathsWhere(s, (p) => p[0].alua === 'standby' && p[1].state === 'active');
  // The reload raised ASYMMETRIC ACCESS STATE CHANGED (06 2A/06) for the session's nexus.
  await until(() => attentions.includes('6/2a/6'), 'attentions.includes("6/2a/6")', GUARD);
  const atReload = load.count;
  // A standby port refuses every write (04/0B): these went to b.
  await until(() => load.count >= atReload + 200 || load.errors.length > 0, 'load.count >= atReload + 200 || load.errors.length > 0', GUARD);
  t.deepEqual(load.errors, []);

  reconfigure(a, file, aluaFor(1, 'active-optimized', 'active-non-optimized'));
  mark = a.d.lines.length;
  a.d.kill('SIGHUP');
  await a.d.waitForLine(/target port group 1 is active-optimized/, mark);
  await pathsWhere(s, (p) => p[0].state === 'active' && p[0].alua === 'active-optimized');
  const back = load.count;
  await until(() => load.count >= back + 100 || load.errors.length > 0, 'load.count >= back + 100 || load.errors.length > 0', GUARD);
  await load.stop();
  t.deepEqual(load.errors, []);
  await verify(t, v, file, load.acked);
});

test.serial('a gateway that serves another device (VPD 83h differs) is rejected; the session runs on the others', async (t) => {
  const file = sharedFile(t);
  const other = sharedFile(t);
  const a = await gateway(t, file, aluaFor(1, 'active-optimized', 'active-non-optimized'));
  const c = await gateway(t, other, aluaFor(2, 'active-optimized', 'active-non-optimized'), 0, '0e9a8b7c-6d5e-4f3a-8b1c-2d3e4f5a6b7c');
  const s = await session(t, [a.port, c.port]);
  t.like(s.paths, [{ state: 'active' }, { state: 'rejected' }]);
  t.regex(s.paths[1].reason ?? '', /another device/);
  const v = await s.open('vol');
  await v.write(0, pattern(BLOCK, 7));
  t.true((await v.read(0, BLOCK)).equals(pattern(BLOCK, 7)));
  t.true(readFileSync(file).subarray(0, BLOCK).equals(pattern(BLOCK, 7)));
  t.false(readFileSync(other).subarray(0, BLOCK).equals(pattern(BLOCK, 7)));
});

test.serial('rblk info with two addresses shows both paths and their states, in text and JSON', async (t) => {
  const file = sharedFile(t);
  const a = await gateway(t, file, aluaFor(1, 'active-optimized', 'standby'));
  const b = await gateway(t, file, aluaFor(2, 'standby', 'active-optimized'));
  const url = `rblk://127.0.0.1:${b.port},127.0.0.1:${a.port}/vol`;
  const r = await rblk(['info', url, '--provider', 'tcp', '--json']);
  t.is(r.code, 0, r.stderr);
  const doc = JSON.parse(r.out) as { name: string; paths: PathInfo[] };
  t.is(doc.name, 'vol');
  t.deepEqual(doc.paths, [
    { index: 0, address: '127.0.0.1', port: b.port, state: 'ready', alua: 'standby', group: 2 },
    { index: 1, address: '127.0.0.1', port: a.port, state: 'active', alua: 'active-optimized', group: 1 },
  ]);
  const text = await rblk(['info', url, '--provider', 'tcp']);
  t.is(text.code, 0, text.stderr);
  t.regex(text.out, new RegExp(`^path 0: +127\\.0\\.0\\.1:${b.port} ready, ALUA standby \\(group 2\\)$`, 'm'));
  t.regex(text.out, new RegExp(`^path 1: +127\\.0\\.0\\.1:${a.port} active, ALUA active-optimized \\(group 1\\)$`, 'm'));
});

// The same over an RBD image, whose identity every gateway derives from the image (no uuid written).
const rbdReason = cephMissing() ?? (nativeFeatures().rbd ? null : 'rblk_rbd.node was not built (apt-get install librbd-dev, then rebuild)');
if (rbdReason !== null) test.skip(`multipath over rbd: ${rbdReason}`, () => undefined);
(rbdReason === null ? test.serial : test.skip)('rbd: two gateways of one image, kill -9 of the active one under writes: no error, every acknowledged write reads back', async (t) => {
  // A guard against a hang only: the cluster and two gateways take a while on a loaded machine.
  t.timeout(180_000);
  const cluster = await startCephCluster();
  t.teardown(() => cluster.stop());
  await cluster.createImage('mp', SIZE);
  const rbdGateway = async (alua: Alua): Promise<Gateway> => {
    const w = workdir(t);
    const config = baseConfig(w, [{ name: 'vol', thin: true, rbd: { pool: cluster.pool, image: 'mp', conf: cluster.conf, timeout_s: 5 } }], { alua });
    w.writeConfig(config);
    const d = spawnDaemon(t, ['--config', w.configPath]);
    const port = await d.port();
    await d.waitForLine(/rblkd ready/);
    return { d, port, w };
  };
  const a = await rbdGateway(aluaFor(1, 'active-optimized', 'active-non-optimized'));
  const b = await rbdGateway(aluaFor(2, 'active-non-optimized', 'active-optimized'));
  const s = await session(t, [a.port, b.port]);
  t.like(s.paths, [{ state: 'active', group: 1 }, { state: 'ready', group: 2 }]);
  const v = await s.open('vol');
  const load = writeLoad(v, 4);
  await until(() => load.count >= 100, 'load.count >= 100', GUARD);
  a.d.kill('SIGKILL');
  await a.d.exited;
  const atKill = load.count;
  await until(() => load.count >= atKill + 100 || load.errors.length > 0, 'load.count >= atKill + 100 || load.errors.length > 0', GUARD);
  await load.stop();
  t.deepEqual(load.errors, []);
  t.like(s.paths, [{ state: 'down' }, { state: 'active' }]);
  let bad = 0;
  for (const [block, data] of load.acked) if (!(await v.read(block * BLOCK, BLOCK)).equals(data)) bad++;
  t.is(bad, 0, `every one of ${load.acked.size} acknowledged blocks reads back through the surviving gateway`);
  // And straight from the image, past every gateway.
  const image = await cluster.run('rbd', ['export', `${cluster.pool}/mp`, '-']);
  let badImage = 0;
  for (const [block, data] of load.acked) if (!image.subarray(block * BLOCK, (block + 1) * BLOCK).equals(data)) badImage++;
  t.is(badImage, 0, 'and from rbd export');
});

// A real iSCSI initiator reads the ALUA bits: libiscsi's iscsi-inq decodes INQUIRY TPGS and
// the target port designators of VPD 83h, and a standby port refuses its login's TEST UNIT READY
// with 04/0B, as SPC-4 5.15.2.4.4 has it (libiscsi's full connect gives up there).
const hasInq = ((): boolean => {
  try {
    execFileSync('sh', ['-c', 'command -v iscsi-inq'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (!hasInq) test.skip('ALUA through iscsi-inq: iscsi-inq (libiscsi-bin) is not installed', () => undefined);
(hasInq ? test.serial : test.skip)('iscsi-inq over an iSCSI listener: TPGS 1, target port group and relative port designators; standby answers TEST UNIT READY 04/0B', async (t) => {
  const w = workdir(t);
  const file = join(w.dir, 'v.img');
  const write = (state: string): void =>
    w.writeConfig(baseConfig(w, [{ name: 'vol', path: file, size: SIZE, uuid: UUID }], { alua: aluaFor(3, state, 'active-optimized'), listeners: [{ protocol: 'iscsi', address: '127.0.0.1', port: 0 }] }));
  write('active-non-optimized');
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.iscsiPort();
  await d.waitForLine(/rblkd ready/);
  const url = `iscsi://127.0.0.1:${port}/iqn.2026-11.io.rblk:target/0`;
  const std = await run('iscsi-inq', ['-i', 'iqn.2026-11.io.rblk:alua', url]);
  t.is(std.code, 0, std.stderr);
  t.regex(std.stdout, /^TPGS:1$/m);
  const ids = await run('iscsi-inq', ['-i', 'iqn.2026-11.io.rblk:alua', '-e', '1', '-c', '131', url]);
  t.is(ids.code, 0, ids.stderr);
  t.regex(ids.stdout, /Association:\(1\) TARGET_PORT\nDesignator Type:\(5\) TARGET_PORT_GROUP/);
  t.regex(ids.stdout, /Association:\(1\) TARGET_PORT\nDesignator Type:\(4\) RELATIVE_TARGET_PORT/);
  write('standby');
  const mark = d.lines.length;
  d.kill('SIGHUP');
  await d.waitForLine(/target port group 3 is standby/, mark);
  const standby = await run('iscsi-inq', ['-i', 'iqn.2026-11.io.rblk:alua', url]);
  t.not(standby.code, 0);
  t.regex(standby.stdout + standby.stderr, /NOT READY.*0x040b/);
});
