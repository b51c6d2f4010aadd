// rblkd as a child process for the benches that kill and restart it (bench/restart.ts,
// bench/failover.ts): started from this checkout (dist or sources), its stderr watched
// for one line, its exit awaited.
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const isDist = here.endsWith(join('dist', 'bench'));
const root = isDist ? join(here, '..', '..') : join(here, '..');

export interface RblkdChild {
  child: ChildProcess;
  /** performance.now() when rblkd first logged a line matching the pattern. */
  seen: Promise<number>;
  exited: Promise<void>;
}

/** Starts rblkd on `config`; `seen` rejects, with the end of its log, if it exits before logging `pattern`. */
export function startRblkd(config: string, pattern: RegExp): RblkdChild {
  const script = join(root, isDist ? 'dist/bin-src/rblkd.js' : 'bin-src/rblkd.ts');
  const args = isDist ? [script, '--config', config] : ['--import=tsx', script, '--config', config];
  const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const seen = new Promise<number>((resolve, reject) => {
    let tail = '';
    let found = false;
    child.stderr!.setEncoding('utf8').on('data', (s: string) => {
      tail = (tail + s).slice(-4000);
      if (!found && pattern.test(tail)) {
        found = true;
        resolve(performance.now());
      }
    });
    child.once('exit', (code, signal) => reject(new Error(`rblkd exited (${code ?? signal}) before it logged ${pattern}; it logged:\n${tail}`)));
  });
  seen.catch(() => undefined);
  return { child, seen, exited };
}
