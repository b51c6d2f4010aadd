// The daemon's one entry point to storage: a path names a regular file or a
// block device (stat decides), and `memory:` names a RAM volume. The file and
// block-device backends are imported on demand, because they load the native
// addon and a memory volume must work without it (unit tests, demos).
import { stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import type { Backend } from './backend.js';
import { backendError, hasCode } from './backend-error.js';
import { MemoryBackend } from './memory.js';
import type { IoEngineChoice } from './positional-io.js';

export interface BackendSpec {
  /** A file or block-device path, or `memory:` (optionally `memory:<name>`) for a RAM volume. */
  path: string;
  /**
   * Bytes. Required for memory; for a file, the size to create or grow it to
   * (never shrinking it); for a block device the device decides, and a size
   * that differs from it is refused rather than silently ignored.
   */
  size?: number;
  readOnly?: boolean;
  /** O_DIRECT. Off for files, on for block devices, unless given. */
  direct?: boolean;
  /** For files: the volume's block size, for O_DIRECT alignment checks. */
  logicalBlockSize?: number;
  /** For files and block devices: io_uring, threads (the libuv pool), or auto (the default). */
  ioEngine?: IoEngineChoice;
  /** For files and block devices: several gateways serve the store, so it is not locked (docs/backends.md "One daemon per store"). */
  shared?: boolean;
}

export const MEMORY_PREFIX = 'memory:';

export async function openBackend(spec: BackendSpec): Promise<Backend> {
  if (spec.path.startsWith(MEMORY_PREFIX)) {
    if (spec.size === undefined) throw backendError('EINVAL', `a memory volume (${spec.path}) needs a size`);
    const name = spec.path.slice(MEMORY_PREFIX.length);
    return new MemoryBackend({ size: spec.size, readOnly: spec.readOnly, name });
  }

  let st: Stats | null = null;
  try {
    st = await stat(spec.path);
  } catch (err) {
    // A missing path is a file still to be created (when a size is given).
    if (!hasCode(err, 'ENOENT')) throw err;
  }

  if (st === null || st.isFile()) {
    const { FileBackend } = await import('./file.js');
    return FileBackend.open(spec);
  }
  if (st.isBlockDevice()) {
    const { BlockDeviceBackend } = await import('./blockdev.js');
    const backend = await BlockDeviceBackend.open(spec);
    if (spec.size !== undefined && spec.size !== backend.size) {
      await backend.close();
      throw backendError('EINVAL', `${spec.path}: the configured size ${spec.size} differs from the device's ${backend.size} bytes; a block device's size comes from the device`);
    }
    return backend;
  }
  throw backendError('EINVAL', `${spec.path}: neither a regular file nor a block device`);
}
