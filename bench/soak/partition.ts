// Network partitions between an initiator path and rblkd on loopback (nft.ts): both
// directions, towards the target only, back from the target only, each for a short and a
// long time, while the ledger (ledger.ts) keeps writing; and a partition during login.
// After each heal: I/O must resume, nothing acknowledged may be lost, and rblkd must have
// freed every stranded connection (its fd count back to what it was with one session)
// within its timeouts: keep-alive (2 × keepalive_ms / 2) and the 10 s login timeout.
import { join } from 'node:path';
import { connect } from '../../initiator/index.js';
import { SoakDaemon } from './daemon.js';
import { fileClient, openPath, type KillPath, type PathHandle } from './kill-restart.js';
import { Ledger } from './ledger.js';
import { Partition, type Direction } from './nft.js';
import { sleep, within } from './processes.js';
import { median, newRow, type SoakRow } from './report.js';
import { eventually } from '../kit/wait.js';

export interface PartitionOptions {
  path: KillPath;
  /** Partition lengths in ms; each is tried in every direction. */
  durationsMs: number[];
  directions?: Direction[];
  duringLogin?: boolean;
  log?: (line: string) => void;
}

/** A guard on every wait; never a measurement. */
const RESUME_MS = 90_000;
/** Login timeout (10 s) + keep-alive + slack: when rblkd must have let go of a stranded connection. */
const RELEASE_MS = 20_000;

export async function partitions(o: PartitionOptions): Promise<SoakRow> {
  const row = newRow(`partitions on loopback, ${o.path === 'library' ? 'library FUA writes' : 'NBD export FUA writes'}`);
  const log = o.log ?? (() => undefined);
  const daemon = new SoakDaemon({ volumes: [{ name: 'v', path: 'v.img', size: '32MiB' }] });
  const ledger = new Ledger(2, 512);
  let handle: PathHandle | null = null;
  let part: Partition | null = null;
  const resumes: number[] = [];
  try {
    await daemon.start();
    // The library probes idle connections itself (docs/initiator.md "Keep-alive probe"), as a
    // user on a network that can partition should; the NBD export runs with rblk's defaults.
    handle = await openPath(o.path, daemon, { keepAliveMs: 1000, commandMs: 5000, lossMs: 120_000 });
    const h = handle;
    part = await Partition.create(daemon.port());
    ledger.start(() => h.client, true);
    let lastAck = 0;
    ledger.onAck = () => (lastAck = performance.now());
    if (!(await eventually(() => ledger.stats.acked >= 20, RESUME_MS))) throw new Error('no writes acknowledged before the first partition');
    await sleep(500);
    const baseFds = daemon.fds();
    row.fdsBefore = baseFds;
    row.rssBeforeKiB = daemon.rss();
    const fdNotes: string[] = [];
    for (const ms of o.durationsMs) {
      for (const dir of o.directions ?? (['both', 'to-target', 'from-target'] as const)) {
        await part.cut(dir);
        await sleep(ms);
        await part.heal();
        const healed = performance.now();
        row.runs++;
        const resumed = await eventually(() => lastAck >= healed, RESUME_MS);
        if (!resumed) {
          row.ok = false;
          row.notes.push(`${dir} ${ms} ms: I/O did not resume within ${RESUME_MS / 1000} s of the heal`);
          continue;
        }
        const resumeMs = lastAck - healed;
        resumes.push(resumeMs);
        // One session again: rblkd must be back to the descriptors it had with one session.
        const back = await eventually(() => daemon.fds() <= baseFds, RELEASE_MS);
        if (!back) fdNotes.push(`${dir} ${ms} ms: fds ${daemon.fds()} (were ${baseFds})`);
        log(`  ${row.scenario}: ${dir} for ${ms} ms, resumed after ${resumeMs.toFixed(0)} ms, fds ${daemon.fds()}`);
      }
    }
    if (o.duringLogin === true) {
      // rblkd's answers are dropped while a second initiator logs in: its connection is
      // stranded half-way, and the login timeout must free it.
      const before = daemon.fds();
      await part.cut('from-target');
      const attempt = await connect(daemon.url('v'), { initiatorName: 'iqn.2026-11.io.rblk:soak-partitioned', timeouts: { connectMs: 3000 } }).then(
        async (s) => {
          await s.close();
          return 'logged in';
        },
        (e: unknown) => (e instanceof Error ? e.message : String(e)),
      );
      await part.heal();
      row.runs++;
      const back = await eventually(() => daemon.fds() <= before, RELEASE_MS);
      row.notes.push(`login during a partition: ${attempt.slice(0, 80)}; rblkd fds ${back ? 'back' : `still ${daemon.fds()}, were ${before},`} within ${RELEASE_MS / 1000} s`);
      if (!back) row.ok = false;
    }
    const stopped = await within(ledger.stop().then(() => true), RESUME_MS, false);
    if (!stopped) {
      row.ok = false;
      row.notes.push('writers still blocked at the end');
    }
    await handle.close();
    handle = null;
    row.fdsAfter = daemon.fds();
    row.rssAfterKiB = daemon.rss();
    if (fdNotes.length > 0) {
      row.ok = false;
      row.notes.push(`stranded fds not freed within ${RELEASE_MS / 1000} s: ${fdNotes.slice(0, 3).join(', ')}${fdNotes.length > 3 ? ', ...' : ''}`);
    }
    await daemon.kill('SIGTERM');
    const file = fileClient(join(daemon.dir, 'v.img'));
    const v = await ledger.verify(file);
    file.close();
    row.lost = v.lost;
    row.operations = ledger.stats.writes;
    row.healthyErrors = ledger.stats.failed;
    row.notes.push(`${ledger.stats.acked} acknowledged`, ...v.examples);
    const p50 = median(resumes);
    if (p50 !== undefined) row.notes.push(`I/O resumed p50 ${p50.toFixed(0)} ms after the heal (max ${Math.max(...resumes).toFixed(0)} ms)`);
    if (ledger.stats.errors.length > 0) row.notes.push(`write errors: ${ledger.stats.errors.slice(0, 2).join(' / ')}`);
  } catch (e) {
    row.ok = false;
    row.notes.push(`aborted: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
  } finally {
    if (part !== null) await part.delete();
    if (handle !== null) await within(handle.close().catch(() => undefined), 15_000, null);
    await within(ledger.stop().catch(() => undefined), 15_000, null);
    row.daemonExits = daemon.unexpectedExits;
    row.notes.push(...daemon.exitReports);
    await daemon.close();
  }
  if (row.lost > 0 || row.daemonExits > 0) row.ok = false;
  return row;
}
