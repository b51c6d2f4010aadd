// One SCSI command as the session carries it: the CDB, where its data is, and
// whether it may be sent again after a lost connection.
import type { RegisteredBuffer } from './registered-buffer.js';

/** Data-out from an ordinary Buffer (sent in the capsule or copied into the I/O pool) or from registered memory. */
export type DataOut =
  | { readonly kind: 'bytes'; readonly data: Buffer }
  | { readonly kind: 'registered'; readonly buffer: RegisteredBuffer; readonly offset: number; readonly length: number };

/** Data-in into an ordinary Buffer (copied out of the I/O pool) or straight into registered memory. */
export type DataIn =
  | { readonly kind: 'bytes'; readonly into: Buffer }
  | { readonly kind: 'registered'; readonly buffer: RegisteredBuffer; readonly offset: number; readonly length: number };

export interface ScsiRequest {
  readonly lun: number;
  readonly cdb: Buffer;
  readonly dataOut?: DataOut;
  readonly dataIn?: DataIn;
  /**
   * Sending it twice has the effect of sending it once (READ, WRITE, UNMAP,
   * WRITE SAME, SYNCHRONIZE CACHE, inquiries): it is reissued after a lost
   * connection. COMPARE AND WRITE and PERSISTENT RESERVE OUT are not.
   */
  readonly idempotent: boolean;
  /** Names the operation in error messages ("write of 4096 bytes at 8192"). */
  readonly what: string;
  /**
   * The CDB is the READ or WRITE that protocol/scsi/cdb.ts read()/write()
   * build from these: the native queue may send it instead (docs/initiator.md "Fast path").
   */
  readonly rw?: ReadWrite;
}

export interface ReadWrite {
  readonly write: boolean;
  readonly fua: boolean;
  readonly lba: number;
  readonly blocks: number;
}

export interface ScsiResponse {
  status: number;
  sense: Buffer;
  /** Data-in bytes the target placed. */
  dataIn: number;
}

/** The registered buffer a request's data lives in, if any (it pins the request to that buffer's connection). */
export function registeredOf(req: ScsiRequest): RegisteredBuffer | undefined {
  if (req.dataOut?.kind === 'registered') return req.dataOut.buffer;
  if (req.dataIn?.kind === 'registered') return req.dataIn.buffer;
  return undefined;
}
