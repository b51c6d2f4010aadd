// A small JSON file per active attachment, so that `rblk list` and
// `rblk umount`, run as other processes, can find what this one set up:
// <stateDir>/attachments/<id>.json, written atomically (temp file + rename).
// The FUSE file is served by the process that wrote the record (pid); only
// that process can unmount it cleanly, the others can ask it to (a signal).
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isRunning } from '../process-state.js';

export const DEFAULT_STATE_DIR = '/run/rblk';

export interface AttachmentRecord {
  id: string;
  /** fuse: `rblk attach --fuse DIR` (DIR is the user's); mount: mountVolume (its FUSE dir is private). */
  kind: 'fuse' | 'mount';
  /** The process serving the FUSE file. */
  pid: number;
  /** ISO 8601. */
  createdAt: string;
  /** What was attached, for display (a volume URL or name). */
  label: string | null;
  /** The FUSE mount point and the file in it. */
  fuseDir: string;
  file: string;
  size: number;
  blockSize: number;
  readOnly: boolean;
  /** Set once `losetup` attached the file. */
  loopDevice: string | null;
  /** Set once the loop device is mounted. */
  mountpoint: string | null;
  fsType: string | null;
  /** The mount point directory was created by mountVolume (and is removed with it). */
  createdMountpoint: boolean;
}

const ID = /^[a-z0-9-]{1,64}$/;

export function newAttachmentId(): string {
  return `${process.pid}-${randomBytes(4).toString('hex')}`;
}

function recordsDir(stateDir: string): string {
  return join(stateDir, 'attachments');
}

function recordPath(stateDir: string, id: string): string {
  if (!ID.test(id)) throw new Error(`invalid attachment id ${JSON.stringify(id)}`);
  return join(recordsDir(stateDir), `${id}.json`);
}

/** Writes (or replaces) the record; resolves its path. */
export async function writeAttachmentRecord(stateDir: string, rec: AttachmentRecord): Promise<string> {
  const path = recordPath(stateDir, rec.id);
  await mkdir(recordsDir(stateDir), { recursive: true, mode: 0o755 });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(rec, null, 2)}\n`, { mode: 0o644 });
  await rename(tmp, path);
  return path;
}

export async function removeAttachmentRecord(stateDir: string, id: string): Promise<void> {
  await rm(recordPath(stateDir, id), { force: true });
}

function isRecord(v: unknown): v is AttachmentRecord {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as Record<string, unknown>;
  const str = (k: string) => typeof r[k] === 'string';
  const strOrNull = (k: string) => r[k] === null || typeof r[k] === 'string';
  const int = (k: string) => Number.isSafeInteger(r[k]);
  return (
    str('id') && ID.test(r.id as string) && (r.kind === 'fuse' || r.kind === 'mount') && int('pid') && str('createdAt') && strOrNull('label') && str('fuseDir') &&
    str('file') && int('size') && int('blockSize') && typeof r.readOnly === 'boolean' && strOrNull('loopDevice') &&
    strOrNull('mountpoint') && strOrNull('fsType') && typeof r.createdMountpoint === 'boolean'
  );
}

export interface RecordProblem {
  path: string;
  reason: string;
}

/**
 * Every record in stateDir, oldest first. Files that cannot be read or do not
 * hold a record are reported in problems, not thrown: one bad file must not
 * hide the others. A missing state dir is simply empty.
 */
export async function readAttachmentRecords(stateDir: string): Promise<{ records: AttachmentRecord[]; problems: RecordProblem[] }> {
  let names: string[];
  try {
    names = await readdir(recordsDir(stateDir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], problems: [] };
    throw err;
  }
  const records: AttachmentRecord[] = [];
  const problems: RecordProblem[] = [];
  for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
    const path = join(recordsDir(stateDir), name);
    try {
      const v: unknown = JSON.parse(await readFile(path, 'utf8'));
      if (!isRecord(v) || `${v.id}.json` !== name) problems.push({ path, reason: 'not an attachment record' });
      else records.push(v);
    } catch (err) {
      problems.push({ path, reason: (err as Error).message });
    }
  }
  records.sort((x, y) => x.createdAt.localeCompare(y.createdAt));
  return { records, problems };
}

/**
 * Whether the process that serves the record's FUSE file still runs: any of
 * its threads (initiator/process-state.ts). kill(pid, 0) said yes for a zombie
 * nobody reaped, which left its record impossible to clean up.
 */
export function isOwnerAlive(rec: AttachmentRecord): boolean {
  return isRunning(rec.pid);
}
