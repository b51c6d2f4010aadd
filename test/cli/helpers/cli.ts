// Runs the rblk CLI as a child process (`node --import=tsx bin-src/rblk.ts`),
// as a user would, and collects its exit status and output.
import type { ExecutionContext } from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pattern } from '../../../bench/kit/pattern.js';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ENTRY = join(ROOT, 'bin-src', 'rblk.ts');

export interface CliResult {
  code: number | null;
  stdout: Buffer;
  /** stdout as UTF-8. */
  out: string;
  stderr: string;
}

export interface CliOptions {
  input?: Buffer;
  env?: Record<string, string | undefined>;
  timeoutMs?: number;
  /** Run as this user and group (root only): a non-root caller's view. */
  uid?: number;
  gid?: number;
}

function childEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  // A secret in the test runner's environment must not leak into a test that expects none.
  const env: NodeJS.ProcessEnv = { ...process.env, RBLK_SECRET: undefined, RBLK_STATE_DIR: undefined };
  for (const [k, v] of Object.entries(extra)) env[k] = v;
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  return env;
}

export function spawnRblk(args: readonly string[], opts: CliOptions = {}): ChildProcess {
  const ids = opts.uid === undefined ? {} : { uid: opts.uid, gid: opts.gid ?? opts.uid };
  return spawn(process.execPath, ['--import=tsx', ENTRY, ...args], { cwd: ROOT, env: childEnv(opts.env), stdio: ['pipe', 'pipe', 'pipe'], ...ids });
}

// ava runs a file's tests at once; dozens of node processes starting together on a
// small machine only time each other out. Two at a time keeps every file well inside its budget.
const MAX_RUNNING = 2;
let running = 0;
const queue: Array<() => void> = [];

async function slot<T>(fn: () => Promise<T>): Promise<T> {
  if (running >= MAX_RUNNING) await new Promise<void>((r) => queue.push(r));
  running++;
  try {
    return await fn();
  } finally {
    running--;
    queue.shift()?.();
  }
}

/** Runs `rblk ARGS` to completion (killed after timeoutMs, 30 s unless given). */
export function rblk(args: readonly string[], opts: CliOptions = {}): Promise<CliResult> {
  return slot(() => runToEnd(args, opts));
}

async function runToEnd(args: readonly string[], opts: CliOptions): Promise<CliResult> {
  const child = spawnRblk(args, opts);
  const out: Buffer[] = [];
  let stderr = '';
  child.stdout?.on('data', (b: Buffer) => out.push(b));
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  child.stdin?.on('error', () => undefined);
  child.stdin?.end(opts.input ?? Buffer.alloc(0));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
  const [code] = (await once(child, 'close')) as [number | null];
  clearTimeout(timer);
  const stdout = Buffer.concat(out);
  return { code, stdout, out: stdout.toString('utf8'), stderr };
}

/** A long-running rblk (attach): resolves once a stdout line matches, with the line. */
export async function startRblk(t: ExecutionContext, args: readonly string[], ready: RegExp, opts: CliOptions = {}): Promise<{ child: ChildProcess; match: RegExpExecArray; output: () => { out: string; err: string } }> {
  const child = spawnRblk(args, opts);
  child.stdin?.end();
  let out = '';
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (err += s));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
  });
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`rblk ${args.join(' ')} printed nothing matching ${ready} in 30 s: ${out} ${err}`)), 30_000);
    child.stdout?.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`rblk ${args.join(' ')} exited with ${code}: ${out} ${err}`));
    });
  });
  return { child, match, output: () => ({ out, err }) };
}

/** A directory under os.tmpdir(), removed when the test ends. */
export async function tempDir(t: ExecutionContext, prefix = 'cli'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `rblk-${prefix}-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A secret file with the given mode. */
export async function secretFile(dir: string, secret: string, mode = 0o600): Promise<string> {
  const p = join(dir, `secret-${mode.toString(8)}`);
  await writeFile(p, `${secret}\n`, { mode });
  await chmod(p, mode);
  return p;
}

/** A 127.0.0.1 port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const addr = s.address();
  await new Promise<void>((r) => s.close(() => r()));
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  return addr.port;
}

export { pattern };
