// fio as a load generator: one job per workload, JSON output, total latency
// (submission to completion, lat_percentiles) rather than completion only, so
// the figures compare with the in-process loops that time a whole I/O.
import { runWithCpu } from './cpu.js';
import { isRandom, isRead, type Workload } from './workload.js';

export interface FioTarget {
  readonly engine: 'psync' | 'io_uring' | 'nbd';
  /** A local file (psync, io_uring). */
  readonly filename?: string;
  /** An NBD URI (nbd engine). */
  readonly uri?: string;
  /** O_DIRECT on a local file. */
  readonly direct?: boolean;
  /** Bytes of the file to use (local files; the NBD server reports its own size). */
  readonly size?: number;
}

export interface FioResult {
  readonly iops: number;
  readonly mbps: number;
  readonly p50us: number | undefined;
  readonly p99us: number | undefined;
  readonly meanUs: number | undefined;
  readonly ios: number;
  readonly seconds: number;
  /** The fio process and its job processes, whole life (bash `times`). */
  readonly cpuMs: number | null;
}

export function fioArgs(t: FioTarget, w: Workload, seconds: number): string[] {
  const a = [
    '--name=peers',
    `--ioengine=${t.engine}`,
    `--rw=${w.pattern}`,
    `--bs=${w.blockSize}`,
    '--time_based',
    `--runtime=${Math.max(1, Math.round(seconds * 1000))}ms`,
    '--lat_percentiles=1',
    '--percentile_list=50:99',
    '--output-format=json',
  ];
  if (isRandom(w)) a.push('--norandommap', '--randrepeat=0');
  if (t.engine === 'psync') {
    // A synchronous engine keeps one I/O in flight per job: depth comes from jobs (threads of one process).
    a.push('--iodepth=1');
    if (w.queueDepth > 1) a.push(`--numjobs=${w.queueDepth}`, '--thread', '--group_reporting');
  } else {
    a.push(`--iodepth=${w.queueDepth}`);
  }
  if (t.engine === 'nbd') {
    if (t.uri === undefined) throw new Error('the nbd engine needs a uri');
    a.push(`--uri=${t.uri}`);
  } else {
    if (t.filename === undefined) throw new Error(`the ${t.engine} engine needs a filename`);
    a.push(`--filename=${t.filename}`, `--direct=${t.direct ? 1 : 0}`);
    if (t.size !== undefined) a.push(`--size=${t.size}`);
  }
  return a;
}

interface FioDirection {
  iops: number;
  bw_bytes: number;
  total_ios: number;
  runtime: number;
  lat_ns?: { mean?: number; percentile?: Record<string, number> };
  clat_ns?: { mean?: number; percentile?: Record<string, number> };
}

interface FioJob {
  error: number;
  read: FioDirection;
  write: FioDirection;
}

function isFioOutput(v: unknown): v is { jobs: FioJob[] } {
  if (typeof v !== 'object' || v === null || !('jobs' in v) || !Array.isArray(v.jobs) || v.jobs.length === 0) return false;
  const j: unknown = v.jobs[0];
  return typeof j === 'object' && j !== null && 'read' in j && 'write' in j;
}

function percentile(d: FioDirection, p: string): number | undefined {
  // fio names the keys with six decimals: "50.000000".
  const v = d.lat_ns?.percentile?.[p] ?? d.clat_ns?.percentile?.[p];
  return v === undefined ? undefined : v / 1000;
}

/**
 * Figures from fio's JSON for one direction. fio may print lines before the
 * JSON (the nbd engine says "connected to NBD server" on stdout).
 */
export function parseFioJson(text: string, direction: 'read' | 'write'): Omit<FioResult, 'cpuMs'> {
  const start = text.indexOf('{');
  if (start < 0) throw new Error(`fio printed no JSON: ${text.trim().slice(0, 300)}`);
  const parsed: unknown = JSON.parse(text.slice(start));
  if (!isFioOutput(parsed)) throw new Error('fio JSON without jobs');
  const job = parsed.jobs[0];
  if (job.error !== 0) throw new Error(`fio job error ${job.error}`);
  const d = job[direction];
  const seconds = d.runtime / 1000;
  return {
    iops: d.iops,
    mbps: d.bw_bytes / 1e6,
    p50us: percentile(d, '50.000000'),
    p99us: percentile(d, '99.000000'),
    meanUs: (d.lat_ns?.mean ?? d.clat_ns?.mean ?? NaN) / 1000,
    ios: d.total_ios,
    seconds,
  };
}

export async function runFio(t: FioTarget, w: Workload, seconds: number): Promise<FioResult> {
  const run = await runWithCpu('fio', fioArgs(t, w, seconds), seconds * 1000 + 60_000);
  if (run.code !== 0) throw new Error(`fio exited with ${run.code}: ${(run.stderr || run.stdout).trim().slice(-400)}`);
  const r = parseFioJson(run.stdout, isRead(w) ? 'read' : 'write');
  if (r.ios === 0) throw new Error(`fio completed no I/O: ${run.stderr.trim().slice(-400)}`);
  return { ...r, cpuMs: run.cpuMs };
}
