// Snapshots and clones of served volumes (docs/operations.md "Snapshots and
// clones"): `rblkd ctl snapshot|snapshots|delete-snapshot|clone`.
//
// A file volume's snapshot NAME is the file `<path>@NAME` beside the
// volume's file, a reflink of it (target/backend/reflink.ts): on the same
// filesystem, as a reflink must be, listed by reading that directory, and
// exported, when wanted, as a volume whose path is that file with
// read_only: true. A clone is one more reflink, of the snapshot, to a new
// file. An rbd volume's snapshots are librbd's (`pool/image@NAME`), its
// clones new images in its pool (backend.ts StoreSnapshots). Memory volumes
// and block devices have no snapshots.
//
// Crash consistency: the snapshot is taken with the logical unit quiesced.
// An exclusive range lock over every block is queued first, so that commands
// arriving later wait behind it; the native fast path is revoked for every
// session and its running commands answered (fast-path-gate.ts hold); the
// lock is granted once every JavaScript command that holds a range has
// finished; then the backend is flushed and the reflink made, and I/O resumes.
// Every write acknowledged before the request arrived is in the snapshot, and
// none that starts after it was answered.
import { readdir, stat, unlink } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { formatSize } from '../../config/size.js';
import { cloneFile, type CloneResult } from '../backend/reflink.js';
import { holding } from '../scsi/range-lock.js';
import type { Backend, StoreSnapshots } from '../backend/backend.js';
import type { LogicalUnit } from '../scsi/index.js';
import type { VolumeConfig } from '../../config/schema.js';

/** A snapshot name: what a volume name may be, since it ends a file name (`<path>@NAME`). */
export const SNAPSHOT_NAME = /^[A-Za-z0-9._-]{1,64}$/;

export interface SnapshotRef {
  volume: string;
  snapshot: string;
}

/** `VOLUME@SNAP`, or an error that says what is wrong with it. */
export function parseSnapshotRef(text: string): SnapshotRef {
  const at = text.lastIndexOf('@');
  if (at <= 0 || at === text.length - 1) throw new Error(`'${text}' is not VOLUME@SNAPSHOT`);
  const ref = { volume: text.slice(0, at), snapshot: text.slice(at + 1) };
  checkSnapshotName(ref.snapshot);
  return ref;
}

export function checkSnapshotName(name: string): void {
  if (!SNAPSHOT_NAME.test(name) || name === '.' || name === '..') {
    throw new Error(`snapshot name '${name}' must be 1 to 64 characters of letters, digits and . _ -`);
  }
}

/** Where a file volume's snapshot lives: beside the file, on its filesystem. */
export function snapshotPath(volumePath: string, snapshot: string): string {
  return `${volumePath}@${snapshot}`;
}

export interface SnapshotInfo {
  name: string;
  path: string;
  /** Bytes (the volume's size when it was taken). */
  size: number;
  /** ISO 8601: the file's birth time where the filesystem keeps one (XFS, btrfs, ext4), else its change time. */
  created: string;
}

/** Where a volume's snapshots are kept: beside its file, or in its store (an rbd image's own). */
export type SnapshotHome = { kind: 'file'; path: string } | { kind: 'store'; where: string; snapshots: StoreSnapshots };

export function snapshotHome(v: VolumeConfig, backend: Backend): SnapshotHome {
  const b = v.backing;
  if (b.kind === 'rbd' && b.snapshot !== undefined) throw new Error(`volume ${v.name} is snapshot ${b.snapshot} of rbd image ${b.image}: a snapshot has no snapshots (clone it for a volume that has)`);
  if (b.kind === 'rbd' && backend.snapshots !== undefined) {
    return { kind: 'store', where: `${b.pool}/${b.namespace !== undefined && b.namespace !== '' ? `${b.namespace}/` : ''}${b.image}`, snapshots: backend.snapshots };
  }
  return { kind: 'file', path: snapshotBase(v) };
}

/** The file volume's path, or an error that says why this volume has no file snapshots. */
export function snapshotBase(v: VolumeConfig): string {
  const b = v.backing;
  if (b.kind === 'file') return b.path;
  if (b.kind === 'rbd') throw new Error(`volume ${v.name} is an rbd image: its snapshots are librbd's, not files`);
  if (b.kind === 'memory') throw new Error(`volume ${v.name} is a memory volume: it has no snapshots`);
  throw new Error(`volume ${v.name} is a block device (${b.path}): rblkd snapshots only file volumes (use the device's own, LVM or the array's)`);
}

/** Every snapshot of the file volume at `volumePath`, oldest first. */
export async function listSnapshots(volumePath: string): Promise<SnapshotInfo[]> {
  const dir = dirname(volumePath);
  const prefix = `${basename(volumePath)}@`;
  const out: SnapshotInfo[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.startsWith(prefix)) continue;
    const name = entry.name.slice(prefix.length);
    if (!SNAPSHOT_NAME.test(name)) continue;
    const path = join(dir, entry.name);
    try {
      const st = await stat(path);
      const born = st.birthtimeMs > 0 ? st.birthtime : st.ctime;
      out.push({ name, path, size: st.size, created: born.toISOString() });
    } catch {
      // Deleted meanwhile.
    }
  }
  return out.sort((a, b) => a.created.localeCompare(b.created) || a.name.localeCompare(b.name));
}

/**
 * Runs fn with the logical unit quiesced: no command of any session, in
 * JavaScript or on the native fast path, runs on it meanwhile; those running
 * when it is called finish first, those that arrive wait until fn settles.
 * The same barrier as LogicalUnit.fenceUntil.
 */
export async function quiesced<T>(lu: LogicalUnit, fn: () => Promise<T>): Promise<T> {
  // Queued before anything else can be: later commands line up behind it.
  const barrier = lu.rangeLock.acquire(undefined, 0, Number.MAX_SAFE_INTEGER, true);
  return lu.fastPath.hold(() => holding(barrier, fn));
}

export interface SnapshotTaken extends SnapshotInfo {
  volume: string;
  /** reflink or copy (file volumes), rbd (librbd's own snapshot). */
  method: CloneResult['method'] | 'rbd';
  /** How long the volume's I/O waited, from the request to the resume. */
  pausedMs: number;
}

/** Takes snapshot `name` of a served volume (see the top of this file). */
export async function takeSnapshot(v: VolumeConfig, lu: LogicalUnit, name: string, opts: { copy?: boolean }): Promise<SnapshotTaken> {
  checkSnapshotName(name);
  const home = snapshotHome(v, lu.backend);
  const started = process.hrtime.bigint();
  const flushed = async (): Promise<void> => {
    if (!lu.backend.readOnly) await lu.backend.flush();
  };
  let result: { method: SnapshotTaken['method']; size: number };
  let path: string;
  if (home.kind === 'store') {
    path = `${home.where}@${name}`;
    const size = lu.backend.size;
    await quiesced(lu, async () => {
      await flushed();
      await home.snapshots.create(name).catch((e: unknown) => {
        throw (e as { code?: unknown }).code === 'EEXIST' ? Object.assign(new Error(`${path} already exists; not replacing it`), { code: 'EEXIST' }) : e;
      });
    });
    result = { method: 'rbd', size };
  } else {
    path = snapshotPath(home.path, name);
    result = await quiesced(lu, async () => {
      await flushed();
      return cloneFile(home.path, path, opts);
    });
  }
  const pausedMs = Number((process.hrtime.bigint() - started) / 1_000_000n);
  const [info] = (await snapshotsOf(v, lu.backend)).filter((s) => s.name === name);
  return { volume: v.name, name, path, size: result.size, created: info?.created ?? new Date().toISOString(), method: result.method, pausedMs };
}

/** A volume's snapshots, oldest first. */
export async function snapshotsOf(v: VolumeConfig, backend: Backend): Promise<SnapshotInfo[]> {
  const home = snapshotHome(v, backend);
  if (home.kind === 'file') return listSnapshots(home.path);
  return (await home.snapshots.list()).map((x) => ({ ...x, path: `${home.where}@${x.name}` }));
}

/** Removes a snapshot (its file); a file snapshot is refused while a served volume reads it (`servedBy` names that volume). */
export async function deleteSnapshot(v: VolumeConfig, backend: Backend, name: string, servedBy: (path: string) => string | undefined): Promise<{ volume: string; name: string; path: string }> {
  checkSnapshotName(name);
  const home = snapshotHome(v, backend);
  if (home.kind === 'store') {
    try {
      await home.snapshots.remove(name);
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (code === 'ENOENT') throw new Error(`volume ${v.name} has no snapshot ${name} (rblkd ctl snapshots ${v.name} lists them)`);
      if (code === 'EBUSY') throw new Error(`snapshot ${v.name}@${name} has clones: flatten them (\`rblkd ctl flatten CLONE\` for a served clone, else \`rbd flatten\`) or remove them first`);
      throw e;
    }
    return { volume: v.name, name, path: `${home.where}@${name}` };
  }
  const path = snapshotPath(home.path, name);
  const user = servedBy(path);
  if (user !== undefined) throw new Error(`snapshot ${v.name}@${name} is served as volume ${user}: remove that volume from the config and reload first`);
  try {
    await unlink(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`volume ${v.name} has no snapshot ${name} (rblkd ctl snapshots ${v.name} lists them)`);
    throw e;
  }
  return { volume: v.name, name, path };
}

/** An rbd image name as `rbd create` takes it in a pool (no pool, namespace or snapshot part). */
const IMAGE_NAME = /^[A-Za-z0-9._-]{1,255}$/;

/**
 * Where `ctl clone` puts a new file: an absolute path as given; a bare name
 * or a relative path beside the origin's file, on its filesystem.
 */
export function clonePath(volumePath: string, target: string): string {
  return isAbsolute(target) ? target : join(dirname(volumePath), target);
}

/** Makes a writable copy of a snapshot at `target`: a reflink of the snapshot's file, or (rbd) a clone image. */
export async function cloneSnapshot(v: VolumeConfig, backend: Backend, snapshot: string, target: string, opts: { copy?: boolean }): Promise<{ from: string; path: string; method: SnapshotTaken['method']; size: number }> {
  checkSnapshotName(snapshot);
  const home = snapshotHome(v, backend);
  if (home.kind === 'store') {
    if (!IMAGE_NAME.test(target)) throw new Error(`an rbd clone is a new image in the pool of ${home.where}: give its name (letters, digits and . _ -), not '${target}'`);
    const known = (await home.snapshots.list()).find((x) => x.name === snapshot);
    if (known === undefined) throw new Error(`volume ${v.name} has no snapshot ${snapshot} (rblkd ctl snapshots ${v.name} lists them)`);
    const path = await home.snapshots.clone(snapshot, target);
    return { from: `${home.where}@${snapshot}`, path, method: 'rbd', size: known.size };
  }
  const base = home.path;
  const from = snapshotPath(base, snapshot);
  try {
    await stat(from);
  } catch {
    throw new Error(`volume ${v.name} has no snapshot ${snapshot} (rblkd ctl snapshots ${v.name} lists them)`);
  }
  const path = clonePath(base, target);
  const r = await cloneFile(from, path, opts);
  return { from, path, method: r.method, size: r.size };
}

/**
 * Flattens a served rbd clone (librbd's rbd_flatten): its parent's data is
 * copied into it while it keeps serving, and the link to the parent snapshot
 * is cut, so that snapshot can then be deleted. A file clone is a reflink:
 * already independent, nothing to flatten.
 */
export async function flattenVolume(v: VolumeConfig, backend: Backend): Promise<{ volume: string; path: string }> {
  const home = snapshotHome(v, backend);
  if (home.kind === 'file') throw new Error(`volume ${v.name} is a file volume: its clone is a reflink, independent of the snapshot already; only rbd clones are flattened`);
  try {
    await home.snapshots.flatten();
  } catch (e) {
    if ((e as { code?: unknown }).code === 'EINVAL') throw new Error(`volume ${v.name} (${home.where}) is not a clone: it has no parent to flatten from`);
    throw e;
  }
  return { volume: v.name, path: home.where };
}

export function describeTaken(s: SnapshotTaken): string {
  return `snapshot ${s.volume}@${s.name}: ${s.path} (${methodText(s.method)}, ${formatSize(s.size)}, I/O paused ${s.pausedMs} ms)`;
}

export function methodText(m: SnapshotTaken['method']): string {
  return m === 'reflink' ? 'reflink' : m === 'rbd' ? 'rbd snapshot' : 'full copy';
}
