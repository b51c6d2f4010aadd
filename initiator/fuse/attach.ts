// `rblk attach --fuse DIR`: the volume as one regular file in a FUSE mount.
import { FuseMount } from '../../native/fuse.js';
import type { BlockDevice } from '../block-device.js';
import {
  newAttachmentId,
  removeAttachmentRecord,
  writeAttachmentRecord,
  type AttachmentRecord,
} from './attachment-record.js';
import { silentLogger, type FuseLogger } from './logger.js';
import { VolumeFile } from './volume-file.js';

export const DEFAULT_FILE_NAME = 'volume';

export interface AttachFuseOptions {
  /** The file's name in dir (default "volume"). */
  fileName?: string;
  log?: FuseLogger;
  /** What is attached (a volume URL or name): the mount's source and the record's label. */
  label?: string;
  /** Write an attachment record here, removed again by close() (default: none). */
  stateDir?: string;
  /** Let other users open the file (FUSE allow_other). */
  allowOther?: boolean;
  /** The kernel ended the mount from outside (umount, connection abort). */
  onEnd?: (errno: number) => void;
}

export interface FuseAttachment {
  /** The FUSE mount point. */
  readonly dir: string;
  /** The file: dir/fileName. */
  readonly path: string;
  readonly fileName: string;
  readonly record: AttachmentRecord | null;
  /** False after close() or once the kernel ended the mount. */
  readonly active: boolean;
  /** Finishes the requests in flight, unmounts, removes the record. Idempotent. */
  close(): Promise<void>;
}

export function checkFileName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0') || Buffer.byteLength(name) > 255) {
    throw new Error(`invalid file name ${JSON.stringify(name)}: it must be one path component`);
  }
}

/** Mounts dir (an existing, empty directory) with one file whose bytes are the device's. */
export async function attachFuse(device: BlockDevice, dir: string, opts: AttachFuseOptions = {}): Promise<FuseAttachment> {
  const fileName = opts.fileName ?? DEFAULT_FILE_NAME;
  checkFileName(fileName);
  const log = opts.log ?? silentLogger;
  const file = new VolumeFile(device, log);
  const mount = await FuseMount.mount(
    dir,
    {
      fileName,
      size: device.size,
      blockSize: device.blockSize,
      readOnly: device.readOnly,
      fsName: opts.label === undefined ? 'rblk' : `rblk:${opts.label}`,
      allowOther: opts.allowOther,
      onError: (err, op) => log.warn(`FUSE ${op}: unexpected failure`, { error: String(err) }),
      onEnd: (errno) => {
        log.warn('FUSE mount ended from outside', { dir: mount.dir, errno });
        opts.onEnd?.(errno);
      },
    },
    file,
  );
  let record: AttachmentRecord | null = null;
  if (opts.stateDir !== undefined) {
    record = {
      id: newAttachmentId(),
      kind: 'fuse',
      pid: process.pid,
      createdAt: new Date().toISOString(),
      label: opts.label ?? null,
      fuseDir: mount.dir,
      file: mount.path,
      size: device.size,
      blockSize: device.blockSize,
      readOnly: device.readOnly,
      loopDevice: null,
      mountpoint: null,
      fsType: null,
      createdMountpoint: false,
    };
    try {
      await writeAttachmentRecord(opts.stateDir, record);
    } catch (err) {
      await mount.close();
      throw err;
    }
  }
  log.info('FUSE attached', { file: mount.path, size: device.size, readOnly: device.readOnly });
  const stateDir = opts.stateDir;
  let closing: Promise<void> | undefined;
  return {
    dir: mount.dir,
    path: mount.path,
    fileName,
    record,
    get active() {
      return mount.active;
    },
    close() {
      closing ??= (async () => {
        await mount.close();
        if (record !== null && stateDir !== undefined) await removeAttachmentRecord(stateDir, record.id);
        log.info('FUSE detached', { file: mount.path });
      })();
      return closing;
    },
  };
}
