// CPU per I/O on both sides of an NVMe/TCP read (docs/performance.md "The
// NVMe/TCP listener through the library's NVMe/TCP host"): rblkd with only
// an nvme-tcp listener on an O_DIRECT file, as bench/peers' rblk-nvme row
// starts it, and the library's NVMe/TCP host reading BS bytes at QD in this
// process for SECONDS. Prints one JSON line: IOPS, the host's user and
// system CPU per I/O (process.cpuUsage) and rblkd's (/proc/PID/stat).
//   node --import=tsx bench/nvme-read-cost.ts [--bs 131072] [--qd 8] [--seconds 5]
import { closeSync, ftruncateSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNvme } from '../initiator/index.js';
import { freePort } from './peers/children.js';
import { launchRblkd, stopRblkd } from './peers/rblk.js';

const args = process.argv.slice(2);
const flag = (name: string, d: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : d;
};
const BS = flag('--bs', 131072);
const QD = flag('--qd', 8);
const SECONDS = flag('--seconds', 5);
const NQN = 'nqn.2026-12.io.rblk:read-cost';

/** utime + stime of a process, µs (proc(5): fields 14 and 15, in clock ticks of 10 ms). */
function cpuUs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10_000;
}

const dir = mkdtempSync(join(tmpdir(), 'rblk-read-cost-'));
const file = join(dir, 'vol.img');
const fd = openSync(file, 'w');
ftruncateSync(fd, 256 << 20);
closeSync(fd);
const port = await freePort();
const d = await launchRblkd({ file, lbaSize: 512, direct: true, providers: [], nvmePort: port, nqn: NQN });
try {
  const s = await connectNvme(`nvme+tcp://127.0.0.1:${port}/${NQN}`, { queueDepth: QD + 1 });
  const vol = await s.open(1);
  const span = Math.floor(vol.size / BS);
  let ops = 0;
  const t0 = performance.now();
  const host0 = process.cpuUsage();
  const pid = d.d.pid!;
  const daemon0 = cpuUs(pid);
  await Promise.all(
    Array.from({ length: QD }, async (_, slot) => {
      const buf = Buffer.alloc(BS);
      for (let at = slot; performance.now() - t0 < SECONDS * 1000; at += QD) {
        await vol.read((at % span) * BS, buf);
        ops++;
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  const host = process.cpuUsage(host0);
  const daemon = cpuUs(pid) - daemon0;
  await s.close();
  const per = (us: number): number => Math.round(us / ops);
  console.log(JSON.stringify({ bs: BS, qd: QD, seconds: SECONDS, iops: Math.round(ops / elapsed), hostUserUs: per(host.user), hostSystemUs: per(host.system), rblkdUs: per(daemon) }));
} finally {
  await stopRblkd(d);
  rmSync(dir, { recursive: true, force: true });
}
