// tgt (the Linux SCSI target framework's user-space daemon) serving the
// backing file as an iSCSI LUN over TCP (bs_rdwr, O_DIRECT like every other
// server here), driven by iscsi-perf. tgtd runs in
// the foreground as our child with its own control port, so it never touches
// a system tgtd; it is shut down through tgtadm and killed if that fails.
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { startDaemon, freePort, hasCommand, waitForPort, type Daemon } from './children.js';
import { CpuMeter } from './cpu.js';
import { runIscsiPerf } from './iscsi-perf.js';
import { isRandom, isRead, type BenchContext, type Measurement, type SystemInfo, type SystemResult } from './workload.js';

const execFileP = promisify(execFile);
const IQN = 'iqn.2026-11.io.rblk:bench-tgt';

export const TGT: SystemInfo = { id: 'tgt', label: 'tgt (iSCSI/TCP, bs_rdwr, O_DIRECT)', kind: 'peer', driver: 'iscsi-perf' };

async function tgtadm(controlPort: number, args: string[]): Promise<void> {
  try {
    await execFileP('tgtadm', ['-C', String(controlPort), ...args], { timeout: 10_000 });
  } catch (e) {
    const err = e as Error & { stderr?: string };
    throw new Error(`tgtadm ${args.join(' ')}: ${err.stderr?.trim() || err.message}`);
  }
}

async function startTgt(ctx: BenchContext): Promise<{ d: Daemon; port: number; control: number }> {
  const port = await freePort();
  // tgtd names its management socket after the control port (/var/run/tgtd/socket.N, N at most 32767);
  // it is not a TCP port, so any number no other tgtd uses will do.
  const control = 1024 + (process.pid % 30000);
  const d = startDaemon('tgtd', ['-f', '-C', String(control), '--iscsi', `portal=127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  // If the bench dies, children.ts kills tgtd; its socket goes too.
  process.once('exit', () => removeSocket(control));
  try {
    await waitForPort(port, d);
    await tgtadm(control, ['--lld', 'iscsi', '--op', 'new', '--mode', 'target', '--tid', '1', '-T', IQN]);
    await tgtadm(control, ['--lld', 'iscsi', '--op', 'new', '--mode', 'logicalunit', '--tid', '1', '--lun', '1', '-b', ctx.file, '--bsoflags', 'direct']);
    await tgtadm(control, ['--lld', 'iscsi', '--op', 'bind', '--mode', 'target', '--tid', '1', '-I', 'ALL']);
  } catch (e) {
    await stopTgt({ d, control });
    throw e;
  }
  return { d, port, control };
}

/** tgtd leaves its management socket and lock file behind, even after a clean shutdown. */
function removeSocket(control: number): void {
  for (const f of [`socket.${control}`, `socket.${control}.lock`]) rmSync(`/var/run/tgtd/${f}`, { force: true });
}

async function stopTgt(t: { d: Daemon; control: number }): Promise<void> {
  // `delete --mode system` makes tgtd exit, but only once no target is left.
  try {
    await tgtadm(t.control, ['--lld', 'iscsi', '--op', 'delete', '--mode', 'target', '--tid', '1', '--force']);
    await tgtadm(t.control, ['--op', 'delete', '--mode', 'system']);
  } catch {
    // Killed below either way.
  }
  const timer = setTimeout(() => t.d.child.kill('SIGKILL'), 3000);
  await t.d.exited;
  clearTimeout(timer);
  removeSocket(t.control);
}

export async function runTgt(ctx: BenchContext): Promise<SystemResult> {
  for (const tool of ['tgtd', 'tgtadm', 'iscsi-perf'])
    if (!hasCommand(tool)) return { system: TGT, measurements: [], unavailable: `${tool} is not installed (apt-get install tgt libiscsi-bin)` };
  const skipped: Record<string, string> = {};
  const measurements: Measurement[] = [];
  let t: Awaited<ReturnType<typeof startTgt>>;
  try {
    t = await startTgt(ctx);
  } catch (e) {
    return { system: TGT, measurements: [], unavailable: `tgtd did not start: ${(e as Error).message}` };
  }
  try {
    for (const w of ctx.workloads) {
      if (!isRead(w)) {
        skipped[w.id] = 'iscsi-perf only reads';
        continue;
      }
      ctx.progress(`tgt: ${w.label}`);
      const meter = new CpuMeter([{ name: 'tgtd', side: 'server', pid: t.d.pid }]);
      const r = await runIscsiPerf({
        url: `iscsi://127.0.0.1:${t.port}/${IQN}/1`,
        blocks: w.blockSize / ctx.lbaSize,
        blockBytes: ctx.lbaSize,
        queueDepth: w.queueDepth,
        seconds: ctx.seconds,
        random: isRandom(w),
      });
      const cpu = meter.stop();
      if (r.cpuMs !== null) cpu.push({ process: 'iscsi-perf', side: 'client', cpuMs: r.cpuMs });
      measurements.push({
        workload: w.id,
        iops: r.iops,
        mbps: r.mbps,
        meanUs: r.meanUs,
        ios: r.ios,
        seconds: r.seconds,
        cpu,
        note: 'mean latency from Little\'s law; iscsi-perf reports no percentiles',
      });
    }
  } finally {
    await stopTgt(t);
  }
  return { system: TGT, measurements, skipped };
}
