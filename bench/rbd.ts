// rblk over an RBD volume against `rbd bench` on the same image (issue 13's
// goals: 4 KiB random at QD32 >= 0.8x, 128 KiB sequential >= 0.9x). Starts a
// throw-away cluster (bench/ceph-cluster.ts: one memstore OSD, so the OSD's
// own cost dominates and both sides share it), fills the image so that reads
// hit written objects, takes the OSD past its fast first random-write passes
// (unmeasured), then runs each workload with `rbd bench` and with
// `rblk bench` through a real rblkd over the tcp provider, once with READ and
// WRITE on the target's native fast path and once through JavaScript (a second
// rblkd on the same image with fast_path off).
//   node dist/bench/rbd.js [--seconds N]
// Prints a Markdown table, then where the CPU went: per I/O, the machine's busy
// time (/proc/stat), the OSD's and rblkd's (/proc/PID/stat), and the rest (the
// client process, the monitor, interrupts). Figures on a shared machine are
// indicative only.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { RBD_DEFAULT_TIMEOUT_SECONDS } from '../target/backend/rbd/rbd-kind.js';
import { startCephCluster, startRbdGateway, type CephCluster } from './ceph-cluster.js';
import { rblkBench as cliBench, rblkBenchRun } from './rblk-bench-cli.js';

const IMAGE_BYTES = 256 * 1024 * 1024;
const USAGE = `usage: node dist/bench/rbd.js [--seconds N]

Starts a throw-away Ceph cluster (one monitor, one memstore OSD), fills a
256 MiB image, writes 4 KiB at random over it until the OSD is past its fast
first passes (unmeasured), and runs 4 KiB random and 128 KiB sequential reads and writes at
QD32 with \`rbd bench\` (librbd directly) and with \`rblk bench\` through rblkd
over tcp on the same image, with the target's native fast path and without
(a second rblkd with fast_path off, on the same image). Both sides use the
same ceph.conf and the same librbd settings (no client cache, rblkd's default
timeouts). The reference is measured before and after each rblk run; the
ratio is against their mean.
  --seconds N   rblk bench runtime per workload (default 5)
`;
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const secondsAt = process.argv.indexOf('--seconds');
const seconds = secondsAt < 0 ? 5 : Number(process.argv[secondsAt + 1]);
if (!Number.isFinite(seconds) || seconds <= 0) {
  process.stderr.write(`bench/rbd: --seconds needs a positive number\n${USAGE}`);
  process.exit(2);
}
// The settings rblkd gives librbd besides the ceph.conf (native/src/rbd/rbd-image.cc,
// RbdImage::Open, at the default timeout of target/backend/rbd/rbd-kind.ts): the
// reference gets the same, so both librbd clients are configured alike. With a
// timeout, the objecter arms a timer per operation, a cost rblkd pays too.
const RBD_TIMEOUT = String(RBD_DEFAULT_TIMEOUT_SECONDS);
const LIBRBD_SETTINGS = ['--rbd-cache=false', '--client-mount-timeout', RBD_TIMEOUT, '--rados-mon-op-timeout', RBD_TIMEOUT, '--rados-osd-op-timeout', RBD_TIMEOUT];

interface Workload {
  name: string;
  rw: 'read' | 'write';
  bs: number;
  pattern: 'rand' | 'seq';
}
const WORKLOADS: Workload[] = [
  { name: '4 KiB random read', rw: 'read', bs: 4096, pattern: 'rand' },
  { name: '4 KiB random write', rw: 'write', bs: 4096, pattern: 'rand' },
  { name: '128 KiB sequential read', rw: 'read', bs: 128 * 1024, pattern: 'seq' },
  { name: '128 KiB sequential write', rw: 'write', bs: 128 * 1024, pattern: 'seq' },
];

const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

/** The machine's busy time so far, in clock ticks (/proc/stat: all but idle and iowait). */
function machineBusy(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return f.reduce((a, b) => a + b, 0) - f[3] - f[4];
}

/** A process's user and system time so far, in clock ticks; 0 once it is gone. */
function processTicks(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return Number(f[11]) + Number(f[12]);
  } catch {
    return 0;
  }
}

interface Cpu {
  /** Per I/O, µs: the machine, then each of the watched processes. */
  busyUs: number;
  processUs: number[];
}

/** Runs `run` and charges the CPU it took, per operation, to the machine and to each of `pids`. */
async function accounted<R extends { ops: number }>(pids: number[], run: () => Promise<R>): Promise<R & { cpu: Cpu }> {
  const busy0 = machineBusy();
  const p0 = pids.map(processTicks);
  const r = await run();
  const per = (ticks: number): number => (ticks * TICK_US) / Math.max(1, r.ops);
  return { ...r, cpu: { busyUs: per(machineBusy() - busy0), processUs: pids.map((p, i) => per(processTicks(p) - p0[i])) } };
}

async function rbdBenchRun(c: CephCluster, w: Workload): Promise<{ iops: number; ops: number }> {
  // rbd bench runs a fixed total: about `seconds` worth at a rough rate, then its own ops/sec.
  const total = w.bs === 4096 ? 64 * 1024 * 1024 : IMAGE_BYTES;
  const out = (
    // rbd_cache off: rblkd runs librbd without its client cache (docs/backends.md
    // "Caching and durability"), so the reference must too, or its writes are acknowledged from RAM.
    await c.run('rbd', [...LIBRBD_SETTINGS, 'bench', '--io-type', w.rw, '--io-size', String(w.bs), '--io-threads', '32', '--io-pattern', w.pattern, '--io-total', String(total), `${c.pool}/bench`])
  ).toString();
  const m = /elapsed:\s*([\d.]+)\s+ops:\s*(\d+)\s+ops\/sec:\s*([\d.]+)/.exec(out);
  if (m === null) throw new Error(`rbd bench printed no summary:\n${out}`);
  return { iops: Number(m[3]), ops: Number(m[2]) };
}

async function main(): Promise<void> {
  const c = await startCephCluster();
  const dir = mkdtempSync(join(tmpdir(), 'rblk-rbd-bench-'));
  const daemons: ReturnType<typeof spawn>[] = [];
  try {
    await c.createImage('bench', IMAGE_BYTES);
    await c.run('rbd', ['bench', '--io-type', 'write', '--io-size', '4M', '--io-threads', '16', '--io-pattern', 'seq', '--io-total', String(IMAGE_BYTES), `${c.pool}/bench`]);
    // Then random 4 KiB writes, unmeasured, until the OSD is past its fast first passes: memstore keeps an object
    // as a list of the pieces written to it, and the first random-write passes over freshly filled objects
    // run up to twice as fast as every later one (measured: 5076, 3660, 2465, 2414, 2205, 2484 writes/s in
    // six 64 MiB passes of `rbd bench` in a row). Without this, whichever side runs first is measured
    // on a faster OSD than the other. It still drifts after this, less: hence a reference on either side.
    await c.run('rbd', [...LIBRBD_SETTINGS, 'bench', '--io-type', 'write', '--io-size', '4096', '--io-threads', '32', '--io-pattern', 'rand', '--io-total', String(3 * 64 * 1024 * 1024), `${c.pool}/bench`]);
    // Two gateways on the image (one volume per image per rblkd): the target's
    // native fast path on, and off (`fast_path: off`), measured in the same run.
    const gateway = async (name: string, fastPath: boolean): Promise<number> => {
      // With the fast path on, a memory volume beside the image: the same rblk path without Ceph,
      // what this machine's CPUs leave for rblk itself.
      const g = await startRbdGateway(c, dir, name, { image: 'bench', fastPath, ramBytes: fastPath ? IMAGE_BYTES : undefined });
      daemons.push(g.child);
      return g.port;
    };
    const port = await gateway('fast', true);
    const osd = Number(execFileSync('pgrep', ['-f', `ceph-osd .*${c.conf}`]).toString().trim().split('\n')[0]);
    const rblkd = daemons[0].pid ?? 0;
    const jsPort = await gateway('js', false);
    const rows: string[] = [
      `load average before: ${loadavg().map((l) => l.toFixed(2)).join(', ')}`,
      '',
      '| workload (QD32) | rbd bench IOPS, before / after | rblk on rbd IOPS, fast path | ratio to their mean | rblk on rbd IOPS, fast path off | ratio | rblk on a memory volume IOPS |',
      '|---|---|---|---|---|---|---|',
    ];
    const rblkBench = (volume: string, w: Workload, at = port): Promise<number> => cliBench(at, volume, { ...w, seconds });
    const cpuRows: string[] = [
      '| workload (QD32) | `rbd bench`: machine busy | its OSD | the rest (rbd bench, monitor, interrupts) | rblk on rbd: machine busy | its OSD | rblkd | the rest (the client, monitor, interrupts) |',
      '|---|---|---|---|---|---|---|---|',
    ];
    const us = (x: number): string => x.toFixed(1);
    for (const w of WORKLOADS) {
      // The machine's load drifts (it is shared): a reference on either side of the rblk run.
      const { iops: before, cpu: refCpu } = await accounted([osd], () => rbdBenchRun(c, w));
      const { iops: ours, cpu: ourCpu } = await accounted([osd, rblkd], () => rblkBenchRun(port, 'bench', { ...w, seconds }));
      cpuRows.push(
        `| ${w.name} | ${us(refCpu.busyUs)} | ${us(refCpu.processUs[0])} | ${us(refCpu.busyUs - refCpu.processUs[0])} | ${us(ourCpu.busyUs)} | ${us(ourCpu.processUs[0])} | ${us(ourCpu.processUs[1])} | ${us(ourCpu.busyUs - ourCpu.processUs[0] - ourCpu.processUs[1])} |`,
      );
      const js = await rblkBench('bench', w, jsPort);
      const after = (await rbdBenchRun(c, w)).iops;
      const ram = await rblkBench('ram', w);
      const ref = (before + after) / 2;
      rows.push(
        `| ${w.name} | ${Math.round(before)} / ${Math.round(after)} | ${Math.round(ours)} | ${(ours / ref).toFixed(2)} | ${Math.round(js)} | ${(js / ref).toFixed(2)} | ${Math.round(ram)} |`,
      );
      process.stderr.write(`${rows[rows.length - 1]}\n`);
    }
    rows.push('', `load average after: ${loadavg().map((l) => l.toFixed(2)).join(', ')}`, '', 'CPU per I/O, µs (the fast-path run and the `rbd bench` run before it):', '', ...cpuRows);
    process.stdout.write(`${rows.join('\n')}\n`);
  } finally {
    for (const d of daemons) d.kill('SIGTERM');
    await c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`bench/rbd: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
