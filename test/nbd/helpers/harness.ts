// Test plumbing shared by the NBD tests: a server on 127.0.0.1:0 or a temp
// unix socket, temp dirs, random files, and real NBD clients run as child
// processes that are killed in teardown.
import type { ExecutionContext } from 'ava';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BlockDevice } from '../../../initiator/block-device.js';
import { NbdServer, type NbdServerOptions } from '../../../initiator/nbd/index.js';
import type { Address } from './raw-client.js';
import { until } from '../../../bench/kit/wait.js';

export interface LogLine {
  level: string;
  msg: string;
}

export interface Served {
  server: NbdServer;
  address: Address;
  /** Log lines the server wrote. */
  logs: LogLine[];
  /** nbd:// or nbd+unix:// URI of an export. */
  uri(name: string): string;
}

export async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rblk-nbd-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Starts a server (TCP on 127.0.0.1:0 unless `unix`) that is closed in teardown. */
export async function serve(
  t: ExecutionContext,
  exports: Map<string, BlockDevice> | BlockDevice,
  opts: NbdServerOptions & { unix?: boolean } = {},
): Promise<Served> {
  const logs: LogLine[] = [];
  const server = new NbdServer(exports, { ...opts, log: (level, msg) => logs.push({ level, msg }) });
  t.teardown(() => server.close());
  const listenOn = opts.unix === true ? { path: join(await tempDir(t), 'nbd.sock') } : { host: '127.0.0.1', port: 0 };
  const address = await server.listen(listenOn);
  const uri = (name: string): string =>
    address.path !== undefined
      ? `nbd+unix:///${encodeURIComponent(name)}?socket=${address.path}`
      : `nbd://127.0.0.1:${address.port}/${encodeURIComponent(name)}`;
  return { server, address, logs, uri };
}

/** Fails the test (by throwing) with the package to install when a client binary is absent. */
export function requireTool(bin: string, pkg: string): void {
  const found = spawnSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' });
  if (found.status !== 0) {
    throw new Error(`${bin} is not installed: install the Debian package ${pkg} (apt-get install ${pkg})`);
  }
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a client asynchronously (the server lives in this process, so a
 * synchronous spawn would deadlock) and kills it in teardown if still running.
 */
export function run(t: ExecutionContext, cmd: string, args: string[]): Promise<RunResult> {
  const child: ChildProcess = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Runs a client and fails the test, with its output, unless it exits 0. */
export async function runOk(t: ExecutionContext, cmd: string, args: string[]): Promise<RunResult> {
  const result = await run(t, cmd, args);
  if (result.code !== 0) {
    throw new Error(`${cmd} ${args.join(' ')} exited ${result.code ?? result.signal}:\n${result.stderr}${result.stdout}`);
  }
  return result;
}

export async function randomFile(path: string, size: number): Promise<Buffer> {
  const data = randomBytes(size);
  await writeFile(path, data);
  return data;
}

/** First differing byte offset, or -1 when equal (a readable failure for big buffers). */
export function firstDifference(a: Buffer, b: Buffer): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  if (a.equals(b)) return -1;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

export { until };
