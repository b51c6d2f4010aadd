// The real programs a soak drives: rblkd and the rblk CLI as child processes, run the way a
// user runs them (the compiled entry points when this file runs from dist/, the TypeScript
// sources under tsx when it runs from the tree, as the tests do), and what /proc says about
// a process: its open descriptors and resident memory.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const compiled = here.endsWith(join('dist', 'bench', 'soak'));
/** The repository root, from dist/bench/soak or bench/soak. */
export const ROOT = compiled ? join(here, '..', '..', '..') : join(here, '..', '..');

/** node arguments that run an entry point of bin-src/ (rblkd or rblk). */
export function entryArgs(name: 'rblkd' | 'rblk'): string[] {
  return compiled ? [join(ROOT, 'dist', 'bin-src', `${name}.js`)] : ['--import=tsx', join(ROOT, 'bin-src', `${name}.ts`)];
}

/** An environment without systemd's variables or a secret that would change what the child does. */
export function childEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'JOURNAL_STREAM', 'RBLK_SECRET', 'RBLK_STATE_DIR']) delete env[k];
  return env;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A child with its output collected line by line and a promise of its exit. */
export class Child {
  readonly lines: string[] = [];
  readonly exited: Promise<Exit>;
  #done = false;
  #waiters = new Set<() => void>();

  constructor(readonly proc: ChildProcess) {
    let partial = '';
    const take = (s: string): void => {
      partial += s;
      const parts = partial.split('\n');
      partial = parts.pop() ?? '';
      this.lines.push(...parts);
      // A fuzzed daemon logs every disconnect: keep the tail, not all of it.
      if (this.lines.length > 4000) this.lines.splice(0, this.lines.length - 2000);
      this.#wake();
    };
    proc.stdout?.setEncoding('utf8').on('data', take);
    proc.stderr?.setEncoding('utf8').on('data', take);
    this.exited = new Promise<Exit>((resolve) =>
      proc.on('exit', (code, signal) => {
        // Let the pipes deliver their last bytes first.
        setImmediate(() => {
          if (partial !== '') this.lines.push(partial);
          this.#done = true;
          resolve({ code, signal });
          this.#wake();
        });
      }),
    );
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  get running(): boolean {
    return !this.#done && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  /** The first line at index >= from matching re; rejects after ms or when the child exits. */
  waitForLine(re: RegExp, ms: number, from = 0): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`no output matching ${re} within ${ms} ms:\n${this.lines.slice(-20).join('\n')}`));
      }, ms);
      const check = (): void => {
        for (let i = from; i < this.lines.length; i++) {
          const m = re.exec(this.lines[i]);
          if (m) {
            clearTimeout(timer);
            this.#waiters.delete(check);
            resolve(m);
            return;
          }
        }
        if (this.#done) {
          clearTimeout(timer);
          this.#waiters.delete(check);
          reject(new Error(`exited without printing ${re}:\n${this.lines.slice(-20).join('\n')}`));
        }
      };
      this.#waiters.add(check);
      check();
    });
  }

  kill(signal: NodeJS.Signals): void {
    if (this.running) this.proc.kill(signal);
  }

  /** SIGKILL unless it has exited, then its exit. */
  async stop(): Promise<Exit> {
    this.kill('SIGKILL');
    return this.exited;
  }
}

const children = new Set<Child>();

export function spawnEntry(name: 'rblkd' | 'rblk', args: string[]): Child {
  const c = new Child(spawn(process.execPath, [...entryArgs(name), ...args], { cwd: ROOT, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] }));
  children.add(c);
  void c.exited.then(() => children.delete(c));
  return c;
}

/** SIGKILL to every child still running; synchronous, for exit hooks. */
export function killAllChildren(): void {
  for (const c of children) c.kill('SIGKILL');
}

/** Open file descriptors of a process (/proc/PID/fd). */
export function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** Resident set size of a process in KiB (/proc/PID/status VmRSS). */
export function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** The first of these directories that holds an executable name. */
export function haveTool(name: string): boolean {
  return ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/bin', '/sbin'].some((d) => existsSync(join(d, name)));
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** p, or `fallback` if it has not settled within ms; the timer never outlives the race. */
export async function within<T, F>(p: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<F>((r) => (timer = setTimeout(() => r(fallback), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
