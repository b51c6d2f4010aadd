// `rblk mount URL DIR [--mkfs ext4]`: FUSE file → loop device → filesystem.
//
//   attachFuse (private dir under the state dir)
//     → losetup --find --show --direct-io=on --sector-size <block size>
//       → mkfs.ext4 -F -q (optional) → mount <loop> DIR
//
// and back in reverse: umount → losetup -d → FUSE unmount. Durability runs the
// same path down: a filesystem flush (or FUA, which loop emulates with a flush)
// makes the loop fsync the FUSE file, and FUSE fsync is the device's flush.
//
// This process serves the FUSE file. If it exits without unmountVolume, the
// FUSE mount is still detached (native/fuse.ts) but the filesystem above it
// sees I/O errors: callers trap their signals and await unmountVolume.
import { mkdir, mkdtemp, realpath, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ensureUnmounted, listMounts } from '../../native/fuse.js';
import type { BlockDevice } from '../block-device.js';
import { attachFuse, type FuseAttachment } from './attach.js';
import {
  DEFAULT_STATE_DIR,
  isOwnerAlive,
  removeAttachmentRecord,
  writeAttachmentRecord,
  type AttachmentRecord,
} from './attachment-record.js';
import { silentLogger, type FuseLogger } from './logger.js';
import { attachLoop, detachLoop, loopDirectIo } from './loop-device.js';
import { CommandError, run } from './run.js';

/**
 * mount(8) failed and blkid finds no filesystem signature on the volume: it
 * is blank, or holds something mount cannot read. The CLI suggests --mkfs.
 */
export class NoFilesystemError extends Error {
  readonly device: string;

  constructor(device: string, cause: unknown) {
    super(`the volume holds no filesystem (blkid finds no signature on ${device})`, { cause });
    this.name = 'NoFilesystemError';
    this.device = device;
  }
}

/** blkid -p exits 2 when it finds no signature at all (blkid(8) "RETURN CODE"). */
async function hasSignature(device: string): Promise<boolean> {
  try {
    await run('blkid', ['-p', device]);
    return true;
  } catch (e) {
    return !(e instanceof CommandError && e.exitCode === 2);
  }
}

export interface MountVolumeOptions {
  /** Make a new filesystem first (destroys the volume's contents). */
  mkfs?: 'ext4';
  /** The FUSE file's name (default "volume"). */
  fileName?: string;
  /** Where the private FUSE directory and the attachment record live (default /run/rblk). */
  stateDir?: string;
  /** What is mounted (a volume URL or name), for the record and /proc/mounts. */
  label?: string;
  log?: FuseLogger;
  /** mount -t (default: ext4 after mkfs, else mount's own probing). */
  fsType?: string;
  /** mount -o options; "ro" is added for a read-only volume. */
  mountOptions?: string[];
  /** The loop device's direct I/O to the FUSE file (default true). */
  directIo?: boolean;
}

export interface UnmountOptions {
  /** If the filesystem is busy, detach it lazily (umount -l) and go on, instead of failing. */
  force?: boolean;
}

// What has been set up so far, so that teardown undoes exactly that.
interface Stack {
  stateDir: string;
  fuseDir: string;
  attachment: FuseAttachment | null;
  record: AttachmentRecord | null;
  loopDevice: string | null;
  file: string | null;
  mountpoint: string | null;
  createdMountpoint: boolean;
}

export class MountedVolume {
  readonly stateDir: string;
  readonly record: AttachmentRecord;
  private readonly stack: Stack;
  private readonly log: FuseLogger;
  private unmounting: Promise<void> | undefined;

  /** @internal mountVolume makes these. */
  constructor(stack: Stack, record: AttachmentRecord, log: FuseLogger) {
    this.stack = stack;
    this.stateDir = stack.stateDir;
    this.record = record;
    this.log = log;
  }

  get id(): string {
    return this.record.id;
  }
  get mountpoint(): string {
    return this.stack.mountpoint ?? '';
  }
  get loopDevice(): string {
    return this.stack.loopDevice ?? '';
  }
  get file(): string {
    return this.stack.file ?? '';
  }
  get fuseDir(): string {
    return this.stack.fuseDir;
  }
  get fsType(): string | null {
    return this.record.fsType;
  }

  /** Same as unmountVolume(this, opts). */
  unmount(opts: UnmountOptions = {}): Promise<void> {
    this.unmounting ??= teardown(this.stack, opts, this.log).catch((err: unknown) => {
      this.unmounting = undefined;
      throw err;
    });
    return this.unmounting;
  }
}

async function ensureDir(dir: string): Promise<boolean> {
  try {
    const st = await stat(dir);
    if (!st.isDirectory()) throw new Error(`${dir} is not a directory`);
    return false;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    await mkdir(dir, { recursive: true });
    return true;
  }
}

export async function mountVolume(device: BlockDevice, dir: string, opts: MountVolumeOptions = {}): Promise<MountedVolume> {
  if (opts.mkfs !== undefined && device.readOnly) throw new Error('cannot make a filesystem on a read-only volume');
  if (opts.mkfs !== undefined && opts.mkfs !== 'ext4') throw new Error(`unsupported mkfs type ${String(opts.mkfs)}`);
  const log = opts.log ?? silentLogger;
  const stateDir = opts.stateDir ?? DEFAULT_STATE_DIR;
  await mkdir(stateDir, { recursive: true, mode: 0o755 });
  const stack: Stack = {
    stateDir,
    fuseDir: await mkdtemp(join(stateDir, 'fuse-')),
    attachment: null,
    record: null,
    loopDevice: null,
    file: null,
    mountpoint: null,
    createdMountpoint: false,
  };
  try {
    const attachment = await attachFuse(device, stack.fuseDir, { fileName: opts.fileName, log, label: opts.label, stateDir });
    stack.attachment = attachment;
    stack.file = attachment.path;
    const record = attachment.record;
    if (record === null) throw new Error('attachFuse wrote no record');
    stack.record = record;
    record.kind = 'mount';
    await writeAttachmentRecord(stateDir, record);

    const directIo = opts.directIo ?? true;
    stack.loopDevice = await attachLoop(attachment.path, { readOnly: device.readOnly, sectorSize: device.blockSize, directIo });
    record.loopDevice = stack.loopDevice;
    await writeAttachmentRecord(stateDir, record);
    if (directIo && !(await loopDirectIo(stack.loopDevice))) {
      log.warn('loop device runs without direct I/O: the FUSE file is cached twice', { loop: stack.loopDevice });
    }

    if (opts.mkfs === 'ext4') await run('mkfs.ext4', ['-F', '-q', stack.loopDevice]);

    stack.createdMountpoint = await ensureDir(dir);
    record.createdMountpoint = stack.createdMountpoint;
    const mountpoint = await realpath(dir);
    stack.mountpoint = mountpoint;
    const fsType = opts.fsType ?? (opts.mkfs === 'ext4' ? 'ext4' : undefined);
    const mo = [...(opts.mountOptions ?? [])];
    if (device.readOnly && !mo.includes('ro')) mo.push('ro');
    const args: string[] = [];
    if (fsType !== undefined) args.push('-t', fsType);
    if (mo.length > 0) args.push('-o', mo.join(','));
    args.push(stack.loopDevice, mountpoint);
    try {
      await run('mount', args);
    } catch (e) {
      if (fsType === undefined && !(await hasSignature(stack.loopDevice))) throw new NoFilesystemError(stack.loopDevice, e);
      throw e;
    }
    record.mountpoint = mountpoint;
    record.fsType = (await listMounts()).find((m) => m.mountpoint === mountpoint)?.fsType ?? fsType ?? null;
    await writeAttachmentRecord(stateDir, record);
    log.info('volume mounted', { mountpoint, loop: stack.loopDevice, file: stack.file, fsType: record.fsType });
    return new MountedVolume(stack, record, log);
  } catch (err) {
    try {
      await teardown(stack, { force: true }, log);
    } catch (undoErr) {
      log.warn('cleanup after a failed mount was incomplete', { error: String(undoErr) });
    }
    throw err;
  }
}

/**
 * umount → losetup -d → FUSE unmount → remove the private directory and the
 * record. Fails without touching the loop device or FUSE if the filesystem is
 * busy (unless force). After that, each step runs even if an earlier one
 * failed, and steps already undone (by an earlier, partial attempt) are skipped.
 */
export function unmountVolume(vol: MountedVolume, opts: UnmountOptions = {}): Promise<void> {
  return vol.unmount(opts);
}

async function isMountedAt(dir: string): Promise<boolean> {
  return (await listMounts()).some((m) => m.mountpoint === dir);
}

async function teardown(stack: Stack, opts: UnmountOptions, log: FuseLogger): Promise<void> {
  if (stack.mountpoint !== null && (await isMountedAt(stack.mountpoint))) {
    try {
      await run('umount', [stack.mountpoint]);
    } catch (err) {
      if (!opts.force) throw err;
      log.warn('filesystem busy: detaching it lazily', { mountpoint: stack.mountpoint });
      await run('umount', ['-l', stack.mountpoint]);
    }
  }
  const errors: unknown[] = [];
  const step = async (fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (err) {
      errors.push(err);
    }
  };
  await step(async () => {
    if (stack.loopDevice !== null && stack.file !== null) await detachLoop(stack.loopDevice, stack.file);
  });
  await step(async () => {
    if (stack.attachment !== null) await stack.attachment.close();
    else await ensureUnmounted(stack.fuseDir);
  });
  await step(async () => {
    if (stack.record === null || stack.record.kind === 'mount') await rmdir(stack.fuseDir).catch(ignoreMissing);
  });
  await step(async () => {
    if (stack.createdMountpoint && stack.mountpoint !== null && !(await isMountedAt(stack.mountpoint))) {
      await rmdir(stack.mountpoint).catch(ignoreMissing);
    }
  });
  await step(async () => {
    if (stack.record !== null) await removeAttachmentRecord(stack.stateDir, stack.record.id);
  });
  if (errors.length > 0) {
    throw new AggregateError(errors, `unmount incomplete: ${errors.map((e) => (e instanceof Error ? e.message : String(e))).join('; ')}`);
  }
  log.info('volume unmounted', { mountpoint: stack.mountpoint, loop: stack.loopDevice });
}

function ignoreMissing(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
}

/**
 * Undoes what a record describes when the process that served it is gone (it
 * crashed or was killed): lazy umount, loop detach, FUSE unmount, record
 * removal. A record whose owner still runs is refused: ask that process.
 */
export async function cleanupStaleAttachment(stateDir: string, rec: AttachmentRecord, log: FuseLogger = silentLogger): Promise<void> {
  if (rec.pid !== process.pid && isOwnerAlive(rec)) {
    throw new Error(`attachment ${rec.id} is served by running process ${rec.pid}; stop that process instead`);
  }
  const stack: Stack = {
    stateDir,
    fuseDir: rec.fuseDir,
    attachment: null,
    record: rec,
    loopDevice: rec.loopDevice,
    file: rec.file,
    mountpoint: rec.mountpoint,
    createdMountpoint: rec.createdMountpoint,
  };
  await teardown(stack, { force: true }, log);
}
