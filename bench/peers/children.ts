// Starting and stopping the peers' processes. Every child is recorded, and
// one still running when the bench exits (an error half-way, ^C) is killed by
// its own pid, so no tgtd, nbdkit or rblkd outlives a run.
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
/** True when running the compiled bench (dist/bench/peers), false under tsx. */
export const isDist = here.endsWith(join('dist', 'bench', 'peers'));
export const root = isDist ? join(here, '..', '..', '..') : join(here, '..', '..');

/**
 * A TypeScript entry point of this repository as node arguments: the compiled
 * file under dist/ when the bench is compiled, else the source through tsx.
 * `rel` has no extension, e.g. "bin-src/rblkd".
 */
export function nodeScript(rel: string): { path: string; args: string[] } {
  const path = isDist ? join(root, 'dist', `${rel}.js`) : join(root, `${rel}.ts`);
  return { path, args: isDist ? [path] : ['--import=tsx', path] };
}

export function scriptExists(rel: string): boolean {
  return existsSync(nodeScript(rel).path);
}

/** Whether an executable is on PATH. */
export function hasCommand(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) if (c.exitCode === null && c.signalCode === null && c.pid !== undefined) process.kill(c.pid, 'SIGKILL');
});

export interface Daemon {
  readonly child: ChildProcess;
  readonly pid: number;
  /** What the child wrote on stderr, the last 64 KiB (for error messages). */
  stderr(): string;
  readonly exited: Promise<number | null>;
}

/** Spawns a long-running peer; the tail of stderr is kept, stdout is read with waitForLine. */
export function startDaemon(command: string, args: string[], opts: SpawnOptions = {}): Daemon {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], ...opts });
  if (child.pid === undefined) throw new Error(`cannot start ${command}`);
  live.add(child);
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-65536);
  });
  // Keep stdout flowing even when nobody waits for a line on it, so a chatty peer never blocks on a full pipe.
  child.stdout?.on('data', () => undefined);
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      live.delete(child);
      resolve(code);
    });
    child.once('error', () => {
      live.delete(child);
      resolve(null);
    });
  });
  return { child, pid: child.pid, stderr: () => err, exited };
}

/** Asks politely (the signal given), then SIGKILL after graceMs. */
export async function stopDaemon(d: Daemon, signal: NodeJS.Signals = 'SIGTERM', graceMs = 3000): Promise<void> {
  if (d.child.exitCode !== null || d.child.signalCode !== null) return;
  d.child.kill(signal);
  const timer = setTimeout(() => d.child.kill('SIGKILL'), graceMs);
  await d.exited;
  clearTimeout(timer);
}

/** For children that exit when their stdin closes (the transport peer, rblk-target): close it, SIGKILL after graceMs. */
export async function endDaemon(d: Daemon, graceMs = 5000): Promise<void> {
  if (d.child.exitCode !== null || d.child.signalCode !== null) return;
  d.child.stdin?.end();
  const timer = setTimeout(() => d.child.kill('SIGKILL'), graceMs);
  await d.exited;
  clearTimeout(timer);
}

/** A TCP port on 127.0.0.1 free right now (for peers that cannot bind port 0 and report it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts on 127.0.0.1:port; rejects after timeoutMs or when the daemon dies. */
export async function waitForPort(port: number, d: Daemon, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (d.child.exitCode !== null) throw new Error(`exited with ${d.child.exitCode} before listening: ${d.stderr().trim().slice(-500)}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > end) throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits for the first line of `stream` matching re, and returns the match. */
export function waitForLine(d: Daemon, which: 'stdout' | 'stderr', re: RegExp, timeoutMs = 20_000): Promise<RegExpMatchArray> {
  const stream = which === 'stdout' ? d.child.stdout : d.child.stderr;
  if (!stream) return Promise.reject(new Error(`no ${which} to read`));
  return new Promise((resolve, reject) => {
    let buf = '';
    const done = (f: () => void): void => {
      clearTimeout(timer);
      stream.off('data', onData);
      f();
    };
    const onData = (chunk: Buffer): void => {
      buf += chunk.toString();
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const l of lines) {
        const m = l.match(re);
        if (m) return done(() => resolve(m));
      }
    };
    const timer = setTimeout(() => done(() => reject(new Error(`no line matching ${re} within ${timeoutMs} ms: ${d.stderr().trim().slice(-500)}`))), timeoutMs);
    stream.on('data', onData);
    void d.exited.then((code) => done(() => reject(new Error(`exited with ${code} before printing ${re}: ${d.stderr().trim().slice(-500)}`))));
  });
}
