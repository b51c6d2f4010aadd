// rblk as a user deploys it: rblkd (bin-src/rblkd.ts) serving the backing
// file, reached through the `rblk` library (initiator/index.ts: connect(),
// Session, Volume, zero-copy buffers from session.allocate()) in this
// process, and through `rblk attach`'s NBD export driven by fio's nbd engine
// (the same client as for nbdkit). Both are looked up at run time: while they
// are not built, their rows say so instead of failing the run.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasCommand, nodeScript, scriptExists, startDaemon, stopDaemon, waitForLine, waitForPort, type Daemon } from './children.js';
import { CpuMeter } from './cpu.js';
import { runFio } from './fio.js';
import { runLoop } from './load-loop.js';
import { isRead, type BenchContext, type Measurement, type SystemInfo, type SystemResult } from './workload.js';
// Types only (erased): the module itself is imported at run time, once it is known to exist.
import type { RegisteredBuffer } from '../../initiator/index.js';

type Library = typeof import('../../initiator/index.js');

const VOLUME = 'bench';

/** How long both ends of the busy-polling library row spin before they sleep (rblkd's busy_poll_us, the library's busyPollMicros). */
export const BENCH_BUSY_POLL_US = 50;

/**
 * The library row; with fastPath false (id rblk-lib-PROVIDER-js) its
 * initiator sends every command from JavaScript; with busyPoll (id
 * rblk-lib-PROVIDER-poll) both ends spin BENCH_BUSY_POLL_US before they sleep.
 */
export function librarySystem(provider: string, fastPath = true, busyPoll = false): SystemInfo {
  if (busyPoll) {
    return {
      id: `rblk-lib-${provider}-poll`,
      label: `rblk library → rblkd, ${provider}, busy polling ${BENCH_BUSY_POLL_US} µs both ends`,
      kind: 'rblk',
      driver: `in-process loop, rblk library (zero-copy buffers, busyPollMicros ${BENCH_BUSY_POLL_US}; rblkd busy_poll_us ${BENCH_BUSY_POLL_US})`,
    };
  }
  if (!fastPath) {
    return { id: `rblk-lib-${provider}-js`, label: `rblk library → rblkd, ${provider}, initiator fastPath off`, kind: 'rblk', driver: 'in-process loop, rblk library (zero-copy buffers, fastPath: false)' };
  }
  return { id: `rblk-lib-${provider}`, label: `rblk library → rblkd, ${provider}`, kind: 'rblk', driver: 'in-process loop, rblk library (zero-copy buffers)' };
}

export const RBLK_NBD: SystemInfo = { id: 'rblk-nbd-tcp', label: 'rblk attach NBD export → rblkd, tcp', kind: 'rblk', driver: 'fio --ioengine=nbd' };

/** The NBD export's row; with fastPath false (rblk-nbd-tcp-js), `rblk attach --fast-path off`. */
export function nbdSystem(fastPath = true): SystemInfo {
  return fastPath ? RBLK_NBD : { id: 'rblk-nbd-tcp-js', label: 'rblk attach NBD export → rblkd, tcp, initiator fastPath off', kind: 'rblk', driver: 'fio --ioengine=nbd' };
}

export interface Rblkd {
  readonly d: Daemon;
  readonly ports: ReadonlyMap<string, number>;
  readonly dir: string;
}

/** Why rblkd or the library cannot be used in this build, or null. */
export function rblkProblem(): string | null {
  for (const rel of ['bin-src/rblkd', 'initiator/index'])
    if (!scriptExists(rel)) return `not available yet: ${nodeScript(rel).path} does not exist`;
  return null;
}

export interface RblkdSetup {
  readonly file: string;
  readonly lbaSize: number;
  /** O_DIRECT, as every server in the peers bench (see peers.ts on the page cache). */
  readonly direct: boolean;
  /** Fabric listeners, one per libfabric provider, on 127.0.0.1 port 0. */
  readonly providers: readonly string[];
  /** An iSCSI listener (protocol: iscsi) on 127.0.0.1 at this port, if given. */
  readonly iscsiPort?: number;
  /** An NVMe/TCP listener (protocol: nvme-tcp) on 127.0.0.1 at this port, if given. */
  readonly nvmePort?: number;
  /** The subsystem NQN (nqn:), with nvmePort. */
  readonly nqn?: string;
  readonly targetName?: string;
  /** Serve the volume thin-provisioned (UNMAP, WRITE SAME with UNMAP, GET LBA STATUS). */
  readonly thin?: boolean;
  /** The volume's physical_block_size; rblkd's default (4096) when absent. */
  readonly physicalBlockSize?: number;
  /** rblkd's fast_path (peers --fast-path); on when absent. */
  readonly fastPath?: boolean;
  /** rblkd's busy_poll_us; 0 when absent. */
  readonly busyPollMicros?: number;
  /** rblkd's reactors; its default (auto) when absent. */
  readonly reactors?: number;
}

/** The volume rblkd serves; over iSCSI it is LUN 0. */
export const RBLK_VOLUME = VOLUME;

function configYaml(s: RblkdSetup, stateDir: string): string {
  const listeners = s.providers.map((p) => `  - { provider: ${p}, address: 127.0.0.1, port: 0 }`);
  if (s.iscsiPort !== undefined) listeners.push(`  - { protocol: iscsi, address: 127.0.0.1, port: ${s.iscsiPort} }`);
  if (s.nvmePort !== undefined) listeners.push(`  - { protocol: nvme-tcp, address: 127.0.0.1, port: ${s.nvmePort} }`);
  return [
    ...(s.targetName !== undefined ? [`target_name: ${s.targetName}`] : []),
    ...(s.nqn !== undefined ? [`nqn: ${s.nqn}`] : []),
    'listeners:',
    ...listeners,
    'volumes:',
    `  - { name: ${VOLUME}, path: ${JSON.stringify(s.file)}, block_size: ${s.lbaSize}${s.physicalBlockSize !== undefined ? `, physical_block_size: ${s.physicalBlockSize}` : ''}, direct: ${s.direct}${s.thin ? ', thin: true' : ''} }`,
    'limits: { queue_depth: 128, max_io: 1MiB, keepalive_ms: 60000 }',
    'logging: { level: info, format: text }',
    `state_dir: ${JSON.stringify(stateDir)}`,
    `fast_path: ${s.fastPath === false ? 'off' : 'on'}`,
    `busy_poll_us: ${s.busyPollMicros ?? 0}`,
    ...(s.reactors !== undefined ? [`reactors: ${s.reactors}`] : []),
    '',
  ].join('\n');
}

/** Starts rblkd with one listener per provider on 127.0.0.1, port 0, and learns the ports from its log. */
export function startRblkd(ctx: BenchContext, providers: readonly string[], iscsiPort?: number, busyPollMicros = 0): Promise<Rblkd> {
  return launchRblkd({ file: ctx.file, lbaSize: ctx.lbaSize, direct: true, providers, iscsiPort, fastPath: ctx.fastPath, busyPollMicros });
}

/**
 * Starts rblkd as configured. The fabric ports are learned from its log; the
 * iSCSI port is chosen by the caller (a free one) and waited for, so this does
 * not depend on how the iSCSI listener words its log line.
 */
export async function launchRblkd(setup: RblkdSetup): Promise<Rblkd> {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-peers-'));
  const config = join(dir, 'rblkd.yaml');
  writeFileSync(config, configYaml(setup, join(dir, 'state')));
  const s = nodeScript('bin-src/rblkd');
  const d = startDaemon(process.execPath, [...s.args, '--config', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    await waitForLine(d, 'stderr', /rblkd ready/);
    // rblkd logs "listening PROVIDER ADDRESS:PORT" for each listener before it is ready.
    const ports = new Map<string, number>();
    for (const m of d.stderr().matchAll(/listening (\S+) 127\.0\.0\.1:(\d+)/g)) ports.set(m[1], Number(m[2]));
    for (const p of setup.providers) if (!ports.has(p)) throw new Error(`rblkd logged no listener for ${p}`);
    if (setup.iscsiPort !== undefined) {
      await waitForPort(setup.iscsiPort, d);
      ports.set('iscsi', setup.iscsiPort);
    }
    if (setup.nvmePort !== undefined) {
      await waitForPort(setup.nvmePort, d);
      ports.set('nvme-tcp', setup.nvmePort);
    }
    return { d, ports, dir };
  } catch (e) {
    // The error quotes rblkd's stderr (waitForLine, waitForPort).
    await stopDaemon(d, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

export async function stopRblkd(r: Rblkd): Promise<void> {
  await stopDaemon(r.d, 'SIGTERM', 15_000);
  rmSync(r.dir, { recursive: true, force: true });
}

export async function runRblkLibrary(ctx: BenchContext, daemon: Rblkd, provider: string, fastPath = true, busyPoll = false): Promise<SystemResult> {
  const system = librarySystem(provider, fastPath, busyPoll);
  const port = daemon.ports.get(provider);
  if (port === undefined) return { system, measurements: [], unavailable: `rblkd has no ${provider} listener` };
  const lib: Library = await import('../../initiator/index.js');
  const session = await lib.connect({
    address: '127.0.0.1',
    port,
    provider,
    initiatorName: 'iqn.2026-11.io.rblk:bench-initiator',
    volume: VOLUME,
    fastPath,
    busyPollMicros: busyPoll ? BENCH_BUSY_POLL_US : 0,
    // Enough credits that the deepest workload never waits for one.
    queueDepth: Math.max(...ctx.workloads.map((w) => w.queueDepth)) * 2,
    // The I/O pool is queueDepth × maxIo: no bigger than the largest block the workloads move.
    maxIo: Math.max(...ctx.workloads.map((w) => w.blockSize)),
  });
  const measurements: Measurement[] = [];
  try {
    const vol = await session.open(VOLUME);
    try {
      for (const w of ctx.workloads) {
        ctx.progress(`rblk library ${provider}: ${w.label}`);
        const bufs: RegisteredBuffer[] = [];
        for (let i = 0; i < w.queueDepth; i++) {
          const b = session.allocate(w.blockSize);
          b.buffer.fill(0x5a ^ i);
          bufs.push(b);
        }
        try {
          const read = isRead(w);
          const meter = new CpuMeter([
            { name: 'bench (library)', side: 'client', pid: process.pid },
            { name: 'rblkd', side: 'server', pid: daemon.d.pid },
          ]);
          const r = await runLoop(w, Math.min(vol.size, ctx.fileSize), ctx.seconds, async (slot, offset) => {
            if (read) await vol.read(offset, bufs[slot]);
            else await vol.write(offset, bufs[slot]);
          });
          measurements.push({ workload: w.id, ...r, cpu: meter.stop() });
        } finally {
          for (const b of bufs) b.release();
        }
      }
    } finally {
      vol.close();
    }
  } finally {
    await session.close();
  }
  return { system, measurements };
}

export async function runRblkNbd(ctx: BenchContext, daemon: Rblkd, fastPath = true): Promise<SystemResult> {
  const system = nbdSystem(fastPath);
  const port = daemon.ports.get('tcp');
  if (port === undefined) return { system, measurements: [], unavailable: 'rblkd has no tcp listener' };
  if (!hasCommand('fio')) return { system, measurements: [], unavailable: 'fio is not installed (apt-get install fio)' };
  if (!scriptExists('bin-src/rblk')) return { system, measurements: [], unavailable: `not available yet: ${nodeScript('bin-src/rblk').path} does not exist` };
  const s = nodeScript('bin-src/rblk');
  const attach = startDaemon(process.execPath, [...s.args, 'attach', `rblk://127.0.0.1:${port}/${VOLUME}`, '--provider', 'tcp', '--nbd-port', '0', '--fast-path', fastPath ? 'on' : 'off'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const measurements: Measurement[] = [];
  try {
    let uri: string;
    try {
      uri = (await waitForLine(attach, 'stdout', /serving .* at (nbd:\/\/\S+)/))[1];
    } catch (e) {
      return { system, measurements: [], unavailable: `rblk attach did not start: ${(e as Error).message}` };
    }
    for (const w of ctx.workloads) {
      ctx.progress(`rblk attach NBD: ${w.label}`);
      const meter = new CpuMeter([
        { name: 'rblk attach', side: 'client', pid: attach.pid },
        { name: 'rblkd', side: 'server', pid: daemon.d.pid },
      ]);
      const r = await runFio({ engine: 'nbd', uri }, w, ctx.seconds);
      const cpu = meter.stop();
      if (r.cpuMs !== null) cpu.push({ process: 'fio', side: 'client', cpuMs: r.cpuMs });
      measurements.push({ workload: w.id, iops: r.iops, mbps: r.mbps, p50us: r.p50us, p99us: r.p99us, meanUs: r.meanUs, ios: r.ios, seconds: r.seconds, cpu });
    }
  } finally {
    await stopDaemon(attach, 'SIGTERM', 10_000);
  }
  return { system, measurements };
}
