// CPU time per process. Long-running peers (tgtd, nbdkit, rblkd, rblk attach,
// the transport peer) are sampled from /proc/<pid>/stat before and after a
// measurement; for a process that is the thread-group leader those fields sum
// every thread (proc(5)), which matters for tgtd's bs_rdwr pool and nbdkit's
// worker threads. Short-lived load generators (fio, iscsi-perf) run under
// bash, whose `times` reports the rusage of its waited-for children, so their
// whole life is counted, including fio's forked job processes.
import { spawn, execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { ProcessCpu } from './workload.js';

let clockTicks: number | null = null;

function ticksPerSecond(): number {
  if (clockTicks === null) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** utime + stime of a process in ms, or null when it is gone. */
export function processCpuMs(pid: number): number | null {
  if (pid === process.pid) {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  }
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name (field 2) may hold spaces and parentheses: count fields from the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); utime and stime are fields 14 and 15.
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  return ((utime + stime) * 1000) / ticksPerSecond();
}

/**
 * Context switches of each thread of a process, by thread id (proc(5): the
 * counters in /proc/<pid>/task/<tid>/status are per thread, and leave with
 * the thread), or null when the process is gone.
 */
export function threadSwitches(pid: number): Map<string, number> | null {
  const out = new Map<string, number>();
  if (pid === process.pid) {
    // getrusage(RUSAGE_SELF) covers every thread, including ended ones.
    const r = process.resourceUsage();
    out.set('self', r.voluntaryContextSwitches + r.involuntaryContextSwitches);
    return out;
  }
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      let status: string;
      try {
        status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      } catch {
        continue; // The thread ended between the listing and the read.
      }
      let n = 0;
      for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm)) n += Number(m[1]);
      out.set(tid, n);
    }
  } catch {
    return null;
  }
  return out;
}

/**
 * Switch counts of threads seen over a window: the first count of each
 * thread alive at the start, the last count of every thread seen. Threads
 * that come and go (nbdkit's per-connection threads) are caught by sampling.
 */
class SwitchTracker {
  private readonly base = new Map<string, number>();
  private readonly last = new Map<string, number>();
  gone = false;

  constructor(private readonly pid: number) {
    const s = threadSwitches(pid);
    if (s === null) this.gone = true;
    else for (const [tid, n] of s) this.base.set(tid, n);
    this.sample();
  }

  sample(): void {
    const s = threadSwitches(this.pid);
    if (s === null) return;
    for (const [tid, n] of s) this.last.set(tid, n);
  }

  total(): number {
    let t = 0;
    for (const [tid, n] of this.last) t += n - (this.base.get(tid) ?? 0);
    return t;
  }
}

export interface TrackedProcess {
  /** A role: "tgtd", "rblkd", "bench (library)". */
  readonly name: string;
  readonly side: 'server' | 'client';
  readonly pid: number;
}

/**
 * CPU and context-switch deltas of several processes over one measurement
 * window. CPU time of ended threads stays in /proc/<pid>/stat; their switch
 * counts do not, so threads are sampled every 100 ms, and a thread that ends
 * less than that after its last sample undercounts.
 */
export class CpuMeter {
  private readonly startCpu: (number | null)[];
  private readonly switches: SwitchTracker[];
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly tracked: readonly TrackedProcess[]) {
    this.startCpu = tracked.map((t) => processCpuMs(t.pid));
    this.switches = tracked.map((t) => new SwitchTracker(t.pid));
    this.timer = setInterval(() => {
      for (const s of this.switches) s.sample();
    }, 100);
  }

  stop(): ProcessCpu[] {
    clearInterval(this.timer);
    const out: ProcessCpu[] = [];
    this.tracked.forEach((t, i) => {
      const before = this.startCpu[i];
      const cpu = processCpuMs(t.pid);
      if (before === null || cpu === null) return;
      const sw = this.switches[i];
      sw.sample();
      out.push({ process: t.name, side: t.side, cpuMs: cpu - before, ...(sw.gone ? {} : { switches: sw.total() }) });
    });
    return out;
  }
}

export interface TimedRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** User + system time of the command and everything it waited for, or null if bash did not report it. */
  readonly cpuMs: number | null;
}

function parseTimes(text: string): number | null {
  // `times` prints the shell's own user/sys, then its children's: "0m1.234s 0m0.567s".
  const lines = text.trim().split('\n');
  const m = lines[lines.length - 1]?.match(/^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/);
  if (!m) return null;
  return (Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4])) * 1000;
}

/** Runs a command to completion and reports its CPU time (see the file comment). */
export function runWithCpu(command: string, args: readonly string[], timeoutMs: number): Promise<TimedRun> {
  return new Promise((resolve, reject) => {
    // detached: its own process group, so a timeout can kill the command and its children together.
    const child = spawn('bash', ['-c', '"$@"; rc=$?; times >&3; exit $rc', 'bench', command, ...args], {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    let times = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-65536)));
    const fd3 = child.stdio[3];
    if (fd3 && 'on' in fd3) fd3.on('data', (d: Buffer) => (times += d.toString()));
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') return reject(new Error(`${command} did not finish within ${timeoutMs} ms`));
      resolve({ code, stdout, stderr, cpuMs: parseTimes(times) });
    });
  });
}
