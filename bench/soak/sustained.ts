// Sustained I/O, nothing killed (docs/reliability.md "Sustained sessions"): one rblkd
// (reactors off, then on), and for the whole phase every initiator path at once writes
// ledger blocks and reads each back (the library with registered buffers, with ordinary
// ones, the NBD export of `rblk attach`, and the library's NVMe/TCP host on rblkd's
// nvme-tcp listener with ordinary buffers, and with registered buffers, header and data
// digests and FUA writes). Nothing is killed, so the figure that
// matters is the reconnect count: each path must log in once and see no error. A
// session ended by its own keep-alive while busy shows here as a second login.
import { readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { connect, connectNvme, type RegisteredBuffer } from '../../initiator/index.js';
import { NbdClient } from './clients.js';
import { SoakDaemon } from './daemon.js';
import { blockContent, LEDGER_BLOCK } from './ledger.js';
import { spawnEntry, within, type Child } from './processes.js';
import { newRow, type SoakRow } from './report.js';

export interface SustainedOptions {
  /** Seconds of I/O per reactor setting. */
  seconds: number;
  reactors: number[];
  log?: (line: string) => void;
}

const BLOCKS = 4096; // 16 MiB of 4 KiB blocks
const WORKERS = 4;

interface PathRun {
  name: string;
  initiator: string;
  ops: number;
  mismatches: number;
  errors: string[];
  /** The library's own count; the NBD export's comes from the daemon's logins. */
  reconnects: number | null;
}

/** Workers on their own blocks: write unique bytes, read them back, compare; until `end`. */
async function verifiedLoop(
  run: PathRun,
  end: number,
  io: { write(offset: number, data: Buffer, worker: number): Promise<void>; read(offset: number, worker: number): Promise<Buffer> },
): Promise<void> {
  let serial = 1;
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      const mine = BLOCKS / WORKERS;
      while (Date.now() < end) {
        const block = w * mine + Math.floor(Math.random() * mine);
        const data = blockContent(block, serial++);
        try {
          await io.write(block * LEDGER_BLOCK, data, w);
          const back = await io.read(block * LEDGER_BLOCK, w);
          run.ops += 2;
          if (!back.equals(data)) run.mismatches++;
        } catch (e) {
          if (run.errors.length < 3) run.errors.push(e instanceof Error ? e.message : String(e));
          else run.errors.push('');
        }
      }
    }),
  );
}

/** What verifiedLoop needs of a volume: its reads and writes, FUA or not. */
interface LoopVolume {
  write(offset: number, data: Buffer, opts?: { fua?: boolean }): Promise<void>;
  read(offset: number, into: number | Buffer): Promise<Buffer>;
}

/**
 * Loops of verified I/O on a volume: with `memory`, each worker writes from and
 * reads into two ledger blocks of that registered memory of its own (zero-copy);
 * without, ordinary Buffers.
 */
function volumeLoop(run: PathRun, end: number, vol: LoopVolume, memory: RegisteredBuffer | null, fua: boolean): Promise<void> {
  const slot = (w: number, k: 0 | 1): Buffer => memory!.buffer.subarray((2 * w + k) * LEDGER_BLOCK, (2 * w + k + 1) * LEDGER_BLOCK);
  return verifiedLoop(run, end, {
    write: async (offset, data, w) => {
      if (memory === null) return vol.write(offset, data);
      data.copy(slot(w, 0));
      await vol.write(offset, slot(w, 0), { fua });
    },
    read: async (offset, w) => (memory === null ? vol.read(offset, LEDGER_BLOCK) : Buffer.from(await vol.read(offset, slot(w, 1)))),
  });
}

async function libraryPath(daemon: SoakDaemon, registered: boolean, end: number, reactors: number): Promise<PathRun> {
  const initiator = `iqn.2026-12.io.rblk:sustained-${registered ? 'registered' : 'pooled'}-r${reactors}`;
  const run: PathRun = { name: `library, ${registered ? 'registered' : 'pooled'} buffers`, initiator, ops: 0, mismatches: 0, errors: [], reconnects: 0 };
  const session = await connect(daemon.url(registered ? 'registered' : 'pooled'), { initiatorName: initiator, queueDepth: 8, timeouts: { lossMs: 60_000 } });
  session.on('error', (e: Error) => run.errors.push(`session: ${e.message}`));
  let memory: RegisteredBuffer | null = null;
  try {
    const vol = await session.open();
    memory = registered ? session.allocate(WORKERS * 2 * LEDGER_BLOCK) : null;
    await volumeLoop(run, end, vol, memory, false);
    run.reconnects = session.reconnects;
  } finally {
    memory?.release();
    await session.close();
  }
  return run;
}

/** The subsystem NQN of the sustained phase's nvme-tcp listener. */
const SUSTAINED_NQN = 'nqn.2026-12.io.rblk:soak-sustained';

/** NSIDs given in the config (docs/nvme.md), so the NVMe paths never depend on LUN order. */
const NVME_NSID = { plain: 9, registered: 10 } as const;

async function nvmePath(daemon: SoakDaemon, kind: 'plain' | 'registered', end: number, reactors: number): Promise<PathRun> {
  const hostnqn = `nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000${kind === 'plain' ? 'b1' : 'b2'}`;
  const run: PathRun = { name: `NVMe/TCP host, ${kind === 'plain' ? 'ordinary buffers' : 'registered buffers, digests, FUA'}`, initiator: hostnqn, ops: 0, mismatches: 0, errors: [], reconnects: 0 };
  const session = await connectNvme(`nvme+tcp://127.0.0.1:${daemon.nvmePort}/${SUSTAINED_NQN}`, {
    hostnqn,
    queueDepth: 8,
    timeouts: { lossMs: 60_000 },
    ...(kind === 'registered' ? { digests: { header: true, data: true } } : {}),
  });
  session.on('pathDown', (_p, why) => run.errors.push(`path down: ${why}`));
  let memory: RegisteredBuffer | null = null;
  try {
    const vol = await session.open(NVME_NSID[kind]);
    memory = kind === 'registered' ? session.allocate(WORKERS * 2 * LEDGER_BLOCK) : null;
    await volumeLoop(run, end, vol, memory, true);
    run.reconnects = session.reconnects;
  } finally {
    memory?.release();
    await session.close();
  }
  return run;
}

async function nbdPath(daemon: SoakDaemon, end: number, reactors: number): Promise<PathRun> {
  const initiator = `iqn.2026-12.io.rblk:sustained-nbd-r${reactors}`;
  const run: PathRun = { name: 'NBD export (rblk attach)', initiator, ops: 0, mismatches: 0, errors: [], reconnects: null };
  const sock = join(daemon.dir, `nbd-r${reactors}.sock`);
  const attach: Child = spawnEntry('rblk', ['attach', daemon.url('nbd'), '--initiator-name', initiator, '--nbd-socket', sock]);
  try {
    await attach.waitForLine(/^serving /, { ms: 30_000 });
    const nbd = await NbdClient.open(sock, 'nbd');
    try {
      await verifiedLoop(run, end, { write: (offset, data) => nbd.write(offset, data, false), read: (offset) => nbd.read(offset, LEDGER_BLOCK) });
    } finally {
      await within(nbd.close(), 5000, null);
    }
  } finally {
    attach.kill('SIGTERM');
    await within(attach.exited, 10_000, null);
    attach.kill('SIGKILL');
  }
  return run;
}

function openFds(pid: number): string[] {
  return readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      return '?';
    }
  });
}

/** One row per path and reactor setting: operations, errors, and the reconnect count, which must be 0. */
export async function sustained(o: SustainedOptions): Promise<SoakRow[]> {
  const log = o.log ?? (() => undefined);
  const rows: SoakRow[] = [];
  for (const reactors of o.reactors) {
    // Each path its own volume, so one path's bytes never meet another's.
    const daemon = new SoakDaemon({
      volumes: [
        ...['registered', 'pooled', 'nbd'].map((name) => ({ name, path: `${name}.img`, size: '16MiB' })),
        ...(['plain', 'registered'] as const).map((k) => ({ name: `nvme-${k}`, path: `nvme-${k}.img`, size: '16MiB', nsid: NVME_NSID[k] })),
      ],
      nvme: true,
      extra: { reactors, nqn: SUSTAINED_NQN },
    });
    try {
      await daemon.start();
      // The baseline is taken warmed up: what the first session opens once (and keeps) is not a leak.
      const warm = await connect(daemon.url('pooled'), { initiatorName: 'iqn.2026-12.io.rblk:sustained-warm-up' });
      await (await warm.open()).read(0, LEDGER_BLOCK);
      await warm.close();
      await new Promise((r) => setTimeout(r, 500));
      const fdsBefore = daemon.fds();
      const rssBefore = daemon.rss();
      const end = Date.now() + o.seconds * 1000;
      log(`  sustained: ${o.seconds} s of I/O through 5 paths, reactors ${reactors}`);
      const settled = await Promise.allSettled([
        libraryPath(daemon, true, end, reactors),
        libraryPath(daemon, false, end, reactors),
        nbdPath(daemon, end, reactors),
        nvmePath(daemon, 'plain', end, reactors),
        nvmePath(daemon, 'registered', end, reactors),
      ]);
      // Let the connections' ends reach the daemon before its fds are counted (bounded: a leak stays).
      for (let i = 0; i < 100 && daemon.fds() > fdsBefore; i++) await new Promise((r) => setTimeout(r, 100));
      const fdsAfter = daemon.fds();
      if (fdsAfter > fdsBefore) log(`  sustained: fds left: ${openFds(daemon.pid).join(' ')}`);
      const rssAfter = daemon.rss();
      for (const s of settled) {
        if (s.status === 'rejected') {
          const row = newRow(`sustained, reactors ${reactors}`);
          row.ok = false;
          row.notes.push(`aborted: ${String(s.reason)}`);
          rows.push(row);
          continue;
        }
        const p = s.value;
        const row = newRow(`sustained ${o.seconds} s, ${p.name}, reactors ${reactors}`);
        // rblk and iSCSI log `logged in … initiator=`, NVMe/TCP one `admin queue connected … host=` per controller.
        const login = (l: string): boolean => (/logged in/.test(l) && l.includes(`initiator=${p.initiator}`)) || (/NVMe\/TCP admin queue connected/.test(l) && l.includes(`host=${p.initiator}`));
        const logins = daemon.child?.lines.filter(login).length ?? 0;
        const reconnects = p.reconnects ?? Math.max(0, logins - 1);
        row.runs = 1;
        row.operations = p.ops;
        row.healthyErrors = p.errors.length;
        row.lost = p.mismatches;
        row.fdsBefore = fdsBefore;
        row.fdsAfter = fdsAfter;
        row.rssBeforeKiB = rssBefore;
        row.rssAfterKiB = rssAfter;
        row.notes.push(`reconnects ${reconnects}`, `logins ${logins}`, ...p.errors.filter((e) => e !== '').slice(0, 2));
        row.ok = reconnects === 0 && logins === 1 && p.errors.length === 0 && p.mismatches === 0 && p.ops > 0 && fdsAfter <= fdsBefore;
        rows.push(row);
        log(`  sustained: ${p.name}, reactors ${reactors}: ${p.ops} operations, ${p.errors.length} errors, ${reconnects} reconnects`);
      }
    } finally {
      for (const r of rows) r.daemonExits = daemon.unexpectedExits;
      await daemon.close();
    }
  }
  return rows;
}
