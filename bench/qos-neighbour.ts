// What a QoS-limited volume costs an unlimited neighbour on the same rblkd
// (docs/performance.md "QoS: the unthrottled neighbour"; issue 28's goal: it
// loses < 5% of its IOPS), with the fast path's throttled commands waiting in
// JavaScript (RBLK_QOS_PARK=0, as before) and natively (parked,
// native/src/core/fast-path-qos.cc), in the same run. Each mode is one rblkd
// serving two file volumes: `slow`, with `qos: { iops: LIMIT }`, and `fast`,
// unlimited; both daemons run throughout, the idle one costing nothing. Each
// round runs `rblk bench` (4 KiB random read, QD32, over tcp; a process of
// its own) on `fast` alone, then again while a second `rblk bench` keeps
// `slow` at its limit, per mode, in the order AB in odd rounds and BA in even
// ones (modes and runs alike), so that the machine's drift weighs on both.
// Around each run it reads /proc/stat (how busy the machine's cores were)
// and rblkd's own CPU (/proc/<pid>/stat), so that a drop can be told apart:
// CPU the cores did not have, or time the neighbour spent waiting. Last, per
// mode, the throttled load alone: rblkd's CPU per throttled command.
// `--fast-qd` sets the neighbour's queue depth (default 32). At QD32 the neighbour alone
// keeps a 2-core machine's cores busy, so its loss beside the throttled load is mostly
// the core time that load's client and rblkd take; at a depth that leaves the cores
// idle (QD1, QD4), what is left is the interference itself: latency the throttled
// volume adds to its neighbour's commands.
// `--pin` pins each rblkd (all its threads) to core 0 and every `rblk bench` to
// core 1, so that the scheduler's placement, which moved the same "alone" run
// by up to half between rounds, is the same in every run; what the neighbour
// then loses is rblkd's core time and latency spent on the throttled volume,
// plus the throttled client's share of the clients' core.
// `--slow-iscsi` drives the throttled volume with iscsi-perf (libiscsi, in C,
// QD32 random 4 KiB reads) through an iSCSI listener of the same rblkd
// instead of a second `rblk bench`: a client that costs its core a few µs per
// command rather than tens, so that what the neighbour loses is rblkd's part.
// The throttled commands then wait in the iSCSI front end's QoS (JavaScript),
// in both modes.
//   node dist/bench/qos-neighbour.js [--seconds N] [--rounds N] [--limit IOPS] [--reactors N] [--fast-qd N] [--pin [--slow-core 0|1]] [--slow-iscsi]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { freePort } from './peers/children.js';
import { runIscsiPerf } from './peers/iscsi-perf.js';
import { rblkBenchRun } from './rblk-bench-cli.js';
import { startRblkd, type RblkdChild } from './rblkd-child.js';

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : NaN;
  return Number.isFinite(v) && v >= 0 ? v : fallback;
}

const seconds = option('seconds', 5) || 5;
const rounds = option('rounds', 4) || 4;
const limit = option('limit', 1000) || 1000;
const reactors = option('reactors', 0);
const fastQd = option('fast-qd', 32) || 32;
const pin = process.argv.includes('--pin');
// With --pin, the core of the throttled volume's client: 1 (beside the neighbour's client, the default) or 0 (beside rblkd).
const slowCore = option('slow-core', 1);
const slowIscsi = process.argv.includes('--slow-iscsi');
const TARGET = 'iqn.2026-11.io.rblk:target'; // rblkd's default target_name
const TICK_US = 1e6 / 100; // CLK_TCK is 100 on Linux

/** All cores' busy and total jiffies (the `cpu` line of /proc/stat). */
function machineCpu(): { busy: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3]! + (f[4] ?? 0); // idle + iowait
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** A process's user + system CPU in µs. */
function processCpu(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * TICK_US;
}

interface Run {
  fast: number;
  slow: number | null;
  /** Percent of all cores busy during the run. */
  busy: number;
  /** rblkd's CPU per I/O of both volumes, µs. */
  rblkdUs: number;
}

interface Mode {
  name: 'js' | 'native';
  d: RblkdChild;
  port: number;
  alone: number;
  beside: number;
  /** Its iSCSI listener's port (--slow-iscsi), for iscsi-perf. */
  iscsiPort: number;
}

/** iscsi-perf against the throttled volume (LUN 0), QD32 random 4 KiB reads for `s` whole seconds. */
async function iscsiPerf(port: number, s: number): Promise<{ iops: number; ops: number }> {
  const r = await runIscsiPerf({ url: `iscsi://127.0.0.1:${port}/${TARGET}/0`, blocks: 8, blockBytes: 512, queueDepth: 32, seconds: s, random: true, ...(pin ? { cpus: String(slowCore) } : {}) });
  return { iops: r.iops, ops: r.ios };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-qos-neighbour-'));
  const modes: Mode[] = [];
  try {
    const { controlRequest } = await import('../target/daemon/control-client.js');
    for (const name of ['js', 'native'] as const) {
      const config = join(dir, `rblkd-${name}.yaml`);
      const socket = join(dir, `rblkd-${name}.ctl`);
      const iscsiPort = slowIscsi ? await freePort() : 0;
      // Files of its own: rblkd locks what it serves.
      for (const v of ['slow', 'fast']) writeFileSync(join(dir, `${v}-${name}.img`), Buffer.alloc(64 << 20, 0x11));
      writeFileSync(
        config,
        dump({
          listeners: [{ provider: 'tcp', address: '127.0.0.1', port: 0 }, ...(slowIscsi ? [{ protocol: 'iscsi', address: '127.0.0.1', port: iscsiPort }] : [])],
          volumes: [
            { name: 'slow', path: join(dir, `slow-${name}.img`), lun: 0, qos: { iops: limit } },
            { name: 'fast', path: join(dir, `fast-${name}.img`), lun: 1 },
          ],
          limits: { queue_depth: 64 },
          state_dir: join(dir, `state-${name}`),
          control: { socket },
          reactors,
        }),
      );
      // js: the fast path leaves a command without QoS room to JavaScript, which waits on a timer (before parking).
      const d = startRblkd(config, /rblkd ready/, name === 'js' ? { RBLK_QOS_PARK: '0' } : {});
      modes.push({ name, d, port: 0, alone: 0, beside: 0, iscsiPort });
      await d.seen;
      if (pin) execFileSync('taskset', ['-a', '-cp', '0', String(d.child.pid)], { stdio: 'ignore' });
      modes[modes.length - 1]!.port = ((await controlRequest(socket, 'status')) as { listeners: { port: number }[] }).listeners[0]!.port;
    }
    const bench = (m: Mode, volume: string, s: number): Promise<{ iops: number; ops: number }> =>
      volume === 'slow' && slowIscsi ? iscsiPerf(m.iscsiPort, s) :
      rblkBenchRun(m.port, volume, { rw: 'read', bs: 4096, pattern: 'rand', seconds: s, qd: volume === 'fast' ? fastQd : 32, ...(pin ? { cpus: volume === 'fast' ? '1' : String(slowCore) } : {}) });

    const run = async (m: Mode, beside: boolean): Promise<Run> => {
      const pid = m.d.child.pid!;
      // The throttled load starts first and ends last, so that it runs throughout the measured one.
      const slow = beside ? bench(m, 'slow', seconds + 3) : null;
      if (beside) await new Promise((r) => setTimeout(r, 1500));
      const m0 = machineCpu();
      const c0 = processCpu(pid);
      const fast = await bench(m, 'fast', seconds);
      const m1 = machineCpu();
      const c1 = processCpu(pid);
      const slowIops = slow ? (await slow).iops : null;
      const ios = (fast.iops + (slowIops ?? 0)) * seconds;
      return { fast: fast.iops, slow: slowIops, busy: (100 * (m1.busy - m0.busy)) / (m1.total - m0.total), rblkdUs: (c1 - c0) / ios };
    };

    const rows: string[] = [
      `cores ${availableParallelism()}, reactors ${reactors}, load average before: ${loadavg().map((l) => l.toFixed(2)).join(', ')}; ${seconds} s per run, slow limited to ${limit} IOPS (QD32), fast at QD${fastQd}${pin ? `; rblkd pinned to core 0, the neighbour's client to core 1, the throttled one's to core ${slowCore}` : ''}${slowIscsi ? '; the throttled load is iscsi-perf through an iSCSI listener' : ''}`,
      'mode js: a throttled command waits in JavaScript (RBLK_QOS_PARK=0); native: it waits parked on the fast path',
      '',
      '| round | mode | fast alone IOPS | cores busy | fast beside slow IOPS | slow IOPS | cores busy | fast beside ÷ alone | rblkd µs/I/O alone / beside |',
      '|---:|---|---:|---:|---:|---:|---:|---:|---:|',
    ];
    for (let r = 1; r <= rounds; r++) {
      for (const m of r % 2 === 1 ? modes : [...modes].reverse()) {
        let a: Run;
        let b: Run;
        if (r % 2 === 1) {
          a = await run(m, false);
          b = await run(m, true);
        } else {
          b = await run(m, true);
          a = await run(m, false);
        }
        m.alone += a.fast;
        m.beside += b.fast;
        rows.push(`| ${r} | ${m.name} | ${a.fast.toFixed(0)} | ${a.busy.toFixed(0)}% | ${b.fast.toFixed(0)} | ${b.slow?.toFixed(0) ?? '—'} | ${b.busy.toFixed(0)}% | ${(b.fast / a.fast).toFixed(3)} | ${a.rblkdUs.toFixed(1)} / ${b.rblkdUs.toFixed(1)} |`);
      }
    }
    rows.push('');
    for (const m of modes) {
      // The throttled load alone: what rblkd spends per throttled command.
      const pid = m.d.child.pid!;
      const s0 = processCpu(pid);
      const w0 = performance.now();
      const slowAlone = await bench(m, 'slow', seconds);
      const slowCpu = processCpu(pid) - s0;
      const wall = (performance.now() - w0) * 1000;
      rows.push(
        `${m.name}: slow alone ${slowAlone.iops.toFixed(0)} IOPS, rblkd ${(slowCpu / (slowAlone.iops * seconds)).toFixed(1)} µs of CPU per throttled I/O (${((100 * slowCpu) / wall).toFixed(0)}% of a core); ` +
          `fast alone ${(m.alone / rounds).toFixed(0)} IOPS, beside the throttled volume ${(m.beside / rounds).toFixed(0)} IOPS: it lost ${(100 * (1 - m.beside / m.alone)).toFixed(1)}%`,
      );
    }
    rows.push(`load average after: ${loadavg().map((l) => l.toFixed(2)).join(', ')}`);
    console.log(rows.join('\n'));
  } finally {
    for (const m of modes) {
      m.d.child.kill('SIGTERM');
      await m.d.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
