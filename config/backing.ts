// What a volume's path names on this host, checked when the config is loaded so that a typo is
// reported by --check-config and by a refused reload, not by a volume that fails at first I/O.

import { accessSync, constants, statSync } from 'node:fs';
import { dirname } from 'node:path';
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

export function inspectBacking(req: BackingRequest): BackingInspection {
  let st;
  try {
    st = statSync(req.path);
  } catch (e) {
    if (!isNotFound(e)) return { ok: false, field: 'path', message: `${req.path} ${describeFsError(e)}` };
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
  if (req.size === undefined && st.size === 0) {
    return { ok: false, field: 'path', message: `${req.path} is empty (give size to have rblkd grow it)` };
  }
  return checkAccess(req, { ok: true, kind: 'file', exists: true, currentSize: st.size });
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
