// FUSE attach: a remote volume as one file, and as a mounted filesystem on a
// loop device over that file.
export { attachFuse, DEFAULT_FILE_NAME, type AttachFuseOptions, type FuseAttachment } from './attach.js';
export {
  cleanupStaleAttachment,
  mountVolume,
  MountedVolume,
  NoFilesystemError,
  unmountVolume,
  type MountVolumeOptions,
  type UnmountOptions,
} from './mount-volume.js';
export {
  DEFAULT_STATE_DIR,
  isOwnerAlive,
  readAttachmentRecords,
  removeAttachmentRecord,
  writeAttachmentRecord,
  type AttachmentRecord,
  type RecordProblem,
} from './attachment-record.js';
export { VolumeFile } from './volume-file.js';
export type { FuseLogger } from './logger.js';
