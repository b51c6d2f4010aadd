// The real rblkd as a child process (bin-src/rblkd.ts under tsx), with its
// stderr collected line by line, a temporary directory for its config, state
// and volumes, and teardown that always kills it and removes the directory.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ExecutionContext } from 'ava';
import { dump } from 'js-yaml';
import { diesWithParent } from '../../../bench/parent-death.js';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'bin-src', 'rblkd.ts');
/** Guards against a hang; never an assertion about speed. */
const WAIT_MS = 20_000;

export interface Workdir {
  dir: string;
  state: string;
  configPath: string;
  /** Writes the config as YAML (an object) or verbatim (a string). */
  writeConfig(config: Record<string, unknown> | string): void;
}

export function workdir(t: ExecutionContext): Workdir {
  const dir = mkdtempSync(join(tmpdir(), 'rblkd-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const configPath = join(dir, 'rblkd.yaml');
  return {
    dir,
    state: join(dir, 'state'),
    configPath,
    writeConfig(config) {
      writeFileSync(configPath, typeof config === 'string' ? config : dump(config));
    },
  };
}

/** A config with one tcp listener on a free port, small limits, and the given volumes. */
export function baseConfig(w: Workdir, volumes: Record<string, unknown>[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    listeners: [{ provider: 'tcp', address: '127.0.0.1', port: 0 }],
    volumes,
    limits: { max_io: '128KiB', queue_depth: 16, drain_timeout_ms: 5000, ...((extra.limits as object | undefined) ?? {}) },
    state_dir: w.state,
    // Its own control socket: parallel daemons never contend for /run/rblk/rblkd.ctl.
    control: { socket: join(w.dir, 'rblkd.ctl') },
    ...Object.fromEntries(Object.entries(extra).filter(([k]) => k !== 'limits')),
  };
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface DaemonProcess {
  readonly child: ChildProcess;
  /** Every stderr line so far. */
  readonly lines: string[];
  stdout(): string;
  readonly exited: Promise<Exit>;
  /** The first line at index >= from that matches; waits for it. */
  waitForLine(re: RegExp, from?: number): Promise<RegExpMatchArray>;
  /** The port of the first `listening` line. */
  port(): Promise<number>;
  /** The port of the first iSCSI `listening` line. */
  iscsiPort(): Promise<number>;
  kill(signal: NodeJS.Signals): void;
}

export function spawnDaemon(t: ExecutionContext, args: string[], env: Record<string, string> = {}, opts: { fdLimit?: number } = {}): DaemonProcess {
  const base = { ...process.env };
  for (const k of ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'JOURNAL_STREAM']) delete base[k];
  const argv = [process.execPath, '--import=tsx', BIN, ...args];
  // fdLimit: RLIMIT_NOFILE for rblkd, as LimitNOFILE= would set it; the shell execs, so the pid is rblkd's.
  const [file, ...rest] = opts.fdLimit === undefined ? argv : ['bash', '-c', `ulimit -n ${opts.fdLimit} && exec "$@"`, 'bash', ...argv];
  const [cmd, ...cmdArgs] = diesWithParent([file, ...rest]);
  const child = spawn(cmd, cmdArgs, { cwd: ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let out = '';
  let partial = '';
  const waiters = new Set<() => void>();
  const wake = (): void => {
    for (const w of [...waiters]) w();
  };
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    partial += s;
    const parts = partial.split('\n');
    partial = parts.pop()!;
    lines.push(...parts);
    wake();
  });
  let done = false;
  const exited = new Promise<Exit>((resolve) =>
    child.on('exit', (code, signal) => {
      done = true;
      // Give the pipes their last bytes before anyone reads them.
      setImmediate(() => {
        if (partial !== '') lines.push(partial);
        partial = '';
        resolve({ code, signal });
        wake();
      });
    }),
  );
  t.teardown(async () => {
    if (!done) child.kill('SIGKILL');
    await exited;
  });

  const waitForLine = (re: RegExp, from = 0): Promise<RegExpMatchArray> =>
    new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const check = (): void => {
        for (let i = from; i < lines.length; i++) {
          const m = re.exec(lines[i]);
          if (m) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(m);
            return;
          }
        }
        if (done && partial === '') {
          waiters.delete(check);
          clearTimeout(timer);
          reject(new Error(`rblkd exited without logging ${re}; it logged:\n${lines.join('\n')}`));
        }
      };
      timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no line matching ${re} in ${WAIT_MS} ms; rblkd logged:\n${lines.join('\n')}`));
      }, WAIT_MS);
      waiters.add(check);
      check();
    });

  return {
    child,
    lines,
    stdout: () => out,
    exited,
    waitForLine,
    async port() {
      const m = await waitForLine(/listening tcp 127\.0\.0\.1:(\d+)/);
      return Number(m[1]);
    },
    async iscsiPort() {
      const m = await waitForLine(/listening iscsi 127\.0\.0\.1:(\d+)/);
      return Number(m[1]);
    },
    kill(signal) {
      child.kill(signal);
    },
  };
}

/** Runs rblkd to completion (for --check-config and refused starts). */
export async function runDaemon(t: ExecutionContext, args: string[]): Promise<Exit & { stdout: string; stderr: string }> {
  const d = spawnDaemon(t, args);
  const exit = await d.exited;
  return { ...exit, stdout: d.stdout(), stderr: d.lines.join('\n') };
}

/** `rblkd ctl ARGS` as an operator runs it: its exit status and output. */
export function ctl(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import=tsx', BIN, 'ctl', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (x: string) => (stdout += x));
    child.stderr.setEncoding('utf8').on('data', (x: string) => (stderr += x));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `length` bytes of a volume's file at `offset`, read behind the daemon's back. */
export function fileBytes(path: string, offset: number, length: number): Buffer {
  const fd = openSync(path, 'r');
  try {
    const b = Buffer.alloc(length);
    readSync(fd, b, 0, length, offset);
    return b;
  } finally {
    closeSync(fd);
  }
}
