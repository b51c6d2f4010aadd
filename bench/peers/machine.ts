// What the figures were measured on: CPUs, memory, kernel, and the versions
// of every program that took part, each asked of the program itself.
import { execFileSync } from 'node:child_process';
import { cpus, loadavg, release, totalmem } from 'node:os';
import type { MachineFacts } from './report.js';

function ask(command: string, args: string[], pick: (out: string) => string | undefined): string {
  try {
    const out = execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 });
    return pick(out)?.trim() || 'unknown';
  } catch (e) {
    // Some tools print their version on stderr, or exit non-zero after printing it.
    const err = e as { stdout?: string; stderr?: string };
    return pick(`${err.stdout ?? ''}${err.stderr ?? ''}`)?.trim() || 'not installed';
  }
}

export function machineFacts(): MachineFacts {
  const c = cpus();
  return {
    cpus: `${c.length} × ${c[0]?.model.trim() ?? 'unknown'}`,
    memory: `${Math.round(totalmem() / 2 ** 30)} GiB`,
    kernel: release(),
    // Other work on the machine skews every figure; say how busy it was.
    'load average (1 min) at the end': loadavg()[0].toFixed(2),
    node: process.version,
    fio: ask('fio', ['--version'], (o) => o.split('\n')[0]),
    nbdkit: ask('nbdkit', ['--version'], (o) => o.split('\n')[0]),
    tgt: ask('tgtd', ['-V'], (o) => o.split('\n')[0]),
    libiscsi: ask('dpkg-query', ['-W', '-f', '${Version}', 'libiscsi-bin'], (o) => o),
    libfabric: ask('fi_info', ['--version'], (o) => o.match(/libfabric: (\S+)/)?.[1]),
  };
}
