// `rblk umount DIR` (also `rblk detach`): undo a mount or a FUSE attach that
// another rblk process serves. The filesystem is unmounted here first, so a
// busy one is reported to the caller and nothing else is touched; then the
// serving process gets SIGTERM and tears down the loop device and the FUSE
// mount itself. A record whose process is gone is cleaned up from here.
import { realpath } from 'node:fs/promises';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Argv } from 'yargs';
import { readAttachmentRecords, type AttachmentRecord } from '../../fuse/attachment-record.js';
import { run } from '../../fuse/run.js';
import { CliLogger } from '../logger.js';
import { isRunning } from '../../process-state.js';
import { parseDuration } from '../size.js';
import { stateDir, stateDirOption } from '../state-dir.js';
import { VERBS } from '../verbs.js';

const POLL_MS = 50;

async function findRecord(state: string, target: string): Promise<AttachmentRecord | undefined> {
  const { records } = await readAttachmentRecords(state);
  const path = await realpath(target).catch(() => resolve(target));
  return records.find((r) => r.id === target || r.mountpoint === path || r.fuseDir === path || r.loopDevice === target);
}

async function recordGone(state: string, id: string): Promise<boolean> {
  return !(await readAttachmentRecords(state)).records.some((r) => r.id === id);
}

export function umountCommand<T extends { debug: boolean }>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.umount.command,
    VERBS.umount.describe,
    (b) =>
      b
        .positional('target', { type: 'string', demandOption: true, describe: 'mount point, FUSE directory, loop device or attachment id (see rblk list)' })
        .options(stateDirOption)
        .option('force', { alias: 'f', type: 'boolean', default: false, describe: 'detach a busy filesystem lazily (umount -l)' })
        .option('timeout', { type: 'string', requiresArg: true, default: '30s', describe: 'how long to wait for the serving process to finish' }),
    async (a) => {
      const state = stateDir(a);
      const timeoutMs = parseDuration(a.timeout, '--timeout');
      const log = new CliLogger(a.debug ? 'debug' : 'warn');
      const rec = await findRecord(state, a.target);
      if (rec === undefined) throw new Error(`no rblk attachment at ${a.target} (see rblk list)`);
      // Loaded here, not at startup: they bring the native addon.
      const { isMountPoint } = await import('../../../native/fuse.js');
      const { cleanupStaleAttachment } = await import('../../fuse/index.js');
      if (rec.kind === 'mount' && rec.mountpoint !== null && (await isMountPoint(rec.mountpoint))) {
        await run('umount', a.force ? ['-l', rec.mountpoint] : [rec.mountpoint]);
      }
      if (isRunning(rec.pid)) {
        try {
          process.kill(rec.pid, 'SIGTERM');
        } catch (e) {
          // It exited between the check and the signal: nothing left to stop.
          if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
        }
        // Returns only once every thread of the helper is gone (process-state.ts), so
        // its FUSE session, loop device and files are released when umount returns.
        const deadline = performance.now() + timeoutMs;
        while (isRunning(rec.pid)) {
          if (performance.now() > deadline) throw new Error(`process ${rec.pid} did not finish detaching within ${a.timeout} (its log: ${state}/mount.log)`);
          await sleep(POLL_MS);
        }
      }
      // Its process is gone; whatever the record still describes is undone from here.
      if (!(await recordGone(state, rec.id))) await cleanupStaleAttachment(state, rec, log);
      process.stdout.write(`${rec.kind === 'mount' ? 'unmounted' : 'detached'} ${rec.mountpoint ?? rec.fuseDir}\n`);
    },
  );
}
