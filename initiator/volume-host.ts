// What a Volume needs from the session that opened it: run a request, learn
// of unit attentions on its LUN, the largest transfer, and registered memory.
// Session implements it; Volume sees only this, so volume.ts does not import
// session.ts (which builds volumes) and the two modules have no type cycle.
import type { Sense } from '../protocol/scsi/sense.js';
import type { FastIoOwner } from './fast-io.js';
import type { RegisteredBuffer } from './registered-buffer.js';
import type { ScsiRequest, ScsiResponse } from './scsi-request.js';

/** Notified of unit attentions on a LUN (an open Volume). */
export interface AttentionListener {
  onUnitAttention(sense: Sense): void;
}

export interface VolumeHost {
  command(req: ScsiRequest): Promise<ScsiResponse>;
  /** Registers for unit attentions on the LUN; returns the unregister call. */
  watch(lun: number, l: AttentionListener): () => void;
  readonly maxTransfer: number;
  /** The common read and write (fast-io.ts), or null when they go the general way (command). */
  fastIo(owner: FastIoOwner, write: boolean, fua: boolean, offset: number, length: number, reg: RegisteredBuffer, regOffset: number, result: Buffer | undefined): Promise<Buffer | undefined> | null;
  allocate(size: number): RegisteredBuffer;
}
