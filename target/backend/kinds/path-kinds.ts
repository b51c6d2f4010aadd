// The two kinds a volume's `path` selects: a regular file (created or grown to the configured
// size) or a block device (its size is the device's). Both are descriptor backends, so direct
// and io_engine apply; stat decides which one a path is, at load and again at open.

import { existsSync } from 'node:fs';
import { stat, truncate } from 'node:fs/promises';
import { resolve as resolvePath } from 'node:path';
import { inspectBacking, type BackingInspection } from '../../../config/backing.js';
import type { BackendKind, KindInput } from '../kind.js';
import { openBackend } from '../open.js';
import { cloneFile } from '../reflink.js';
import type { IoEngineChoice } from '../positional-io.js';

export interface FileBacking {
  readonly kind: 'file';
  readonly path: string;
  /** Configured size; the file is created or grown to it. */
  readonly size?: number;
  /**
   * clone_of (docs/operations.md "Snapshots and clones"), kept only while the
   * file does not exist yet: VOLUME@SNAP as written, and the snapshot's file
   * (config/resolve.ts fills it in), which the first open reflinks to `path`.
   */
  readonly cloneOf?: string;
  readonly cloneFrom?: string;
}

export interface BlockDeviceBacking {
  readonly kind: 'blockdev';
  readonly path: string;
}

// config/schema.ts IO_ENGINES, spelled here because the schema is built from this module.
const IO_ENGINES: readonly IoEngineChoice[] = ['auto', 'io_uring', 'threads'];

const properties = {
  path: { type: 'string', minLength: 1 },
  direct: { type: 'boolean' },
  io_engine: { enum: [...IO_ENGINES] },
};

/** Relative backing paths live in the state directory, next to the identifiers. */
function inspect(input: KindInput): { path: string; found: BackingInspection | undefined } {
  const path = resolvePath(input.stateDir, input.get('path') as string);
  // A size already reported as wrong would turn into a misleading "does not exist, give size".
  const found =
    input.sizeGiven && input.size === undefined
      ? undefined
      : inspectBacking({ path, size: input.size, readOnly: input.readOnly, stateDir: input.stateDir });
  return { path, found };
}

export const blockDeviceKind: BackendKind<BlockDeviceBacking> = {
  kind: 'blockdev',
  key: 'path',
  keyText: 'path',
  describes: 'a file or block device',
  selected: (v) => typeof v === 'string',
  properties,
  descriptorOptions: true,
  resolve(input) {
    const { path, found } = inspect(input);
    // Anything else, errors included, is the file kind's to report.
    return found?.ok === true && found.kind === 'blockdev' ? { kind: 'blockdev', path } : null;
  },
  claim: (b) => `backing path ${b.path}`,
  where: (b) => `blockdev ${b.path}`,
  configuredSize: () => undefined,
  defaultDirect: () => true,
  open: (b, o) =>
    openBackend({ path: b.path, readOnly: o.readOnly, direct: o.direct, ioEngine: o.ioEngine, logicalBlockSize: o.logicalBlockSize, shared: o.sharedStore }),
};

/**
 * clone_of: VOLUME@SNAP, both names as volume and snapshot names are written;
 * or, for an rbd volume, POOL/IMAGE@SNAP or POOL/NAMESPACE/IMAGE@SNAP as Ceph
 * names them (rbd-kind.ts). The one key serves both kinds.
 */
const CLONE_OF = '^([A-Za-z0-9._-]{1,64}@[A-Za-z0-9._-]{1,64}|([^/@\\s]{1,255}/){1,2}[^/@\\s]{1,255}@[^/@\\s]{1,255})$';

export const fileKind: BackendKind<FileBacking> = {
  kind: 'file',
  key: 'path',
  keyText: 'path',
  describes: 'a file or block device',
  selected: (v) => typeof v === 'string',
  // patternMessage: config/schema.ts PATTERN_MESSAGE (not imported: the schema is built from this module).
  properties: { ...properties, clone_of: { type: 'string', pattern: CLONE_OF, patternMessage: 'must be VOLUME@SNAPSHOT, each 1 to 64 characters of letters, digits and . _ -, or for an rbd volume POOL/IMAGE@SNAPSHOT' } },
  descriptorOptions: true,
  resolve(input) {
    const cloneOf = input.get('clone_of');
    if (typeof cloneOf === 'string') {
      // The clone is made at the first open; until then its file need not exist (resolve.ts checks the snapshot).
      const path = resolvePath(input.stateDir, input.get('path') as string);
      if (!existsSync(path)) return { kind: 'file', path, cloneOf, ...(input.size !== undefined ? { size: input.size } : {}) };
    }
    const { path, found } = inspect(input);
    if (found === undefined) return undefined;
    if (!found.ok) {
      input.error(found.field, found.message);
      return undefined;
    }
    if (found.kind !== 'file') return null;
    if (input.size === undefined && found.currentSize % input.blockSize !== 0) {
      input.warn('path', `file size ${found.currentSize} is not a multiple of ${input.blockSize}: the tail is not served`);
    }
    return { kind: 'file', path, ...(input.size !== undefined ? { size: input.size } : {}) };
  },
  claim: (b) => `backing path ${b.path}`,
  where: (b) => `file ${b.path}`,
  configuredSize: (b) => b.size,
  defaultDirect: () => false,
  async open(b, o) {
    // clone_of: made once, at the first open; refused where the filesystem has no reflink (reflink.ts).
    if (b.cloneFrom !== undefined && !existsSync(b.path)) {
      const instead = `make ${b.path} a full copy yourself (\`rblkd ctl clone ${b.cloneOf ?? 'VOLUME@SNAP'} ${b.path} --copy\`) and start or reload again`;
      await cloneFile(b.cloneFrom, b.path, { instead });
    }
    return openBackend({
      path: b.path,
      ...(b.size !== undefined ? { size: b.size } : {}),
      readOnly: o.readOnly,
      direct: o.direct,
      ioEngine: o.ioEngine,
      logicalBlockSize: o.logicalBlockSize,
      shared: o.sharedStore,
    });
  },
  async grow(b, _backend, size) {
    // ftruncate only ever lengthens here: the new tail is a hole, no data moves.
    if ((await stat(b.path)).size < size) await truncate(b.path, size);
  },
};
