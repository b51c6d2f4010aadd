// The real rblkd as a child process (the test kit's launcher, bench/kit/child.ts), with
// its stderr collected line by line, a temporary directory for its config, state and
// volumes, and teardown that always kills it and removes the directory.
import type { ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ExecutionContext } from 'ava';
import { dump } from 'js-yaml';
import { spawnEntry, type Exit } from '../../../bench/kit/child.js';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Guards against a hang; never an assertion about speed. A loaded 2-core machine has taken over 20 s to start one. */
const WAIT_MS = 40_000;

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

export type { Exit } from '../../../bench/kit/child.js';

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
  const c = spawnEntry('rblkd', args, { env, fdLimit: opts.fdLimit, stdout: 'keep' });
  t.teardown(() => c.stop());
  const waitForLine = (re: RegExp, from = 0): Promise<RegExpMatchArray> => c.waitForLine(re, { ms: WAIT_MS, from });
  return {
    child: c.proc,
    lines: c.lines,
    stdout: () => c.stdout(),
    exited: c.exited,
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
      c.kill(signal);
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
export async function ctl(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const c = spawnEntry('rblkd', ['ctl', ...args], { stdout: 'keep' });
  const { code } = await c.exited;
  return { code, stdout: c.stdout(), stderr: c.lines.map((l) => `${l}\n`).join('') };
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
