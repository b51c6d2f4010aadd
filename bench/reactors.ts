// Reactor threads on and off in one run (docs/target.md "Reactors";
// docs/performance.md "Reactor threads"). Three rblkd serve the same O_DIRECT
// file: `reactors: 0` (the reference: the fast path on the JS thread),
// `reactors: 1` and `reactors: 2`. `rblk bench` (4 KiB random read, QD32,
// over tcp) runs against each in turns, ABC then CBA, with 1 and with 2
// sessions at once; around each run the CPU of every rblkd thread is read
// from /proc/<pid>/task/<tid>/stat, so the table shows the JS thread's and the
// reactors' share per I/O, and IOPS as a ratio to reactors: 0 in the same run.
//   node dist/bench/reactors.js [--seconds N]
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { rblkBench } from './rblk-bench-cli.js';
import { startRblkd, type RblkdChild } from './rblkd-child.js';

const seconds = Number(process.argv[process.argv.indexOf('--seconds') + 1] ?? 4) || 4;
const TICK_US = 1e6 / 100; // CLK_TCK is 100 on Linux

interface ThreadCpu {
  name: string;
  user: number; // µs
  system: number;
}

function threads(pid: number): Map<number, ThreadCpu> {
  const out = new Map<number, ThreadCpu>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(tid), { name, user: Number(f[11]) * TICK_US, system: Number(f[12]) * TICK_US });
    } catch {
      // the thread ended
    }
  }
  return out;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-reactors-bench-'));
  const daemons: { reactors: number; d: RblkdChild; port: number }[] = [];
  try {
    const image = join(dir, 'vol.img');
    writeFileSync(image, Buffer.alloc(256 << 20, 0x11));
    for (const reactors of [0, 1, 2]) {
      const config = join(dir, `r${reactors}.yaml`);
      writeFileSync(
        config,
        dump({
          listeners: [{ provider: 'tcp', address: '127.0.0.1', port: 0 }],
          volumes: [{ name: 'vol', path: image, direct: true, uuid: '9b6d2c1e-0000-4000-8000-00000000000a' }],
          limits: { queue_depth: 64 },
          state_dir: join(dir, `state${reactors}`),
          control: { socket: join(dir, `r${reactors}.ctl`) },
          reactors,
        }),
      );
      const d = startRblkd(config, /listening tcp 127\.0\.0\.1:(\d+)/);
      await d.seen;
      daemons.push({ reactors, d, port: 0 });
    }
    // The ports, from each daemon's control socket.
    const { controlRequest } = await import('../target/daemon/control-client.js');
    for (const x of daemons) {
      const st = (await controlRequest(join(dir, `r${x.reactors}.ctl`), 'status')) as { listeners: { port: number }[] };
      x.port = st.listeners[0].port;
    }
    const bench = (port: number): Promise<number> => rblkBench(port, 'vol', { rw: 'read', bs: 4096, pattern: 'rand', seconds });
    const rows: string[] = [
      `cores ${availableParallelism()}, load average before: ${loadavg().map((l) => l.toFixed(2)).join(', ')}; ${seconds} s per run`,
      '',
      '| sessions | reactors | pass | IOPS | ÷ reactors 0 | JS thread user+sys µs/I/O | reactor threads user+sys µs/I/O | rblkd user µs/I/O | rblkd system µs/I/O |',
      '|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ];
    for (const sessions of [1, 2]) {
      for (const [pass, order] of [[1, [0, 1, 2]], [2, [2, 1, 0]]] as const) {
        const got = new Map<number, string[]>();
        const iopsOf = new Map<number, number>();
        for (const r of order) {
          const x = daemons.find((y) => y.reactors === r)!;
          const pid = x.d.child.pid!;
          const before = threads(pid);
          const iops = (await Promise.all(Array.from({ length: sessions }, () => bench(x.port)))).reduce((a, b) => a + b, 0);
          const after = threads(pid);
          const ios = iops * seconds;
          let js = 0;
          let reactor = 0;
          let user = 0;
          let system = 0;
          for (const [tid, a] of after) {
            const b = before.get(tid) ?? { name: a.name, user: 0, system: 0 };
            const du = a.user - b.user;
            const ds = a.system - b.system;
            user += du;
            system += ds;
            if (tid === pid) js += du + ds;
            // native/src/core/reactor.cc names its threads rblk-reactor-N.
            if (a.name.startsWith('rblk-reactor')) reactor += du + ds;
          }
          iopsOf.set(r, iops);
          got.set(r, [String(sessions), String(r), String(pass), iops.toFixed(0), '', (js / ios).toFixed(1), r > 0 ? (reactor / ios).toFixed(1) : '—', (user / ios).toFixed(1), (system / ios).toFixed(1)]);
        }
        for (const r of [0, 1, 2]) {
          const row = got.get(r)!;
          row[4] = (iopsOf.get(r)! / iopsOf.get(0)!).toFixed(2);
          rows.push(`| ${row.join(' | ')} |`);
        }
      }
    }
    rows.push('', `load average after: ${loadavg().map((l) => l.toFixed(2)).join(', ')}`);
    console.log(rows.join('\n'));
  } finally {
    for (const x of daemons) {
      x.d.child.kill('SIGTERM');
      await x.d.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
