// kill -9 and SIGTERM of rblkd under an initiator path that keeps writing: FUA writes
// through the library, through the library's NVMe/TCP host (rblkd's nvme-tcp listener), or
// through the NBD export of `rblk attach` (FUA flag on every
// NBD_CMD_WRITE). A ledger (ledger.ts) remembers every acknowledged write; after the runs
// each block is read back through the path and straight from the backing file. Also
// measured: how long after rblkd is listening again the first write is acknowledged.
import { closeSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { librarySession, NbdClient, nvmeSession } from './clients.js';
import { SoakDaemon } from './daemon.js';
import { Ledger, type BlockClient } from './ledger.js';
import { spawnEntry, within, type Child } from './processes.js';
import { median, newRow, type SoakRow } from './report.js';
import { eventually } from '../kit/wait.js';

export type KillPath = 'library' | 'nvme' | 'nbd';

/** The subsystem NQN of the soak's nvme-tcp listener. */
const SOAK_NQN = 'nqn.2026-12.io.rblk:soak';

const PATH_WRITES: Record<KillPath, string> = { library: 'library FUA writes', nvme: 'NVMe/TCP host FUA writes', nbd: 'NBD export FUA writes' };

export interface KillOptions {
  path: KillPath;
  signal: 'SIGKILL' | 'SIGTERM';
  kills: number;
  /** Acknowledged writes between kills. */
  writesBetween?: number;
  log?: (line: string) => void;
}

/** Bounds every wait for progress; hitting one is reported, never a measurement. */
const PROGRESS_MS = 60_000;

export interface PathHandle {
  client: BlockClient;
  /** Ends the path; pending writes fail. */
  close(): Promise<void>;
  detail(): string;
}

export async function openPath(path: KillPath, daemon: SoakDaemon, library: Parameters<typeof librarySession>[1] = {}): Promise<PathHandle> {
  if (path === 'library') {
    const s = await librarySession(daemon.url('v'), library);
    return { client: s.client, close: () => s.session.close(), detail: () => `${s.reconnectErrors()} failed reconnect attempts` };
  }
  if (path === 'nvme') {
    if (daemon.nvmePort === undefined) throw new Error('rblkd has no nvme-tcp listener (setup.nvme)');
    const s = await nvmeSession(`nvme+tcp://127.0.0.1:${daemon.nvmePort}/${SOAK_NQN}`);
    return { client: s.client, close: () => s.session.close(), detail: () => `${s.reconnectErrors()} paths lost or failed to reconnect` };
  }
  const sock = join(daemon.dir, 'nbd.sock');
  const attach: Child = spawnEntry('rblk', ['attach', daemon.url('v'), '--nbd-socket', sock]);
  try {
    await attach.waitForLine(/^serving /, { ms: 30_000 });
    const nbd = await NbdClient.open(sock, 'v');
    return {
      client: nbd,
      close: async () => {
        await within(nbd.close(), 5000, null);
        attach.kill('SIGTERM');
        const t = setTimeout(() => attach.kill('SIGKILL'), 10_000);
        await attach.exited;
        clearTimeout(t);
      },
      detail: () => (attach.running ? 'rblk attach still running' : 'rblk attach exited'),
    };
  } catch (e) {
    await attach.stop();
    throw e;
  }
}

export function fileClient(path: string): BlockClient & { close(): void } {
  const fd = openSync(path, 'r');
  return {
    write: () => Promise.reject(new Error('read-only')),
    read: (offset, length) => {
      const b = Buffer.alloc(length);
      readSync(fd, b, 0, length, offset);
      return Promise.resolve(b);
    },
    close: () => closeSync(fd),
  };
}

export async function killRestart(o: KillOptions): Promise<SoakRow> {
  const row = newRow(`${o.signal === 'SIGKILL' ? 'kill -9' : 'SIGTERM'} rblkd, ${PATH_WRITES[o.path]}`);
  const log = o.log ?? (() => undefined);
  const nvme = o.path === 'nvme';
  const daemon = new SoakDaemon({ volumes: [{ name: 'v', path: 'v.img', size: '32MiB' }], ...(nvme ? { nvme, extra: { nqn: SOAK_NQN } } : {}) });
  const ledger = new Ledger(4, 512);
  const resumes: number[] = [];
  let handle: PathHandle | null = null;
  try {
    await daemon.start();
    handle = await openPath(o.path, daemon);
    const h = handle;
    ledger.start(() => h.client, true);
    const between = o.writesBetween ?? 40;
    // The first acknowledgement at or after `since` ends a wait for I/O to resume; one
    // while rblkd is down is counted (nothing should be acknowledged then).
    let down = false;
    let ackedWhileDown = 0;
    let resumeWaiter: { since: number; resolve: (at: number) => void } | null = null;
    ledger.onAck = () => {
      const now = performance.now();
      if (down) ackedWhileDown++;
      if (resumeWaiter !== null && now >= resumeWaiter.since) {
        resumeWaiter.resolve(now);
        resumeWaiter = null;
      }
    };
    for (let k = 0; k < o.kills; k++) {
      const target = ledger.stats.acked + between;
      if (!(await eventually(() => ledger.stats.acked >= target, PROGRESS_MS))) {
        row.notes.push(`run ${k + 1}: no write acknowledged for ${PROGRESS_MS / 1000} s (${h.detail()})`);
        row.ok = false;
        break;
      }
      const exit = await daemon.kill(o.signal);
      down = true;
      if (o.signal === 'SIGTERM' && exit.code !== 0) row.notes.push(`run ${k + 1}: SIGTERM exit ${exit.code ?? exit.signal}`);
      await daemon.restart();
      down = false;
      const listening = performance.now();
      const resumed = new Promise<number>((resolve) => (resumeWaiter = { since: listening, resolve }));
      const at = await within(resumed, PROGRESS_MS, null);
      row.runs++;
      if (at === null) {
        row.notes.push(`run ${k + 1}: I/O did not resume within ${PROGRESS_MS / 1000} s of the restart (${h.detail()})`);
        row.ok = false;
        break;
      }
      resumes.push(at - listening);
      log(`  ${row.scenario}: run ${row.runs}/${o.kills}, ${ledger.stats.acked} acknowledged, resumed after ${(at - listening).toFixed(0)} ms`);
    }
    if (ackedWhileDown > 0) {
      row.notes.push(`${ackedWhileDown} writes acknowledged while rblkd was down`);
      row.ok = false;
    }
    const stopped = await within(ledger.stop().then(() => true), PROGRESS_MS, false);
    if (!stopped) {
      row.notes.push('writers still blocked at the end; the path was closed under them');
      row.ok = false;
      await h.close();
      handle = null;
      await ledger.stop();
    }
    const viaPath = handle !== null ? await ledger.verify(h.client).catch((e: unknown) => ({ checked: 0, lost: 0, examples: [`read back through the path failed: ${String(e)}`] })) : null;
    if (handle !== null) {
      await handle.close();
      handle = null;
    }
    await daemon.kill('SIGTERM');
    const file = fileClient(join(daemon.dir, 'v.img'));
    const viaFile = await ledger.verify(file);
    file.close();
    row.operations = ledger.stats.writes;
    row.lost = Math.max(viaFile.lost, viaPath?.lost ?? 0);
    row.healthyErrors = ledger.stats.failed;
    row.notes.push(`${ledger.stats.acked} acknowledged over ${viaFile.checked} blocks`);
    if (viaPath !== null && viaPath.lost !== viaFile.lost) row.notes.push(`lost read through the path: ${viaPath.lost}, in the file: ${viaFile.lost}`);
    row.notes.push(...viaFile.examples, ...(viaPath?.examples ?? []).slice(0, 1));
    const p50 = median(resumes);
    if (p50 !== undefined) row.notes.push(`I/O resumed p50 ${p50.toFixed(0)} ms after rblkd listened again (max ${Math.max(...resumes).toFixed(0)} ms)`);
    if (ledger.stats.errors.length > 0) row.notes.push(`write errors: ${ledger.stats.errors.slice(0, 2).join(' / ')}`);
  } catch (e) {
    row.ok = false;
    row.notes.push(`aborted: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
  } finally {
    if (handle !== null) await within(handle.close().catch(() => undefined), 15_000, null);
    await within(ledger.stop().catch(() => undefined), 15_000, null);
    row.daemonExits = daemon.unexpectedExits;
    row.notes.push(...daemon.exitReports.map((r) => r.split('\n')[0]));
    await daemon.close();
  }
  if (row.lost > 0 || row.daemonExits > 0) row.ok = false;
  return row;
}
