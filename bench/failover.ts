// Failover benchmark (issue 13): two real rblkd gateways serve one file with
// one identity (the same `uuid`) and a target port group each; one multipath
// session (docs/initiator.md "Multipath") keeps 4 KiB writes outstanding. N
// times, the active gateway is killed with SIGKILL; the bench records the time
// from the kill to the first write completed once the session knew that path
// was down (so on the other path), and from the kill to the session's `path`
// event saying so. The gateway is then started again on its port and the bench
// waits for the session to take it back. At the end every acknowledged write
// is read back, through the session and from the file.
// With --hang the gateway is stopped (SIGSTOP) instead: no FIN, no RST, as a host
// that lost power; only the keep-alive (docs/protocol.md §13) finds it, and it is
// killed once the session has moved. The gateways run with limits.keepalive_ms
// --keepalive-ms (default 1000, what docs/operations.md "Several gateways" advises).
// With --rbd the two gateways serve one RBD image of a throw-away cluster
// (bench/ceph-cluster.ts, Ceph's default watch timeout of 30 s) instead of a
// file: the killed gateway may hold the image's exclusive lock, and the other
// breaks it only after the session's FENCE GATEWAY (docs/backends.md "Fencing
// another gateway"); the read-back is then through the session and `rbd export`.
//   node dist/bench/failover.js [--kills 10] [--queue-depth 8] [--hang] [--rbd] [--keepalive-ms 1000] [--provider tcp|sockets] [--json] [--verbose]
// The reference, measured in the same run: the p50 latency of one 4 KiB write
// before any kill. docs/performance.md "Failover" records the figures.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, type Session, type Volume } from '../initiator/index.js';
import { delay } from '../initiator/wait.js';
import { cephMissing, startCephCluster, type CephCluster } from './ceph-cluster.js';
import { freePort } from './peers/children.js';
import { startRblkd, type RblkdChild } from './rblkd-child.js';


const BLOCK = 4096;
const SIZE = 16 * 1024 * 1024;
const UUID = '2f7d9c1a-3b5e-4a6c-8d0f-1e2a3b4c5d6e';

interface Args {
  kills: number;
  queueDepth: number;
  json: boolean;
  verbose: boolean;
  provider: string;
  hang: boolean;
  rbd: boolean;
  keepaliveMs: number;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { kills: 10, queueDepth: 8, json: false, verbose: false, provider: 'tcp', hang: false, rbd: false, keepaliveMs: 1000 };
  for (let i = 0; i < argv.length; i++) {
    const next = (): number => {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n < 1) throw new RangeError(`${argv[i - 1]} needs a positive integer`);
      return n;
    };
    if (argv[i] === '--kills') a.kills = next();
    else if (argv[i] === '--queue-depth') a.queueDepth = next();
    else if (argv[i] === '--json') a.json = true;
    else if (argv[i] === '--hang') a.hang = true;
    else if (argv[i] === '--rbd') a.rbd = true;
    else if (argv[i] === '--keepalive-ms') a.keepaliveMs = next();
    else if (argv[i] === '--verbose') a.verbose = true;
    else if (argv[i] === '--provider') a.provider = argv[++i];
    else throw new RangeError(`unknown argument ${argv[i]}`);
  }
  return a;
}

function startDaemon(config: string): RblkdChild {
  return startRblkd(config, /rblkd ready/);
}

const IMAGE = 'failover';

/** The one volume both gateways serve: a shared file with one `uuid`, or one RBD image (whose identity is the image's). */
function volumeLine(dir: string, ceph: CephCluster | null): string {
  if (ceph === null) return `  - { name: vol, path: ${join(dir, 'shared.img')}, size: 16MiB, uuid: ${UUID} }`;
  return `  - { name: vol, rbd: { pool: ${ceph.pool}, image: ${IMAGE}, conf: ${ceph.conf} } }`;
}

function gatewayConfig(dir: string, volume: string, name: string, port: number, provider: string, keepaliveMs: number, group: number, state: string, peerState: string): string {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    [
      'listeners:',
      `  - { provider: ${provider}, address: 127.0.0.1, port: ${port} }`,
      'volumes:',
      volume,
      `state_dir: ${join(dir, `state-${name}`)}`,
      `limits: { keepalive_ms: ${keepaliveMs} }`,
      `control: { socket: ${join(dir, `${name}.ctl`)} }`,
      `alua: { group: ${group}, state: ${state}, peers: [ { group: ${group === 1 ? 2 : 1}, state: ${peerState} } ] }`,
      '',
    ].join('\n'),
  );
  return path;
}

interface Completion {
  at: number;
  ms: number;
}

function writeLoad(vol: Volume, queueDepth: number) {
  const done: Completion[] = [];
  const errors: string[] = [];
  const acked = new Map<number, number>();
  let running = true;
  const per = Math.floor(SIZE / BLOCK / queueDepth);
  const worker = async (w: number): Promise<void> => {
    for (let n = 0; running; n++) {
      const block = w * per + (n % per);
      const seed = w * 1_000_003 + n;
      const start = performance.now();
      try {
        await vol.write(block * BLOCK, content(seed));
        const at = performance.now();
        acked.set(block, seed);
        done.push({ at, ms: at - start });
      } catch (e) {
        errors.push((e as Error).message);
        await delay(10);
      }
    }
  };
  const workers = Array.from({ length: queueDepth }, (_, w) => worker(w));
  return {
    done,
    errors,
    acked,
    async stop() {
      running = false;
      await Promise.all(workers);
    },
  };
}

function content(seed: number): Buffer {
  const b = Buffer.alloc(BLOCK);
  for (let i = 0; i < BLOCK; i += 4) b.writeUInt32BE((seed * 2654435761 + i) >>> 0, i);
  return b;
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

const fmt = (ms: number): string => (ms < 10 ? `${ms.toFixed(2)} ms` : `${ms.toFixed(0)} ms`);

/** Resolves when `ok` holds for the session's paths, checked at each `path` event; the time it first held. */
function when(s: Session, ok: () => boolean): Promise<number> {
  return new Promise((resolve) => {
    if (ok()) {
      resolve(performance.now());
      return;
    }
    const on = (): void => {
      if (!ok()) return;
      s.off('path', on);
      resolve(performance.now());
    };
    s.on('path', on);
  });
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const missing = a.rbd ? cephMissing() : null;
  if (missing !== null) throw new Error(`--rbd: ${missing}`);
  const dir = mkdtempSync(join(tmpdir(), 'rblk-failover-'));
  const ceph = a.rbd ? await startCephCluster() : null;
  if (ceph !== null) await ceph.createImage(IMAGE, SIZE);
  else writeFileSync(join(dir, 'shared.img'), Buffer.alloc(0));
  const volume = volumeLine(dir, ceph);
  const ports = [await freePort(), await freePort()];
  const configs = [
    gatewayConfig(dir, volume, 'a', ports[0], a.provider, a.keepaliveMs, 1, 'active-optimized', 'active-non-optimized'),
    gatewayConfig(dir, volume, 'b', ports[1], a.provider, a.keepaliveMs, 2, 'active-non-optimized', 'active-optimized'),
  ];
  const daemons: RblkdChild[] = configs.map(startDaemon);
  let session: Session | null = null;
  try {
    await Promise.all(daemons.map((d) => d.seen));
    // The defaults are what is measured; only the loss timeout is raised so that nothing fails while both could be down.
    session = await connect({ paths: ports.map((port) => ({ address: '127.0.0.1', port })), provider: a.provider, timeouts: { lossMs: 120_000 } });
    const s = session;
    const t0 = performance.now();
    if (a.verbose) s.on('path', (p) => console.log(`  ${(performance.now() - t0).toFixed(1)} ms: path ${p.index} ${p.state} ${p.alua}${p.reason ? ` (${p.reason})` : ''}`));
    const vol = await s.open('vol');
    const load = writeLoad(vol, a.queueDepth);
    await delay(1000);
    const reference = percentile(load.done.map((c) => c.ms), 50);
    const failover: number[] = [];
    const detect: number[] = [];
    for (let k = 0; k < a.kills; k++) {
      const active = s.paths.find((p) => p.state === 'active');
      if (active === undefined) throw new Error('no active path');
      const i = active.index;
      const killedAt = performance.now();
      daemons[i].child.kill(a.hang ? 'SIGSTOP' : 'SIGKILL');
      const downAt = await when(s, () => s.paths[i].state === 'down');
      while (!load.done.some((c) => c.at > downAt)) await delay(1);
      const first = load.done.find((c) => c.at > downAt)!;
      failover.push(first.at - killedAt);
      detect.push(downAt - killedAt);
      if (a.hang) daemons[i].child.kill('SIGKILL');
      if (!a.json) console.log(`${a.hang ? 'hang' : 'kill'} ${k + 1} (path ${i}): path down after ${fmt(downAt - killedAt)}, first write on the other path ${fmt(first.at - killedAt)} after the ${a.hang ? 'stop' : 'kill'}`);
      await daemons[i].exited;
      daemons[i] = startDaemon(configs[i]);
      await daemons[i].seen;
      await when(s, () => s.paths[i].state === 'active' || s.paths[i].state === 'ready');
      await delay(300);
    }
    await load.stop();
    // Every acknowledged write reads back, through the session and from the store (the file, or the image).
    let lost = 0;
    const file = ceph !== null ? await ceph.run('rbd', ['export', `${ceph.pool}/${IMAGE}`, '-']) : readFileSync(join(dir, 'shared.img'));
    for (const [block, seed] of load.acked) {
      const want = content(seed);
      if (!(await vol.read(block * BLOCK, BLOCK)).equals(want)) lost++;
      if (!file.subarray(block * BLOCK, (block + 1) * BLOCK).equals(want)) lost++;
    }
    const summary = {
      kills: a.kills,
      how: a.hang ? 'SIGSTOP' : 'SIGKILL',
      store: a.rbd ? 'rbd' : 'file',
      keepaliveMs: a.keepaliveMs,
      queueDepth: a.queueDepth,
      provider: a.provider,
      failoverP50Ms: Number(percentile(failover, 50).toFixed(1)),
      failoverMaxMs: Number(Math.max(...failover).toFixed(1)),
      detectP50Ms: Number(percentile(detect, 50).toFixed(1)),
      detectMaxMs: Number(Math.max(...detect).toFixed(1)),
      referenceWriteP50Ms: Number(reference.toFixed(2)),
      failoverP50OverReference: Number((percentile(failover, 50) / reference).toFixed(1)),
      failoverP50OverGoal: Number((percentile(failover, 50) / 2000).toFixed(4)),
      writes: load.done.length,
      writeErrors: load.errors.length,
      acknowledgedBlocksChecked: load.acked.size,
      acknowledgedWritesLost: lost,
    };
    if (a.json) console.log(JSON.stringify(summary));
    else {
      console.log(`\n${a.kills} ${a.hang ? 'hangs (SIGSTOP)' : 'kills -9'} of the active gateway (${a.rbd ? 'one RBD image' : 'one file'}, QD ${a.queueDepth} 4 KiB writes, ${a.provider}, keepalive_ms ${a.keepaliveMs}):`);
      const ev = a.hang ? 'stop' : 'kill';
      console.log(`  ${ev} -> first write on the other path: p50 ${fmt(summary.failoverP50Ms)}, max ${fmt(summary.failoverMaxMs)} (goal 2 s: ${summary.failoverP50OverGoal}x)`);
      console.log(`  ${ev} -> path reported down:            p50 ${fmt(summary.detectP50Ms)}, max ${fmt(summary.detectMaxMs)}`);
      console.log(`  reference, one 4 KiB write before any kill: p50 ${fmt(summary.referenceWriteP50Ms)}; failover p50 = ${summary.failoverP50OverReference}x that`);
      console.log(`  writes ${summary.writes}, failed ${summary.writeErrors}; acknowledged blocks checked ${summary.acknowledgedBlocksChecked}, lost ${summary.acknowledgedWritesLost}`);
    }
    if (lost > 0 || load.errors.length > 0) process.exitCode = 1;
  } finally {
    await session?.close();
    for (const d of daemons) {
      if (d.child.exitCode === null && d.child.signalCode === null) {
        d.child.kill('SIGTERM');
        await d.exited;
      }
    }
    await ceph?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
