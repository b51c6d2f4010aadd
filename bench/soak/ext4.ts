// ext4 through `rblk mount` while rblkd is killed (-9 or SIGTERM) and restarted, as
// test/cli/ext4-restart.test.ts does once: a file workload where every file is written,
// fsync'd and closed before it counts as acknowledged; after the runs the filesystem is
// unmounted, mounted again, every acknowledged file compared byte for byte, and e2fsck -fn
// run on the backing file.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { readAttachmentRecords } from '../../initiator/fuse/attachment-record.js';
import { cleanupStaleAttachment } from '../../initiator/fuse/index.js';
import { SoakDaemon } from './daemon.js';
import { blockContent } from './ledger.js';
import { haveTool, spawnEntry, within } from './processes.js';
import { eventually } from '../kit/wait.js';
import { median, newRow, type SoakRow } from './report.js';

const run = promisify(execFile);
const FILE_BLOCKS = 16;
/** Guards; never measurements. */
const PROGRESS_MS = 90_000;

async function rblk(args: string[], ms = 60_000): Promise<{ code: number | null; out: string }> {
  const c = spawnEntry('rblk', args);
  const exit = await within(c.exited, ms, null);
  if (exit === null) {
    await c.stop();
    return { code: null, out: `timed out: ${c.lines.join('\n')}` };
  }
  return { code: exit.code, out: c.lines.join('\n') };
}

function fileBytes(i: number): Buffer {
  return Buffer.concat(Array.from({ length: FILE_BLOCKS }, (_, b) => blockContent(b, i)));
}

export async function ext4KillRestart(o: { signal: 'SIGKILL' | 'SIGTERM'; kills: number; filesBetween?: number; log?: (line: string) => void }): Promise<SoakRow> {
  const row = newRow(`${o.signal === 'SIGKILL' ? 'kill -9' : 'SIGTERM'} rblkd, ext4 via rblk mount, fsync'd files`);
  if (process.getuid?.() !== 0 || !haveTool('mkfs.ext4') || !haveTool('e2fsck')) {
    row.skipped = 'needs root, mkfs.ext4 and e2fsck';
    return row;
  }
  const log = o.log ?? (() => undefined);
  const daemon = new SoakDaemon({ volumes: [{ name: 'fs', path: 'fs.img', size: '64MiB' }] });
  const state = join(daemon.dir, 'run');
  const mnt = join(daemon.dir, 'mnt');
  mkdirSync(mnt);
  const acked = new Map<number, string>();
  let stop = false;
  let failed = 0;
  const errors = new Set<string>();
  let workload: Promise<void> = Promise.resolve();
  const resumes: number[] = [];
  let mounted = false;
  try {
    await daemon.start();
    const url = daemon.url('fs');
    const m = await rblk(['mount', url, mnt, '--mkfs', 'ext4', '--yes', '--state-dir', state]);
    if (m.code !== 0) throw new Error(`rblk mount: ${m.out}`);
    mounted = true;
    let lastDone = 0;
    workload = (async () => {
      for (let i = 0; !stop; i++) {
        try {
          const data = fileBytes(i);
          const fh = await open(join(mnt, `f${i}.bin`), 'w');
          try {
            await fh.write(data);
            await fh.sync();
          } finally {
            await fh.close();
          }
          acked.set(i, createHash('sha256').update(data).digest('hex'));
          lastDone = performance.now();
        } catch (e) {
          failed++;
          if (errors.size < 3) errors.add(String(e).slice(0, 120));
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    })();
    for (let k = 0; k < o.kills; k++) {
      const want = acked.size + (o.filesBetween ?? 4);
      if (!(await eventually(() => acked.size >= want, PROGRESS_MS))) {
        row.ok = false;
        row.notes.push(`run ${k + 1}: no file completed for ${PROGRESS_MS / 1000} s`);
        break;
      }
      const exit = await daemon.kill(o.signal);
      if (o.signal === 'SIGTERM' && exit.code !== 0) row.notes.push(`run ${k + 1}: SIGTERM exit ${exit.code ?? exit.signal}`);
      await daemon.restart();
      const listening = performance.now();
      row.runs++;
      if (!(await eventually(() => lastDone >= listening, PROGRESS_MS))) {
        row.ok = false;
        row.notes.push(`run ${k + 1}: the workload did not resume within ${PROGRESS_MS / 1000} s`);
        break;
      }
      resumes.push(lastDone - listening);
      log(`  ${row.scenario}: run ${row.runs}/${o.kills}, ${acked.size} files`);
    }
    stop = true;
    if ((await within(workload, PROGRESS_MS, 'stuck')) === 'stuck') throw new Error('the file workload is stuck');
    const u1 = await rblk(['umount', mnt, '--state-dir', state]);
    if (u1.code !== 0) throw new Error(`rblk umount: ${u1.out}`);
    mounted = false;
    const m2 = await rblk(['mount', url, mnt, '--state-dir', state]);
    if (m2.code !== 0) throw new Error(`rblk mount again: ${m2.out}`);
    mounted = true;
    let lost = 0;
    for (const [i, sum] of acked) {
      const got = await readFile(join(mnt, `f${i}.bin`)).catch(() => Buffer.alloc(0));
      if (createHash('sha256').update(got).digest('hex') !== sum) lost++;
    }
    const u2 = await rblk(['umount', mnt, '--state-dir', state]);
    if (u2.code !== 0) throw new Error(`rblk umount: ${u2.out}`);
    mounted = false;
    await daemon.kill('SIGTERM');
    const fsck = await run('e2fsck', ['-fn', join(daemon.dir, 'fs.img')]).then(
      () => 'clean',
      (e: { code?: number; stdout?: string }) => `exit ${e.code}: ${(e.stdout ?? '').split('\n').slice(1, 3).join(' ')}`,
    );
    row.operations = acked.size + failed;
    row.lost = lost;
    row.healthyErrors = failed;
    row.notes.push(`${acked.size} files fsync'd; e2fsck ${fsck}`);
    if (fsck !== 'clean') row.ok = false;
    const p50 = median(resumes);
    if (p50 !== undefined) row.notes.push(`file I/O resumed p50 ${p50.toFixed(0)} ms after rblkd listened again`);
    if (errors.size > 0) row.notes.push(`errors: ${[...errors].join(' / ')}`);
  } catch (e) {
    row.ok = false;
    row.notes.push(`aborted: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
  } finally {
    stop = true;
    if (mounted) {
      if (!daemon.alive) await daemon.restart().catch(() => undefined);
      await rblk(['umount', mnt, '--state-dir', state, '--force'], 30_000);
    }
    await within(workload, 10_000, null);
    // Whatever is left (a mount helper that did not exit): kill it and undo its mount.
    const { records } = await readAttachmentRecords(state).catch(() => ({ records: [] }));
    for (const rec of records) {
      try {
        process.kill(rec.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await new Promise((r) => setTimeout(r, 200));
      await cleanupStaleAttachment(state, rec).catch((e: unknown) => row.notes.push(`cleanup: ${String(e)}`));
    }
    row.daemonExits = daemon.unexpectedExits;
    row.notes.push(...daemon.exitReports);
    await daemon.close();
  }
  if (row.lost > 0 || row.daemonExits > 0) row.ok = false;
  return row;
}
