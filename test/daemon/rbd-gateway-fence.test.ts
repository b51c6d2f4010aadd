// EXPERIMENT (being written): a frozen gateway's late write vs a newer write through the other gateway.
import test, { type ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { connect, type Session } from '../../initiator/index.js';
import type { PathInfo } from '../../initiator/paths.js';
import { nativeFeatures } from '../../native/binding.js';
import { cephMissing, startCephCluster, type CephCluster } from '../helpers/ceph-cluster.js';
import { baseConfig, spawnDaemon, workdir, type DaemonProcess } from './helpers/daemon-process.js';

const MiB = 1024 * 1024;
const BLOCK = 4096;
const X = 16 * BLOCK;
const reason = cephMissing() ?? (nativeFeatures().rbd ? null : 'rblk_rbd.node was not built (apt-get install librbd-dev, then rebuild)');
const rbdTest = reason === null ? test.serial : test.skip;
if (reason !== null) test.skip(`rbd gateway fence: ${reason}`, () => undefined);

let cluster: CephCluster | undefined;
test.before(async () => {
  if (reason !== null) return;
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
  d: DaemonProcess;
  port: number;
}

async function gateway(t: ExecutionContext, image: string, group: number, state: string, peer: string): Promise<Gateway> {
  const w = workdir(t);
  w.writeConfig(
    baseConfig(w, [{ name: 'vol', thin: true, rbd: { pool: ceph().pool, image, conf: ceph().conf, timeout_s: 5 } }], {
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
    if (ok(s.paths)) return resolve(s.paths);
    const on = (): void => {
      if (!ok(s.paths)) return;
      s.off('path', on);
      resolve(s.paths);
    };
    s.on('path', on);
  });
}

const data = (v: number): Buffer => Buffer.alloc(BLOCK, v);


const exec = promisify(execFile);

/** The local ports of `pid`'s TCP connections that it opened itself (to the Ceph monitor and OSD), and their send queues. */
async function cephSockets(pid: number, listenPort: number): Promise<{ port: number; sendQ: number }[]> {
  const { stdout } = await exec('ss', ['-Htnp', 'state', 'established']);
  const out: { port: number; sendQ: number }[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.includes(`pid=${pid},`)) continue;
    // Recv-Q Send-Q Local:Port Peer:Port Process
    const [, sendQ, local] = line.trim().split(/\s+/);
    const port = Number(local!.split(':').pop());
    if (port !== listenPort) out.push({ port, sendQ: Number(sendQ) });
  }
  return out;
}

async function until(what: string, cond: () => Promise<boolean>): Promise<void> {
  const guard = Date.now() + 60_000;
  while (!(await cond())) {
    if (Date.now() > guard) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function scenario(t: ExecutionContext, image: string, features: string): Promise<void> {
  t.timeout(180_000);
  await ceph().run('rbd', ['create', '--size', `${4 * MiB}B`, '--image-feature', features, `${ceph().pool}/${image}`]);
  t.log((await ceph().run('rbd', ['info', `${ceph().pool}/${image}`])).toString());
  const a = await gateway(t, image, 1, 'active-optimized', 'active-non-optimized');
  const b = await gateway(t, image, 2, 'active-non-optimized', 'active-optimized');
  const s = await connect({ paths: [a.port, b.port].map((port) => ({ address: '127.0.0.1', port })), provider: 'tcp', initiatorName: `iqn.2026-12.io.rblk:${image}`, timeouts: { commandMs: 600_000, lossMs: 600_000 } });
  t.teardown(() => s.close());
  const v = await s.open('vol');
  await v.write(X, data(1));
  t.log((await ceph().run('rbd', ['lock', 'ls', `${ceph().pool}/${image}`])).toString(), (await ceph().run('rbd', ['status', `${ceph().pool}/${image}`])).toString());
  const pid = a.d.child.pid!;
  const socks = await cephSockets(pid, a.port);
  t.log(`A's ceph sockets ${JSON.stringify(socks)}`);
  const table = `rblk_fence_${randomBytes(4).toString('hex')}`;
  const nft = (args: string[]): Promise<unknown> => exec('/usr/sbin/nft', args);
  await nft(['add', 'table', 'inet', table]);
  t.teardown(() => nft(['delete', 'table', 'inet', table]).then(() => undefined, () => undefined));
  await nft(['add', 'chain', 'inet', table, 'out', '{ type filter hook output priority 0 ; }']);
  const ports = `{ ${socks.map((x) => x.port).join(', ')} }`;
  await nft(['add', 'rule', 'inet', table, 'out', 'oifname', 'lo', 'tcp', 'sport', ports, 'drop']);
  await nft(['add', 'rule', 'inet', table, 'out', 'oifname', 'lo', 'tcp', 'dport', ports, 'drop']);
  const late = v.write(X, data(2));
  await until('the write is in A\'s socket to the OSD', async () => (await cephSockets(pid, a.port)).some((x) => x.sendQ >= BLOCK));
  t.log(`A's ceph sockets ${JSON.stringify(await cephSockets(pid, a.port))}`);
  a.d.kill('SIGSTOP');
  const t0 = Date.now();
  await pathsWhere(s, (p) => p[0].state === 'down' && p[1].state === 'active');
  const t1 = Date.now();
  await late;
  const t2 = Date.now();
  await v.write(X, data(3));
  const t3 = Date.now();
  t.log(`failover ${t1 - t0} ms, reissued write acked ${t2 - t1} ms later, newer write ${t3 - t2} ms`);
  t.log((await ceph().run('ceph', ['osd', 'blocklist', 'ls'])).toString());
  await nft(['flush', 'chain', 'inet', table, 'out']);
  await until('A\'s queued write reached the OSD', async () => (await cephSockets(pid, a.port)).every((x) => x.sendQ === 0));
  const t4 = Date.now();
  t.log(`healed, drained in ${t4 - t3} ms; image now ${(await ceph().run('rbd', ['export', `${ceph().pool}/${image}`, '-']))[X]}`);
  const mark = a.d.lines.length;
  a.d.kill('SIGCONT');
  await new Promise((r) => setTimeout(r, 4000));
  a.d.kill('SIGTERM');
  const exit = await a.d.exited;
  t.log(`A exit ${String(exit.code)} ${String(exit.signal)}\n${a.d.lines.slice(mark).join('\n')}`);
  const got = await v.read(X, BLOCK);
  const img = await ceph().run('rbd', ['export', `${ceph().pool}/${image}`, '-']);
  t.log(`through B: ${got[0]}, rbd export: ${img[X]}`);
  t.pass();
}

rbdTest('no exclusive-lock', (t) => scenario(t, 'nolock', 'layering'));
rbdTest('default features', (t) => scenario(t, 'deflt', 'layering,exclusive-lock,object-map,fast-diff,deep-flatten'));
