// The real rblkd (test/daemon/helpers/daemon-process.ts) with an nvme-tcp
// listener on 127.0.0.1 and file volumes, for the NVMe/TCP host's tests
// (test/initiator/nvme-*.test.ts): its port, its control socket, and the
// subsystem NQN to put in an nvme+tcp:// URL.
import type { ExecutionContext } from 'ava';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { controlRequest } from '../../../target/daemon/control-client.js';
import type { SessionInfo } from '../../../target/connection/environment.js';
import { baseConfig, spawnDaemon, workdir, type DaemonProcess, type Workdir } from '../../daemon/helpers/daemon-process.js';

export const NQN = 'nqn.2026-12.io.rblk:host-test';

export interface NvmeDaemon {
  readonly w: Workdir;
  readonly d: DaemonProcess;
  readonly port: number;
  readonly file: string;
  url(query?: string): string;
  sessions(): Promise<SessionInfo[]>;
  kick(id: string): Promise<unknown>;
  kill(signal: NodeJS.Signals): void;
}

/** A port nobody listens on right now, for a daemon that must come back on the same one. */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const a = s.address();
  await new Promise<void>((r) => s.close(() => r()));
  return typeof a === 'object' && a !== null ? a.port : 0;
}

export interface NvmeDaemonOptions {
  size?: string;
  thin?: boolean;
  port?: number;
  queueDepth?: number;
  /** O_DIRECT (the volume's direct:). */
  direct?: boolean;
  /** Reuse a work directory (a restarted daemon). */
  w?: Workdir;
}

export async function startNvmeDaemon(t: ExecutionContext, o: NvmeDaemonOptions = {}): Promise<NvmeDaemon> {
  const w = o.w ?? workdir(t);
  const file = join(w.dir, 'vol.img');
  if (o.w === undefined) {
    w.writeConfig(
      baseConfig(w, [{ name: 'vol', path: file, size: o.size ?? '16MiB', thin: o.thin ?? true, ...(o.direct ? { direct: true } : {}) }], {
        nqn: NQN,
        listeners: [{ protocol: 'nvme-tcp', address: '127.0.0.1', port: o.port ?? 0 }],
        limits: { queue_depth: o.queueDepth ?? 32 },
      }),
    );
  }
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = Number((await d.waitForLine(/listening nvme-tcp 127\.0\.0\.1:(\d+)/))[1]);
  const ctl = join(w.dir, 'rblkd.ctl');
  return {
    w,
    d,
    port,
    file,
    url: (query = '') => `nvme+tcp://127.0.0.1:${port}/${NQN}${query}`,
    sessions: async () => ((await controlRequest(ctl, 'sessions')) as SessionInfo[]).filter((s) => s.provider === 'nvme-tcp'),
    kick: (id) => controlRequest(ctl, 'kick', [id]),
    kill: (signal) => d.kill(signal),
  };
}
