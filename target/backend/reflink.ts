// A file volume's snapshots and clones (docs/operations.md "Snapshots and
// clones"): a reflink of the whole file, FICLONE (ioctl_ficlone(2)), through
// copyFile's COPYFILE_FICLONE_FORCE, so that the copy shares every extent with
// its source and takes no time and no space until one of them is written. A
// filesystem without reflink (ext4, tmpfs) refuses with EOPNOTSUPP, and so
// does a destination on another filesystem (EXDEV): both are refused here with
// what to do, and a full copy is made only when the caller asks for one.
import { constants } from 'node:fs';
import { copyFile, open, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { formatSize } from '../../config/size.js';
import { hasCode } from './backend-error.js';

export interface CloneResult {
  /** reflink: extents shared with the source; copy: every byte copied. */
  method: 'reflink' | 'copy';
  size: number;
}

/** An error with a string errno `code`, as the backends' are. */
function coded(message: string, code: string, cause?: unknown): Error & { code: string } {
  return Object.assign(new Error(message, cause === undefined ? undefined : { cause }), { code });
}

/** fsync of a file or directory: the new file and its name survive a crash once this returns. */
async function syncPath(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Makes `dst` (which must not exist) a reflink of `src`, or, with `copy`, a
 * reflink where the filesystem has one and a full copy where it has not.
 * Durable when it resolves. Refused with EOPNOTSUPP (no reflink there) or
 * EXDEV (another filesystem) without `copy`, saying `instead` what to do
 * (default: ask for one with --copy); EEXIST when dst exists. A dst
 * left half made by a failure is removed.
 */
export async function cloneFile(src: string, dst: string, opts: { copy?: boolean; instead?: string } = {}): Promise<CloneResult> {
  // What the refusal tells the operator to do instead.
  const instead = opts.instead ?? 'ask for one with --copy';
  const { size } = await stat(src);
  let method: CloneResult['method'] = 'reflink';
  try {
    // COPYFILE_EXCL: never replace anything.
    await copyFile(src, dst, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE_FORCE);
  } catch (e) {
    if (hasCode(e, 'EEXIST')) throw coded(`${dst} already exists; not replacing it`, 'EEXIST', e);
    await unlink(dst).catch(() => undefined);
    const noReflink = hasCode(e, 'EOPNOTSUPP', 'ENOTSUP', 'ENOSYS', 'ENOTTY', 'EINVAL');
    const otherFs = hasCode(e, 'EXDEV');
    if (opts.copy === true && (noReflink || otherFs)) {
      method = 'copy';
      try {
        await copyFile(src, dst, constants.COPYFILE_EXCL);
      } catch (e2) {
        if (!hasCode(e2, 'EEXIST')) await unlink(dst).catch(() => undefined);
        throw e2;
      }
    } else if (noReflink) {
      throw coded(
        `the filesystem of ${src} cannot reflink (FICLONE: ${(e as NodeJS.ErrnoException).code}): it is not XFS with reflink=1 or btrfs, so a snapshot or clone there ` +
          `would be a full copy of ${formatSize(size)} (for a snapshot, made while the volume's I/O waits); ${instead}`,
        'EOPNOTSUPP',
        e,
      );
    } else if (otherFs) {
      throw coded(`${dst} is on another filesystem than ${src}: a reflink stays within one filesystem; put it beside ${src}, or ${instead}`, 'EXDEV', e);
    } else throw e;
  }
  try {
    await syncPath(dst);
    await syncPath(dirname(dst));
  } catch (e) {
    await unlink(dst).catch(() => undefined);
    throw e;
  }
  return { method, size };
}
