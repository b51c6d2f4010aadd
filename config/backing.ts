// What a volume's path names on this host, checked when the config is loaded so that a typo is
// reported by --check-config and by a refused reload, not by a volume that fails at first I/O.

import { accessSync, constants, realpathSync, statSync, statfsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describeFsError } from './secret-file.js';
import { formatSize } from './size.js';

export type BackingInspection =
  | { ok: true; kind: 'file'; exists: boolean; currentSize: number }
  | { ok: true; kind: 'blockdev' }
  | { ok: false; field: 'path' | 'size'; message: string };

export interface BackingRequest {
  path: string;
  /** Configured size in bytes, if any. */
  size?: number;
  readOnly: boolean;
  /** The daemon creates this directory itself, so a file directly inside it may be created. */
  stateDir: string;
}

/**
 * What a read_only volume whose file is missing says, whether the config check finds it or the
 * open does (target/daemon/volumes.ts: a file removed after the check): one wording.
 */
export function readOnlyMissing(path: string): string {
  return `${path} does not exist, and a read_only volume is never created (create it, or drop read_only)`;
}

export function inspectBacking(req: BackingRequest): BackingInspection {
  const kernel = kernelInterface(req.path);
  if (kernel) return { ok: false, field: 'path', message: `${kernel}, not storage: a volume path must be a regular file or a block device` };
  let st;
  try {
    st = statSync(req.path);
  } catch (e) {
    if (!isNotFound(e)) return { ok: false, field: 'path', message: `${req.path} ${describeFsError(e)}` };
    if (req.readOnly) {
      return { ok: false, field: 'path', message: readOnlyMissing(req.path) };
    }
    if (req.size === undefined) {
      return {
        ok: false,
        field: 'path',
        message: `${req.path} does not exist (give size to have rblkd create it)`,
      };
    }
    return checkParent(req);
  }
  if (st.isBlockDevice()) {
    if (req.size !== undefined) {
      return { ok: false, field: 'size', message: `size applies only to files; ${req.path} is a block device` };
    }
    return checkAccess(req, { ok: true, kind: 'blockdev' });
  }
  if (!st.isFile()) {
    return { ok: false, field: 'path', message: `${req.path} is not a regular file or a block device` };
  }
  if (req.size !== undefined && st.size > req.size) {
    // Shrinking would silently drop data at the end of the volume.
    return {
      ok: false,
      field: 'size',
      message:
        `size ${formatSize(req.size)} is smaller than the existing file ${req.path} ` +
        `(${formatSize(st.size)}); rblkd never shrinks a backing file`,
    };
  }
  if (req.readOnly && req.size !== undefined && st.size < req.size) {
    return {
      ok: false,
      field: 'size',
      message: `${req.path} is ${formatSize(st.size)}, smaller than size ${formatSize(req.size)}, and a read_only volume is never grown`,
    };
  }
  if (req.size === undefined && st.size === 0) {
    return { ok: false, field: 'path', message: `${req.path} is empty (give size to have rblkd grow it)` };
  }
  return checkAccess(req, { ok: true, kind: 'file', exists: true, currentSize: st.size });
}

/**
 * Trees where the kernel, not a disk, answers reads and writes: /proc/self/mem is a "regular
 * file" whose writes land in rblkd's own memory. Block devices under /dev are what /dev is for;
 * /dev/shm is a tmpfs for ordinary files.
 */
const KERNEL_TREES = ['/proc', '/sys', '/dev'];
const ORDINARY_UNDER_DEV = ['/dev/shm'];
/** statfs f_type of filesystems that are kernel interfaces wherever they are mounted (linux/magic.h). */
const KERNEL_FILESYSTEMS = new Map<number, string>([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x62656570, 'configfs'],
  [0xcafe4a11, 'bpf'],
  [0x6165676c, 'pstore'],
  [0xde5e81e4, 'efivarfs'],
]);

const under = (path: string, dir: string): boolean => path === dir || path.startsWith(`${dir}/`);

function inKernelTree(path: string): string | undefined {
  if (ORDINARY_UNDER_DEV.some((d) => under(path, d))) return undefined;
  return KERNEL_TREES.find((d) => under(path, d));
}

/** Where the path really leads, following symbolic links (of its directory, for a new file). */
function realTarget(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    try {
      return join(realpathSync(dirname(path)), basename(path));
    } catch {
      return path;
    }
  }
}

/** Why the path is a kernel interface rather than storage, or undefined. */
function kernelInterface(path: string): string | undefined {
  // The path as written first: /proc/self/mem need not be shown as /proc/4242/mem.
  const real = inKernelTree(path) !== undefined ? path : realTarget(path);
  const shown = real === path ? path : `${path} (${real})`;
  const tree = inKernelTree(real);
  if (tree !== undefined) {
    let blockDevice = false;
    try {
      blockDevice = statSync(real).isBlockDevice();
    } catch {
      // Missing: it would be created in the tree, which is refused below.
    }
    if (!blockDevice) return `${shown} is in ${tree}, a kernel interface`;
  }
  let fsType: number | undefined;
  try {
    fsType = statfsSync(real).type;
  } catch {
    try {
      fsType = statfsSync(dirname(real)).type;
    } catch {
      return undefined;
    }
  }
  const fs = KERNEL_FILESYSTEMS.get(fsType);
  return fs === undefined ? undefined : `${shown} is on a ${fs} filesystem, a kernel interface`;
}

function checkParent(req: BackingRequest): BackingInspection {
  const parent = dirname(req.path);
  const created: BackingInspection = { ok: true, kind: 'file', exists: false, currentSize: 0 };
  try {
    if (!statSync(parent).isDirectory()) {
      return { ok: false, field: 'path', message: `cannot create ${req.path}: ${parent} is not a directory` };
    }
  } catch (e) {
    if (isNotFound(e) && parent === req.stateDir) return created;
    const why = `directory ${parent} ${describeFsError(e)}`;
    return { ok: false, field: 'path', message: `cannot create ${req.path}: ${why}` };
  }
  try {
    accessSync(parent, constants.W_OK);
    return created;
  } catch {
    return { ok: false, field: 'path', message: `cannot create ${req.path}: directory ${parent} is not writable` };
  }
}

function checkAccess(req: BackingRequest, result: BackingInspection): BackingInspection {
  try {
    accessSync(req.path, req.readOnly ? constants.R_OK : constants.R_OK | constants.W_OK);
    return result;
  } catch {
    const how = req.readOnly ? 'reading' : 'reading and writing';
    return { ok: false, field: 'path', message: `${req.path} cannot be opened for ${how} (permission denied)` };
  }
}

function isNotFound(e: unknown): boolean {
  return typeof e === 'object' && e !== null && 'code' in e && (e as { code: unknown }).code === 'ENOENT';
}
