// What every system in the side-by-side benchmark is measured with, and the
// shape of what it reports: one Measurement per (system, workload).

export type Pattern = 'randread' | 'randwrite' | 'read' | 'write';

export interface Workload {
  /** Stable key in the JSON, e.g. "randread-4k-qd32". */
  readonly id: string;
  readonly label: string;
  readonly pattern: Pattern;
  readonly blockSize: number;
  readonly queueDepth: number;
}

function workload(pattern: Pattern, blockSize: number, queueDepth: number): Workload {
  const kib = blockSize >> 10;
  const what = { randread: 'random read', randwrite: 'random write', read: 'sequential read', write: 'sequential write' }[pattern];
  return { id: `${pattern}-${kib}k-qd${queueDepth}`, label: `${kib} KiB ${what}, QD${queueDepth}`, pattern, blockSize, queueDepth };
}

/** The matrix: 4 KiB random at QD1 and QD32, 128 KiB sequential at QD8. */
export const WORKLOADS: readonly Workload[] = [
  workload('randread', 4096, 1),
  workload('randread', 4096, 32),
  workload('randwrite', 4096, 1),
  workload('randwrite', 4096, 32),
  workload('read', 128 << 10, 8),
  workload('write', 128 << 10, 8),
];

/** Extra depths for the chart's random-read line (IOPS against queue depth); not in --quick. */
export const CHART_WORKLOADS: readonly Workload[] = [workload('randread', 4096, 4), workload('randread', 4096, 8)];

export function isRead(w: Workload): boolean {
  return w.pattern === 'randread' || w.pattern === 'read';
}

export function isRandom(w: Workload): boolean {
  return w.pattern === 'randread' || w.pattern === 'randwrite';
}

/** CPU time one process spent during a measurement. */
export interface ProcessCpu {
  /** A role, not a binary name: "fio", "tgtd", "rblkd", "bench (library)". */
  readonly process: string;
  /** The target side (tgtd, nbdkit, rblkd) or the initiator side (fio, the library). */
  readonly side: 'server' | 'client';
  readonly cpuMs: number;
  /**
   * Context switches of all its threads (voluntary and not): how often it
   * slept and was woken. Only for processes sampled from /proc.
   */
  readonly switches?: number;
}

export interface Measurement {
  readonly workload: string;
  readonly iops: number;
  /** 10^6 bytes per second. */
  readonly mbps: number;
  readonly p50us?: number;
  readonly p99us?: number;
  readonly meanUs?: number;
  readonly ios: number;
  readonly seconds: number;
  readonly cpu: readonly ProcessCpu[];
  readonly note?: string;
}

export type SystemKind = 'rblk' | 'peer' | 'transport-ceiling' | 'storage-ceiling';

export interface SystemInfo {
  /** Key for --only and the JSON, e.g. "rblk-lib-tcp". */
  readonly id: string;
  readonly label: string;
  readonly kind: SystemKind;
  /** What generated the load. */
  readonly driver: string;
}

export interface SystemResult {
  readonly system: SystemInfo;
  readonly measurements: Measurement[];
  /** Why the system has no figures in this run (missing tool, not built yet, failed to start). */
  readonly unavailable?: string;
  /** Workloads the driver cannot run, with the reason (iscsi-perf only reads). */
  readonly skipped?: Record<string, string>;
}

export interface BenchContext {
  /** The one backing file every system uses in turn. */
  readonly file: string;
  readonly fileSize: number;
  /** Logical block size of every target (tgt's default, rblkd's default). */
  readonly lbaSize: number;
  readonly seconds: number;
  readonly workloads: readonly Workload[];
  /** rblkd's fast_path; on unless false. */
  readonly fastPath?: boolean;
  progress(message: string): void;
}

/** Context switches of the server's processes per I/O: the wake-ups one I/O costs the target side. */
export function serverSwitchesPerIo(m: Measurement): number | undefined {
  const s = m.cpu.filter((c) => c.side === 'server' && c.switches !== undefined);
  if (m.ios <= 0 || s.length === 0) return undefined;
  return s.reduce((a, c) => a + (c.switches ?? 0), 0) / m.ios;
}

/**
 * CPU of the client-side processes (the bench process itself for the library
 * rows: utime + stime) divided by the I/Os done: what one I/O costs the initiator.
 */
export function clientCpuPerIoUs(m: Measurement): number | undefined {
  const c = m.cpu.filter((x) => x.side === 'client');
  if (m.ios <= 0 || c.length === 0) return undefined;
  return (c.reduce((a, x) => a + x.cpuMs, 0) * 1000) / m.ios;
}

/** Total CPU of every process divided by the I/Os done: what one I/O costs the machine. */
export function cpuPerIoUs(m: Measurement): number | undefined {
  if (m.ios <= 0 || m.cpu.length === 0) return undefined;
  const ms = m.cpu.reduce((a, c) => a + c.cpuMs, 0);
  return (ms * 1000) / m.ios;
}
