// `rblk bench` from this checkout's build as a child process, for the benches
// that drive a real rblkd the way an operator would (bench/rbd.ts,
// bench/reactors.ts): one run, its IOPS from --json.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL(process.argv[1].endsWith('.ts') ? '../' : '../../', import.meta.url));

export interface CliBench {
  rw: 'read' | 'write';
  bs: number;
  pattern: 'rand' | 'seq';
  seconds: number;
  qd?: number;
  /** A CPU list for taskset(1): the run is pinned to these cores. */
  cpus?: string;
}

/** IOPS of `rblk bench` against rblk://127.0.0.1:port/volume over tcp. */
export async function rblkBench(port: number, volume: string, w: CliBench): Promise<number> {
  return (await rblkBenchRun(port, volume, w)).iops;
}

/** One `rblk bench` run: its IOPS and the operations it completed. */
export function rblkBenchRun(port: number, volume: string, w: CliBench): Promise<{ iops: number; ops: number }> {
  const rblk = join(ROOT, 'dist', 'bin-src', 'rblk.js');
  const args = [rblk, 'bench', `rblk://127.0.0.1:${port}/${volume}`, '--provider', 'tcp', '--rw', w.rw, '--bs', String(w.bs), '--qd', String(w.qd ?? 32), '--pattern', w.pattern, '--runtime', `${w.seconds}s`, '--json', '--yes'];
  return new Promise((resolve, reject) => {
    const [file, argv] = w.cpus !== undefined ? ['taskset', ['-c', w.cpus, process.execPath, ...args]] : [process.execPath, args];
    const child = spawn(file, argv, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`rblk ${args.slice(1).join(' ')} exited ${code}: ${err}`));
      else {
        const r = JSON.parse(out) as { iops: number; ops: number };
        resolve({ iops: r.iops, ops: r.ops });
      }
    });
  });
}
