// The `rblkd ctl` verbs of snapshots and clones (docs/operations.md
// "Snapshots and clones"): which served volume, what is logged; snapshots.ts
// does the work.
import type { ControlHandlers } from './control-server.js';
import { errorText } from '../error-text.js';
import { type DaemonLogger } from './logger.js';
import { cloneSnapshot, deleteSnapshot, describeTaken, flattenVolume, methodText, parseSnapshotRef, snapshotsOf, takeSnapshot } from './snapshots.js';
import type { ServedVolume } from './volumes.js';

/** What the handlers need of the daemon. */
export interface SnapshotContext {
  /** The served volume of that name, or an error naming `rblkd ctl volumes`. */
  served(name: string): ServedVolume;
  volumes(): Iterable<ServedVolume>;
  stopping(): boolean;
  log: DaemonLogger;
}

export function snapshotHandlers(d: SnapshotContext): Pick<ControlHandlers, 'snapshot' | 'snapshots' | 'deleteSnapshot' | 'clone' | 'flatten'> {
  return {
    /** Crash-consistent, with the volume's I/O paused while it is taken. */
    async snapshot(volume, name, copy) {
      if (d.stopping()) throw new Error('rblkd is stopping');
      const sv = d.served(volume);
      const meta = { volume: sv.name, lun: sv.lun };
      d.log.info(`volume ${sv.name}: taking snapshot ${name}${copy ? ' (a full copy where there is no reflink)' : ''}`, meta);
      try {
        const taken = await takeSnapshot(sv.config, sv.lu, name, { copy });
        d.log.info(describeTaken(taken), meta);
        return { ...taken };
      } catch (e) {
        d.log.error(`volume ${sv.name}: snapshot ${name} not taken: ${errorText(e)}`, meta);
        throw e;
      }
    },
    async snapshots(volume) {
      const sv = d.served(volume);
      return { volume, snapshots: await snapshotsOf(sv.config, sv.backend) };
    },
    async deleteSnapshot(volume, name) {
      const sv = d.served(volume);
      const servedBy = (path: string): string | undefined => [...d.volumes()].find((v) => 'path' in v.config.backing && v.config.backing.path === path)?.name;
      const r = await deleteSnapshot(sv.config, sv.backend, name, servedBy);
      d.log.info(`volume ${sv.name}: snapshot ${name} deleted (${r.path})`, { volume: sv.name, lun: sv.lun });
      return r;
    },
    async clone(ref, target, copy) {
      const { volume, snapshot } = parseSnapshotRef(ref);
      const sv = d.served(volume);
      const r = await cloneSnapshot(sv.config, sv.backend, snapshot, target, { copy });
      d.log.info(`volume ${sv.name}: snapshot ${snapshot} cloned to ${r.path} (${methodText(r.method)})`, { volume: sv.name, lun: sv.lun });
      return { volume, snapshot, ...r };
    },
    /** The served clone keeps serving while librbd copies its parent's data in. */
    async flatten(volume) {
      if (d.stopping()) throw new Error('rblkd is stopping');
      const sv = d.served(volume);
      const meta = { volume: sv.name, lun: sv.lun };
      d.log.info(`volume ${sv.name}: flattening`, meta);
      try {
        const r = await flattenVolume(sv.config, sv.backend);
        d.log.info(`volume ${sv.name}: flattened (${r.path} no longer depends on its parent snapshot)`, meta);
        return r;
      } catch (e) {
        d.log.error(`volume ${sv.name}: not flattened: ${errorText(e)}`, meta);
        throw e;
      }
    },
  };
}
