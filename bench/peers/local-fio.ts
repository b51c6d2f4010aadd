// fio on the backing file itself: what the storage gives with no network and
// no target in between, with O_DIRECT like every server in this bench.
import { hasCommand } from './children.js';
import { runWithCpu } from './cpu.js';
import { runFio, type FioResult, type FioTarget } from './fio.js';
import type { BenchContext, Measurement, SystemInfo, SystemResult } from './workload.js';

interface LocalVariant {
  readonly system: SystemInfo;
  readonly target: Omit<FioTarget, 'filename' | 'size'>;
}

export const LOCAL_VARIANTS: readonly LocalVariant[] = [
  { system: { id: 'local-psync', label: 'local file, psync, O_DIRECT', kind: 'storage-ceiling', driver: 'fio --ioengine=psync --direct=1' }, target: { engine: 'psync', direct: true } },
  { system: { id: 'local-io_uring', label: 'local file, io_uring, O_DIRECT', kind: 'storage-ceiling', driver: 'fio --ioengine=io_uring --direct=1' }, target: { engine: 'io_uring', direct: true } },
];

/** Null when io_uring works here, else fio's error (seccomp, an old kernel, io_uring_disabled). */
async function ioUringProblem(file: string): Promise<string | null> {
  const run = await runWithCpu('fio', ['--name=probe', '--ioengine=io_uring', `--filename=${file}`, '--rw=read', '--bs=4096', '--size=4096', '--direct=1', '--output-format=json'], 30_000);
  return run.code === 0 ? null : (run.stderr || run.stdout).trim().split('\n').slice(-2).join(' ');
}

export async function runLocalFio(ctx: BenchContext, ids: ReadonlySet<string>): Promise<SystemResult[]> {
  const out: SystemResult[] = [];
  let uringProblem: string | null | undefined;
  for (const v of LOCAL_VARIANTS) {
    if (!ids.has(v.system.id)) continue;
    if (!hasCommand('fio')) {
      out.push({ system: v.system, measurements: [], unavailable: 'fio is not installed (apt-get install fio)' });
      continue;
    }
    if (v.target.engine === 'io_uring') {
      uringProblem ??= await ioUringProblem(ctx.file);
      if (uringProblem !== null) {
        out.push({ system: v.system, measurements: [], unavailable: `io_uring is unavailable: ${uringProblem}` });
        continue;
      }
    }
    const measurements: Measurement[] = [];
    let failed: string | undefined;
    for (const w of ctx.workloads) {
      ctx.progress(`${v.system.id}: ${w.label}`);
      let r: FioResult;
      try {
        r = await runFio({ ...v.target, filename: ctx.file, size: ctx.fileSize }, w, ctx.seconds);
      } catch (e) {
        failed = `failed: ${(e as Error).message}`;
        break;
      }
      measurements.push({
        workload: w.id,
        iops: r.iops,
        mbps: r.mbps,
        p50us: r.p50us,
        p99us: r.p99us,
        meanUs: r.meanUs,
        ios: r.ios,
        seconds: r.seconds,
        cpu: r.cpuMs === null ? [] : [{ process: 'fio', side: 'client', cpuMs: r.cpuMs }],
      });
    }
    out.push({ system: v.system, measurements, ...(failed === undefined ? {} : { unavailable: failed }) });
  }
  return out;
}
