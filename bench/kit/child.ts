// The real programs tests and benchmarks drive: rblkd and the rblk CLI as child processes,
// started the way a user starts them (the compiled entry points when this file runs from
// dist/, the TypeScript sources under tsx when it runs from the tree), bound to die with
// their parent, with their output collected line by line and their exit awaited. The one
// launcher of docs/architecture.md "The test kit".
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { diesWithParent } from '../parent-death.js';

const here = dirname(fileURLToPath(import.meta.url));
/** Whether this file runs compiled, from dist/bench/kit. */
export const COMPILED = here.endsWith(join('dist', 'bench', 'kit'));
/** The repository root, from dist/bench/kit or bench/kit. */
export const ROOT = COMPILED ? join(here, '..', '..', '..') : join(here, '..', '..');

export type Entry = 'rblkd' | 'rblk';

/** node arguments that run an entry point of bin-src/. */
export function entryArgs(name: Entry): string[] {
  return COMPILED ? [join(ROOT, 'dist', 'bin-src', `${name}.js`)] : ['--import=tsx', join(ROOT, 'bin-src', `${name}.ts`)];
}

/** An environment without systemd's variables or a secret that would change what the child does. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'JOURNAL_STREAM', 'RBLK_SECRET', 'RBLK_STATE_DIR']) delete env[k];
  return { ...env, ...extra };
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ChildOptions {
  /** 'lines': stdout's lines join stderr's in `lines`; 'keep': stdout is kept whole for stdout(). Default 'lines'. */
  stdout?: 'lines' | 'keep';
  /** Keep at most about this many lines, the newest (a fuzzed daemon logs every disconnect). Default: all. */
  keepLines?: number;
}

export interface WaitLineOptions {
  /** Give up after this long (a guard against a hang; default 20 s; Infinity: never). */
  ms?: number;
  /** Look at lines from this index on (default 0). */
  from?: number;
}

/** A child with its output collected line by line and a promise of its exit. */
export class Child {
  readonly lines: string[] = [];
  readonly exited: Promise<Exit>;
  #out = '';
  #done = false;
  #waiters = new Set<() => void>();

  constructor(
    readonly proc: ChildProcess,
    o: ChildOptions = {},
  ) {
    const keep = o.keepLines ?? Infinity;
    let partial = '';
    const take = (s: string): void => {
      partial += s;
      const parts = partial.split('\n');
      partial = parts.pop() ?? '';
      this.lines.push(...parts);
      if (this.lines.length > keep * 2) this.lines.splice(0, this.lines.length - keep);
      this.#wake();
    };
    if (o.stdout === 'keep') proc.stdout?.setEncoding('utf8').on('data', (s: string) => (this.#out += s));
    else proc.stdout?.setEncoding('utf8').on('data', take);
    proc.stderr?.setEncoding('utf8').on('data', take);
    this.exited = new Promise<Exit>((resolve) =>
      proc.on('exit', (code, signal) => {
        // Let the pipes deliver their last bytes first.
        setImmediate(() => {
          if (partial !== '') this.lines.push(partial);
          partial = '';
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

  /** stdout as written, when the child was made with stdout: 'keep'. */
  stdout(): string {
    return this.#out;
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  /** The first line at index >= from matching re; rejects after ms, or when the child exits without it. */
  waitForLine(re: RegExp, o: WaitLineOptions = {}): Promise<RegExpMatchArray> {
    const ms = o.ms ?? 20_000;
    const from = o.from ?? 0;
    return new Promise((resolve, reject) => {
      const timer =
        ms === Infinity
          ? undefined
          : setTimeout(() => {
              this.#waiters.delete(check);
              reject(new Error(`no line matching ${re} in ${ms} ms; it logged:\n${this.lines.slice(-40).join('\n')}`));
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
          reject(new Error(`exited without logging ${re}; it logged:\n${this.lines.slice(-40).join('\n')}`));
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

export interface SpawnOptions extends ChildOptions {
  /** Added to childEnv(). */
  env?: Record<string, string>;
  /** RLIMIT_NOFILE for the child, as systemd's LimitNOFILE= sets it; the shell execs, so the pid is the entry's. */
  fdLimit?: number;
}

const children = new Set<Child>();

/** rblkd or rblk with these arguments, bound to die with this process. */
export function spawnEntry(name: Entry, args: string[], o: SpawnOptions = {}): Child {
  const argv = [process.execPath, ...entryArgs(name), ...args];
  const limited = o.fdLimit === undefined ? argv : ['bash', '-c', `ulimit -n ${o.fdLimit} && exec "$@"`, 'bash', ...argv];
  const [cmd, ...rest] = diesWithParent(limited);
  const c = new Child(spawn(cmd, rest, { cwd: ROOT, env: childEnv(o.env), stdio: ['ignore', 'pipe', 'pipe'] }), o);
  children.add(c);
  void c.exited.then(() => children.delete(c));
  return c;
}

/** SIGKILL to every child still running; synchronous, for exit hooks. */
export function killAllChildren(): void {
  for (const c of children) c.kill('SIGKILL');
}
