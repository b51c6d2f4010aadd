// What a QoS-limited volume costs an unlimited neighbour on the same rblkd
// (docs/performance.md "QoS: the unthrottled neighbour"; issue 28's goal: it
// loses < 5% of its IOPS). One rblkd serves two file volumes: `slow`, with
// `qos: { iops: LIMIT }`, and `fast`, unlimited. Each round runs `rblk bench`
// (4 KiB random read, QD32, over tcp; a process of its own) on `fast` alone,
// then again while a second `rblk bench` keeps `slow` at its limit, in the
// order AB in odd rounds and BA in even ones, so the machine's drift weighs
// on both. Around each run it reads /proc/stat (how busy the machine's cores
// were) and rblkd's own CPU (/proc/<pid>/stat), so that a drop can be told
// apart: CPU the cores did not have, or time the neighbour spent waiting.
//   node dist/bench/qos-neighbour.js [--seconds N] [--rounds N] [--limit IOPS] [--reactors N]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { rblkBenchRun } from './rblk-bench-cli.js';
import { startRblkd } from './rblkd-child.js';

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : NaN;
  return Number.isFinite(v) && v >= 0 ? v : fallback;
}

const seconds = option('seconds', 5) || 5;
const rounds = option('rounds', 4) || 4;
const limit = option('limit', 1000) || 1000;
const reactors = option('reactors', 0);
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

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-qos-neighbour-'));
  const config = join(dir, 'rblkd.yaml');
  const socket = join(dir, 'rblkd.ctl');
  for (const v of ['slow', 'fast']) writeFileSync(join(dir, `${v}.img`), Buffer.alloc(64 << 20, 0x11));
  writeFileSync(
    config,
    dump({
      listeners: [{ provider: 'tcp', address: '127.0.0.1', port: 0 }],
      volumes: [
        { name: 'slow', path: join(dir, 'slow.img'), lun: 0, qos: { iops: limit } },
        { name: 'fast', path: join(dir, 'fast.img'), lun: 1 },
      ],
      limits: { queue_depth: 64 },
      state_dir: join(dir, 'state'),
      control: { socket },
      reactors,
    }),
  );
  const d = startRblkd(config, /rblkd ready/);
  try {
    await d.seen;
    const { controlRequest } = await import('../target/daemon/control-client.js');
    const port = ((await controlRequest(socket, 'status')) as { listeners: { port: number }[] }).listeners[0]!.port;
    const pid = d.child.pid!;
    const bench = (volume: string, s: number): Promise<{ iops: number; ops: number }> => rblkBenchRun(port, volume, { rw: 'read', bs: 4096, pattern: 'rand', seconds: s });

    const run = async (beside: boolean): Promise<Run> => {
      // The throttled load starts first and ends last, so that it runs throughout the measured one.
      const slow = beside ? bench('slow', seconds + 3) : null;
      if (beside) await new Promise((r) => setTimeout(r, 1500));
      const m0 = machineCpu();
      const c0 = processCpu(pid);
      const fast = await bench('fast', seconds);
      const m1 = machineCpu();
      const c1 = processCpu(pid);
      const slowIops = slow ? (await slow).iops : null;
      const ios = (fast.iops + (slowIops ?? 0)) * seconds;
      return { fast: fast.iops, slow: slowIops, busy: (100 * (m1.busy - m0.busy)) / (m1.total - m0.total), rblkdUs: (c1 - c0) / ios };
    };

    const rows: string[] = [
      `cores ${availableParallelism()}, reactors ${reactors}, load average before: ${loadavg().map((l) => l.toFixed(2)).join(', ')}; ${seconds} s per run, slow limited to ${limit} IOPS`,
      '',
      '| round | fast alone IOPS | cores busy | fast beside slow IOPS | slow IOPS | cores busy | fast beside ÷ alone | rblkd µs/I/O alone / beside |',
      '|---:|---:|---:|---:|---:|---:|---:|---:|',
    ];
    let alone = 0;
    let beside = 0;
    for (let r = 1; r <= rounds; r++) {
      let a: Run;
      let b: Run;
      if (r % 2 === 1) {
        a = await run(false);
        b = await run(true);
      } else {
        b = await run(true);
        a = await run(false);
      }
      alone += a.fast;
      beside += b.fast;
      rows.push(`| ${r} | ${a.fast.toFixed(0)} | ${a.busy.toFixed(0)}% | ${b.fast.toFixed(0)} | ${b.slow?.toFixed(0) ?? '—'} | ${b.busy.toFixed(0)}% | ${(b.fast / a.fast).toFixed(3)} | ${a.rblkdUs.toFixed(1)} / ${b.rblkdUs.toFixed(1)} |`);
    }
    // The throttled load alone: what rblkd spends on it, against what the same count of unthrottled reads cost it above.
    const s0 = processCpu(pid);
    const w0 = performance.now();
    const slowAlone = await bench('slow', seconds);
    const slowCpu = processCpu(pid) - s0;
    const wall = (performance.now() - w0) * 1000;
    rows.push(
      '',
      `slow alone: ${slowAlone.iops.toFixed(0)} IOPS, rblkd ${(slowCpu / (slowAlone.iops * seconds)).toFixed(1)} µs of CPU per I/O (${((100 * slowCpu) / wall).toFixed(0)}% of a core)`,
      `mean: fast alone ${(alone / rounds).toFixed(0)} IOPS, beside the throttled volume ${(beside / rounds).toFixed(0)} IOPS: it lost ${(100 * (1 - beside / alone)).toFixed(1)}%`,
      `load average after: ${loadavg().map((l) => l.toFixed(2)).join(', ')}`,
    );
    console.log(rows.join('\n'));
  } finally {
    d.child.kill('SIGTERM');
    await d.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
