// rblkd under a soak: its own directory, config and state; started, killed and started again
// on the same ports (the first start takes free ports, later starts pin them, so initiators
// reconnect to the same address); and a count of exits nobody asked for.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { Child, fdCount, rssKiB, sleep, spawnEntry, within, type Exit } from './processes.js';

export type SoakProvider = 'tcp' | 'sockets' | 'shm' | 'tcp;ofi_rxm';

export interface DaemonSetup {
  /** Volumes as in rblkd.yaml; a relative path is inside the daemon's directory. */
  volumes: Record<string, unknown>[];
  providers?: SoakProvider[];
  limits?: Record<string, unknown>;
  /** Other top-level keys of rblkd.yaml (auth, ...). */
  extra?: Record<string, unknown>;
  /** Also an NVMe/TCP listener (docs/nvme.md), on its own port. */
  nvme?: boolean;
}

/** Guards a start against a hang; never a measurement. */
const START_MS = 30_000;

export class SoakDaemon {
  readonly dir: string;
  readonly configPath: string;
  /** provider → port, fixed after the first start. */
  readonly ports = new Map<SoakProvider, number>();
  /** The NVMe/TCP listener's port, fixed after the first start (setup.nvme). */
  nvmePort: number | undefined;
  child: Child | null = null;
  /** Exits that were not a kill or stop of ours. */
  unexpectedExits = 0;
  /** Why, for each unexpected exit: its status and last log lines. */
  readonly exitReports: string[] = [];
  #expecting = false;

  constructor(
    readonly setup: DaemonSetup,
    dir?: string,
  ) {
    this.dir = dir ?? mkdtempSync(join(tmpdir(), 'rblk-soak-'));
    this.configPath = join(this.dir, 'rblkd.yaml');
  }

  get providers(): SoakProvider[] {
    return this.setup.providers ?? ['tcp'];
  }

  port(provider: SoakProvider = this.providers[0]): number {
    const p = this.ports.get(provider);
    if (p === undefined) throw new Error(`rblkd has no ${provider} listener yet`);
    return p;
  }

  url(volume: string, provider: SoakProvider = this.providers[0]): string {
    return `rblk://127.0.0.1:${this.port(provider)}/${volume}?provider=${provider}`;
  }

  get pid(): number {
    if (this.child === null || !this.child.running) throw new Error('rblkd is not running');
    return this.child.pid;
  }

  /** Running and not on its way out (a process in exit has no fds left but no exit status yet). */
  get alive(): boolean {
    if (this.child === null || !this.child.running) return false;
    try {
      return !/^State:\s+[ZX]/m.test(readFileSync(`/proc/${this.child.pid}/status`, 'utf8')) && fdCount(this.child.pid) > 0;
    } catch {
      return false;
    }
  }

  /**
   * After rblkd died by itself: wait for its exit (SIGKILL if it hangs on the way out; the
   * exit still counts as unexpected), then start it again on the same ports. Concurrent
   * callers share one restart.
   */
  recover(): Promise<void> {
    this.#recovering ??= (async () => {
      const child = this.child;
      if (child !== null && child.running) {
        if ((await within(child.exited, 10_000, null)) === null) child.kill('SIGKILL');
        await child.exited;
      }
      await this.restart();
    })().finally(() => (this.#recovering = null));
    return this.#recovering;
  }
  #recovering: Promise<void> | null = null;

  fds(): number {
    return fdCount(this.pid);
  }

  rss(): number {
    return rssKiB(this.pid);
  }

  #writeConfig(): void {
    const config = {
      listeners: [
        ...this.providers.map((provider) => ({ provider, address: '127.0.0.1', port: this.ports.get(provider) ?? 0 })),
        ...(this.setup.nvme === true ? [{ protocol: 'nvme-tcp', address: '127.0.0.1', port: this.nvmePort ?? 0 }] : []),
      ],
      volumes: this.setup.volumes.map((v) => (typeof v.path === 'string' && !v.path.startsWith('/') ? { ...v, path: join(this.dir, v.path) } : v)),
      limits: { max_io: '128KiB', queue_depth: 32, drain_timeout_ms: 5000, keepalive_ms: 1000, ...this.setup.limits },
      state_dir: join(this.dir, 'state'),
      logging: { level: 'info' },
      ...this.setup.extra,
    };
    writeFileSync(this.configPath, dump(config));
  }

  /** Starts rblkd and waits until every listener is up. */
  async start(): Promise<void> {
    if (this.alive) throw new Error('rblkd is already running');
    this.#writeConfig();
    const child = spawnEntry('rblkd', ['--config', this.configPath]);
    this.child = child;
    this.#expecting = false;
    void child.exited.then((exit) => this.#exited(child, exit));
    // A restart can race the old listener's socket leaving TIME_WAIT: retry on EADDRINUSE.
    for (const provider of this.providers) {
      const m = await child.waitForLine(new RegExp(`listening ${provider} 127\\.0\\.0\\.1:(\\d+)`), { ms: START_MS });
      this.ports.set(provider, Number(m[1]));
    }
    if (this.setup.nvme === true) this.nvmePort = Number((await child.waitForLine(/listening nvme-tcp 127\.0\.0\.1:(\d+)/, { ms: START_MS }))[1]);
  }

  #exited(child: Child, exit: Exit): void {
    if (this.#expecting || child !== this.child) return;
    this.unexpectedExits++;
    const why = child.lines.find((l) => /\b(error|unhandled|uncaught|TypeError)\b/i.test(l))?.replace(/^\S+\s+/, '').slice(0, 160) ?? child.lines.at(-1) ?? '';
    this.exitReports.push(`rblkd exited by itself (${exit.signal ?? `code ${exit.code}`}): ${why}`);
  }

  /** Sends a signal we mean to send: the exit that follows is not counted as unexpected. */
  async kill(signal: 'SIGKILL' | 'SIGTERM'): Promise<Exit> {
    const child = this.child;
    if (child === null) throw new Error('rblkd was never started');
    this.#expecting = true;
    child.kill(signal);
    const exit = await child.exited;
    return exit;
  }

  /** Starts it again on the same ports; a port still held by the dead process is retried. */
  async restart(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.start();
        return;
      } catch (e) {
        if (attempt >= 10 || this.child?.running === true) throw e;
        await sleep(200);
      }
    }
  }

  /** Stops rblkd (SIGTERM, then SIGKILL if it hangs) and removes its directory. */
  async close(keepDir = false): Promise<void> {
    if (process.env.SOAK_DEBUG !== undefined) console.error(`rblkd log tail:\n${this.lines.slice(-40).join('\n')}`);
    if (this.child !== null && this.child.running) {
      this.#expecting = true;
      this.child.kill('SIGTERM');
      const t = setTimeout(() => this.child?.kill('SIGKILL'), 15_000);
      await this.child.exited;
      clearTimeout(t);
    }
    if (!keepDir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** The daemon's log lines since it last started. */
  get lines(): string[] {
    return this.child?.lines ?? [];
  }
}
