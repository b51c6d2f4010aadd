// A gateway frozen while it holds a write, and a newer write of the same block
// through the other gateway (docs/initiator.md "Multipath", docs/backends.md
// "Several gateways and stale writes"). Two real rblkd gateways serve one image
// of a real throw-away cluster; one multipath library session names both.
//
// The stall is made deterministic: gateway A's own connections to the Ceph
// monitor and OSD are cut with an nftables table of the test's (packets
// dropped, the connections stay open), a write is sent through the session and
// the test waits until A's socket to the OSD holds its bytes unacknowledged
// (`ss` Send-Q): A has taken the write and librbd has sent it, and it has not
// landed. Then A is frozen (SIGSTOP), the session fails over to B (keep-alive),
// the write is reissued there and a newer one follows; the cut is healed while
// A is still frozen, the kernel retransmits A's held write to the OSD (Send-Q
// back to 0), and A is thawed (SIGCONT).
//
// Before the session reissues the write through B it asks B to fence A (TSK_MGMT
// FENCE GATEWAY, docs/protocol.md §14.1): B has the cluster blocklist the client
// A published for its target port group, so A's held write is refused whether A
// owned the exclusive lock, waited for it, or the image has no lock at all.
//
// The cluster's ceph.conf shortens osd_client_watch_timeout to 5 s (and pings
// watches every second, objecter_tick_interval 1, so a healthy watch never
// lapses between pings): B breaks the lock of the frozen A in seconds, not 30.
// Root and nft are needed for the cut, Ceph and rblk_rbd.node for the rest;
// without them the tests skip and say why.
import test, { type ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { connect, RblkError, type Session, type Volume } from '../../initiator/index.js';
import type { PathInfo } from '../../initiator/paths.js';
import { nativeFeatures } from '../../native/binding.js';
import { cephMissing, startCephCluster, type CephCluster } from '../helpers/ceph-cluster.js';
import { partitionUnavailable } from '../initiator/helpers/partition.js';
import { baseConfig, spawnDaemon, workdir, type DaemonProcess } from './helpers/daemon-process.js';
import { until } from '../../bench/kit/wait.js';

const exec = promisify(execFile);
const MiB = 1024 * 1024;
const BLOCK = 4096;
/** Block X of the task: any block will do. */
const X = 16 * BLOCK;
const NFT = ['/usr/sbin/nft', '/sbin/nft', '/usr/bin/nft'].find((p) => existsSync(p));
const reason =
  cephMissing() ??
  (nativeFeatures().rbd ? null : 'rblk_rbd.node was not built (apt-get install librbd-dev, then rebuild)') ??
  partitionUnavailable ??
  (['/usr/bin/ss', '/bin/ss', '/usr/sbin/ss', '/sbin/ss'].some((p) => existsSync(p)) ? null : 'ss (iproute2) is not installed');
const rbdTest = reason === null ? test.serial : test.skip;
if (reason !== null) test.skip(`rbd gateway fence: ${reason}`, () => undefined);

let cluster: CephCluster | undefined;
test.before(async () => {
  if (reason !== null) return;
  // Both legal in ceph 16 (`ceph-conf -D`): osd_client_watch_timeout (int, OSD side, default 30) and
  // objecter_tick_interval (float, client side, default 5: librados pings its watches once a tick).
  cluster = await startCephCluster({ conf: ['osd client watch timeout = 5', 'objecter tick interval = 1'] });
});
test.after.always(async () => {
  await cluster?.stop();
});
function ceph(): CephCluster {
  if (cluster === undefined) throw new Error('the cluster did not start');
  return cluster;
}

interface Gateway {
  readonly d: DaemonProcess;
  readonly port: number;
}

/** rblkd serving the image as volume `vol`, in target port group `group`; the keep-alive finds a frozen gateway in about a second. */
async function gateway(t: ExecutionContext, image: string, group: number, state: string, peer: string, timeoutS = 5): Promise<Gateway> {
  const w = workdir(t);
  w.writeConfig(
    baseConfig(w, [{ name: 'vol', thin: true, rbd: { pool: ceph().pool, image, conf: ceph().conf, timeout_s: timeoutS } }], {
      alua: { group, state, peers: [{ group: group === 1 ? 2 : 1, state: peer }] },
      limits: { keepalive_ms: 1000 },
    }),
  );
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  await d.waitForLine(/rblkd ready/);
  return { d, port };
}

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

interface Sock {
  readonly port: number;
  readonly sendQ: number;
}

/** The TCP connections `pid` opened itself (to the Ceph monitor and OSD): their local ports and send queues. */
async function cephSockets(pid: number, listenPort: number): Promise<Sock[]> {
  const { stdout } = await exec('ss', ['-Htnp', 'state', 'established']);
  const out: Sock[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.includes(`pid=${pid},`)) continue;
    // Recv-Q Send-Q Local:Port Peer:Port Process
    const [, sendQ, local] = line.trim().split(/\s+/);
    const port = Number(local?.split(':').pop());
    if (port !== listenPort) out.push({ port, sendQ: Number(sendQ) });
  }
  return out;
}

interface Cut {
  heal(): Promise<void>;
}

/** Drops every packet of the given local ports on loopback, both ways; the table goes in teardown. */
async function cut(t: ExecutionContext, ports: number[]): Promise<Cut> {
  const table = `rblk_fence_${randomBytes(4).toString('hex')}`;
  const nft = (args: string[]): Promise<unknown> => exec(NFT ?? 'nft', args);
  await nft(['add', 'table', 'inet', table]);
  t.teardown(async () => {
    await nft(['delete', 'table', 'inet', table]);
  });
  await nft(['add', 'chain', 'inet', table, 'out', '{ type filter hook output priority 0 ; }']);
  const set = `{ ${ports.join(', ')} }`;
  await nft(['add', 'rule', 'inet', table, 'out', 'oifname', 'lo', 'tcp', 'sport', set, 'drop']);
  await nft(['add', 'rule', 'inet', table, 'out', 'oifname', 'lo', 'tcp', 'dport', set, 'drop']);
  return { heal: async () => void (await nft(['flush', 'chain', 'inet', table, 'out'])) };
}

const data = (v: number): Buffer => Buffer.alloc(BLOCK, v);

async function lockers(image: string): Promise<string[]> {
  const out = (await ceph().run('rbd', ['lock', 'ls', '--format', 'json', `${ceph().pool}/${image}`])).toString();
  // ceph 16 prints an array of {id, locker, address}.
  return (JSON.parse(out) as { address: string }[]).map((l) => l.address);
}

async function blocklist(): Promise<string> {
  return (await ceph().run('ceph', ['osd', 'blocklist', 'ls'])).toString();
}

async function exported(image: string): Promise<Buffer> {
  return (await ceph().run('rbd', ['export', `${ceph().pool}/${image}`, '-'])).subarray(X, X + BLOCK);
}

interface Stalled {
  readonly a: Gateway;
  readonly b: Gateway;
  readonly session: Session;
  readonly vol: Volume;
  /** From the session seeing A gone to the reissued write acknowledged through B. */
  readonly stallMs: number;
  readonly lockerBefore: string[];
  readonly lockerAfter: string[];
  readonly blocklistBefore: string;
  readonly blocklistAfter: string;
  readonly heal: () => Promise<void>;
}

/**
 * Writes 1 to block X through A, then 2 (held in A, as above) and 3 through B
 * after the failover. Returns with A still frozen and its Ceph connections still cut.
 */
async function stallA(t: ExecutionContext, image: string, features: string): Promise<Stalled> {
  await ceph().run('rbd', ['create', '--size', `${4 * MiB}B`, '--image-feature', features, `${ceph().pool}/${image}`]);
  const a = await gateway(t, image, 1, 'active-optimized', 'active-non-optimized');
  const b = await gateway(t, image, 2, 'active-non-optimized', 'active-optimized');
  // The command timeout is far away: the keep-alive alone moves the write.
  const session = await connect({
    paths: [a.port, b.port].map((port) => ({ address: '127.0.0.1', port })),
    provider: 'tcp',
    initiatorName: `iqn.2026-12.io.rblk:${image}`,
    timeouts: { commandMs: 600_000, lossMs: 600_000 },
  });
  t.teardown(() => session.close());
  t.like(session.paths, [{ state: 'active', group: 1 }, { state: 'ready', group: 2 }]);
  const v = await session.open('vol');
  await v.write(X, data(1));
  const blocklistBefore = await blocklist();
  const lockerBefore = features.includes('exclusive-lock') ? await lockers(image) : [];

  const pid = a.d.child.pid!;
  const socks = await cephSockets(pid, a.port);
  t.true(socks.length > 0, "A's connections to the cluster are found");
  const c = await cut(t, socks.map((s) => s.port));
  const late = v.write(X, data(2));
  await until(async () => (await cephSockets(pid, a.port)).some((s) => s.sendQ >= BLOCK), "the write's bytes wait, unacknowledged, in A's socket to the OSD", { ms: 90_000, everyMs: 20 });
  a.d.kill('SIGSTOP');
  t.teardown(() => {
    if (a.d.child.exitCode === null) a.d.kill('SIGCONT');
  });
  await pathsWhere(session, (p) => p[0].state === 'down' && p[1].state === 'active');
  const failedOver = Date.now();
  await late;
  const stallMs = Date.now() - failedOver;
  await v.write(X, data(3));
  t.true((await v.read(X, BLOCK)).equals(data(3)), 'the newer write reads back through B');
  return {
    a,
    b,
    session,
    vol: v,
    stallMs,
    lockerBefore,
    lockerAfter: features.includes('exclusive-lock') ? await lockers(image) : [],
    blocklistBefore,
    blocklistAfter: await blocklist(),
    async heal() {
      await c.heal();
      await until(async () => (await cephSockets(pid, a.port)).every((s) => s.sendQ === 0), "A's held write reached the OSD (A's send queues empty)", { ms: 90_000, everyMs: 20 });
    },
  };
}

rbdTest(
  'rbd, exclusive-lock (the default features): B fences the frozen A (FENCE GATEWAY) and takes its lock; A\'s held write, delivered late, is refused and the newer data stays; A says so, ends its connections and serves again through a new client',
  async (t) => {
    t.timeout(240_000);
    const image = 'locked';
    const st = await stallA(t, image, 'layering,exclusive-lock,object-map,fast-diff,deep-flatten');
    t.log(`from failover to the first write acknowledged through B: ${st.stallMs} ms`);
    await st.b.d.waitForLine(/FENCE GATEWAY of target port group 1 on LUN 0: the gateway of group 1 \(client [^)]+\) is fenced out of the store/);
    t.is(st.lockerBefore.length, 1, 'A held the exclusive lock before it froze');
    t.is(st.lockerAfter.length, 1);
    t.not(st.lockerAfter[0], st.lockerBefore[0], 'B holds the lock now');
    t.true(st.blocklistAfter.includes(st.lockerBefore[0]!), `A's client is blocklisted: ${st.blocklistAfter}`);

    const mark = st.a.d.lines.length;
    await st.heal();
    t.true((await exported(image)).equals(data(3)), "rbd export: A's late write did not land");
    st.a.d.kill('SIGCONT');
    await st.a.d.waitForLine(/the Ceph cluster blocklisted this gateway \(EBLOCKLISTED\)/, mark);
    t.is(st.a.d.child.exitCode, null, 'A runs on');
    // A ends the connections that could hold commands from before the fence, then serves the volume again through a new client.
    await st.a.d.waitForLine(/volume vol: fenced out of its store; ended the \d+ connection\(s\) that could use it/, mark);
    const fresh = (await st.a.d.waitForLine(/volume vol: serving again, as a new client of the store \(([^)]+)\)/, mark))[1] ?? '';
    t.false(st.blocklistAfter.includes(fresh), `the new client ${fresh} is not the blocklisted one`);
    t.true((await exported(image)).equals(data(3)), "rbd export: A's held write did not land after A came back either");

    // A fresh session to A alone reads the newer data and writes through A's new client.
    const direct = await connect({ address: '127.0.0.1', port: st.a.port, provider: 'tcp', initiatorName: 'iqn.2026-12.io.rblk:again' });
    t.teardown(() => direct.close());
    const dv = await direct.open('vol');
    t.true((await dv.read(X, BLOCK)).equals(data(3)), 'through the recovered A: the newer data');
    await dv.write(X + BLOCK, data(4));
    // The reservation record is read and watched through the new client too: a key registered
    // through the recovered A is what B reports.
    await dv.reservations.register(0xa11cen);
    await direct.close();
    const keys = await st.vol.reservations.readKeys();
    t.true(keys.keys.includes(0xa11cen), `B sees the key registered through the recovered A: ${keys.keys.map(String).join(', ')}`);
    t.true((await st.vol.read(X + BLOCK, BLOCK)).equals(data(4)), "A's new write reads back through the session");

    st.a.d.kill('SIGTERM');
    const exit = await st.a.d.exited;
    t.is(exit.code, 0, `A stopped on SIGTERM and flushed cleanly through its new client:\n${st.a.d.lines.slice(mark).join('\n')}`);
    t.true((await st.vol.read(X, BLOCK)).equals(data(3)), 'through B');
    t.true((await exported(image)).equals(data(3)), 'rbd export');
  },
);

rbdTest('rbd without exclusive-lock: FENCE GATEWAY has A blocklisted all the same, and its held write is refused; rblkd warns at open', async (t) => {
  t.timeout(240_000);
  const image = 'unlocked';
  const st = await stallA(t, image, 'layering');
  for (const g of [st.a, st.b]) await g.d.waitForLine(/rbd image rbd\/unlocked has no exclusive-lock feature.*rbd feature enable rbd\/unlocked exclusive-lock/);
  t.not(st.blocklistAfter, st.blocklistBefore, `A was blocklisted: ${st.blocklistAfter}`);
  const mark = st.a.d.lines.length;
  await st.heal();
  t.true((await exported(image)).equals(data(3)), "rbd export: A's late write did not land");
  st.a.d.kill('SIGCONT');
  await st.a.d.waitForLine(/the Ceph cluster blocklisted this gateway \(EBLOCKLISTED\)/, mark);
  st.a.d.kill('SIGTERM');
  t.is((await st.a.d.exited).signal, null, 'A stops without a crash');
  t.true((await st.vol.read(X, BLOCK)).equals(data(3)), 'through B: the newer data');
  t.true((await exported(image)).equals(data(3)), 'rbd export: the same');
});

// A gateway that does NOT own the lock when it freezes (until FENCE GATEWAY, a
// gap: the write landed late). Both port groups are active/optimized and a
// second initiator writes through B, so B holds the lock; the session's write
// to A waits in A's librbd for the lock (A's lock request, about 1 KiB, waits in
// its socket to the OSD: that is what the test waits for). A freezes, the
// session fails over and has B fence A before it reissues the write. No lock
// changes hands, so only that fence stops A: thawed, A asks B for the lock
// again, and without the blocklist B would hand it over (librbd's cooperative
// transition) and A's old write would land over the newer one. timeout_s is 60,
// longer than the freeze: with 5, A's librbd operations time out
// (rados_osd_op_timeout) the moment A thaws and the write fails by accident.
rbdTest('rbd, exclusive-lock: a gateway frozen with a write waiting for a lock another gateway holds is fenced by FENCE GATEWAY, and the write never lands', async (t) => {
  t.timeout(240_000);
  const image = 'notowner';
  await ceph().run('rbd', ['create', '--size', `${4 * MiB}B`, `${ceph().pool}/${image}`]);
  const a = await gateway(t, image, 1, 'active-optimized', 'active-optimized', 60);
  const b = await gateway(t, image, 2, 'active-optimized', 'active-optimized', 60);
  const session = await connect({
    paths: [a.port, b.port].map((port) => ({ address: '127.0.0.1', port })),
    provider: 'tcp',
    initiatorName: 'iqn.2026-12.io.rblk:notowner',
    timeouts: { commandMs: 600_000, lossMs: 600_000 },
  });
  t.teardown(() => session.close());
  const v = await session.open('vol');
  await v.write(X, data(1));
  const ownerA = await lockers(image);
  const other = await connect({ address: '127.0.0.1', port: b.port, provider: 'tcp', initiatorName: 'iqn.2026-12.io.rblk:other' });
  t.teardown(() => other.close());
  await (await other.open('vol')).write(0, data(9));
  t.notDeepEqual(await lockers(image), ownerA, 'B took the lock from A (handed over)');
  const pid = a.d.child.pid!;
  const c = await cut(t, (await cephSockets(pid, a.port)).map((s) => s.port));
  const before = await blocklist();
  const late = v.write(X, data(2));
  await until(async () => (await cephSockets(pid, a.port)).some((s) => s.sendQ >= 1024), "A's lock request waits in its socket to the OSD", { ms: 90_000, everyMs: 20 });
  a.d.kill('SIGSTOP');
  t.teardown(() => {
    if (a.d.child.exitCode === null) a.d.kill('SIGCONT');
  });
  await pathsWhere(session, (p) => p[0].state === 'down' && p[1].state === 'active');
  await late;
  await v.write(X, data(3));
  const after = await blocklist();
  t.not(after, before, `A's client was blocklisted: ${after}`);
  const mark = a.d.lines.length;
  await c.heal();
  a.d.kill('SIGCONT');
  // A's write fails (EBLOCKLISTED) instead of taking the lock back; A says so and fences its volume.
  await a.d.waitForLine(/the Ceph cluster blocklisted this gateway \(EBLOCKLISTED\)/, mark);
  t.notDeepEqual(await lockers(image), ownerA, 'A did not get the lock back');
  a.d.kill('SIGTERM');
  t.is((await a.d.exited).signal, null, 'A stops without a crash');
  t.true((await v.read(X, BLOCK)).equals(data(3)), 'the newer data stays (through B)');
  t.true((await exported(image)).equals(data(3)), 'and in rbd export');
});
