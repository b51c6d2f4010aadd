// Starts target-main.ts in another process and hands back its port; every
// target is stopped (SIGTERM, then SIGKILL) when the test ends.
import type { ExecutionContext } from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { diesWithParent } from '../../../bench/parent-death.js';
import { notReturned, resources, type Resources } from '../../helpers/resources.js';

export interface TargetVolumeSpec {
  name: string;
  lun: number;
  size: number;
  blockSize?: 512 | 4096;
  readOnly?: boolean;
  /** Back the volume with this file (created sparse at size) instead of memory. */
  file?: string;
}

export interface TargetSpec {
  provider: 'tcp' | 'sockets';
  volumes: TargetVolumeSpec[];
  /** initiator name → secret. */
  secrets?: Record<string, string>;
  authRequired?: boolean;
  /** The target's name (default DEFAULT_TARGET_NAME). */
  targetName?: string;
}

export interface TargetProcess {
  port: number;
  provider: string;
  /** `rblk://127.0.0.1:PORT/VOLUME?provider=P` (no volume: the target only). */
  url(volume?: string): string;
  /** `127.0.0.1:PORT`, as discover takes it. */
  hostPort: string;
  stop(): Promise<void>;
}

const MAIN = fileURLToPath(new URL('./target-main.ts', import.meta.url));
const READY_MS = 20_000;

/** fds of each target once listening: every session must give its own back (docs/target.md "Resources per connection"). */
const baselines = new WeakMap<ChildProcess, Resources>();

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const base = baselines.get(child);
  baselines.delete(child);
  const leak = base === undefined ? null : await notReturned(base, { what: 'the target' });
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
  if (leak !== null) throw new Error(leak);
}

const started = new Set<ChildProcess>();

/** Stops every target this process started; for test.after.always. */
export async function stopAllTargets(): Promise<void> {
  await Promise.all([...started].map((c) => stopChild(c)));
  started.clear();
}

/**
 * Starts a target. With t, it is stopped when that test ends; without, it
 * lives until stopAllTargets() (a target shared by a file's tests).
 */
export async function startTargetProcess(t: ExecutionContext | null, spec: TargetSpec): Promise<TargetProcess> {
  const [cmd, ...args] = diesWithParent([process.execPath, '--import=tsx', MAIN, JSON.stringify(spec)]);
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  started.add(child);
  t?.teardown(() => stopChild(child));
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`target did not start within ${READY_MS} ms: ${stderr}`)), READY_MS);
    child.stdout?.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      const m = /listening (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        if (child.pid !== undefined) baselines.set(child, resources(child.pid));
        resolve(Number(m[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`target exited with ${code} before listening: ${stderr}`));
    });
  });
  return {
    port,
    provider: spec.provider,
    hostPort: `127.0.0.1:${port}`,
    url: (volume) => `rblk://127.0.0.1:${port}/${volume === undefined ? '' : encodeURIComponent(volume)}?provider=${spec.provider}`,
    stop: () => stopChild(child),
  };
}
