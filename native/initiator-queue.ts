// The initiator's native command queue on one connection
// (native/src/core/initiator-queue.h; docs/initiator.md "Fast path"): READ and
// WRITE on registered memory are encoded, tagged, sent and matched in C++,
// and their completions come back as one call per CQ drain. This wrapper owns
// the queue's send memory; it knows nothing of SCSI beyond the submission
// record's fields.
import { addon, type NativeInitiatorQueue } from './binding.js';
import { FabricError } from './fabric-error.js';
import type { Endpoint, MemoryRegion } from './fabric.js';

/** Words per submission entry (native/src/core/initiator-queue.cc kSubWords). */
export const SUBMISSION_WORDS = 12;
/** Bytes of send memory per slot for a CMD with one descriptor; a slot also holds `immediate` bytes of write data. */
const SEND_SLOT = 128;
export const SUBMIT_WRITE = 1;
export const SUBMIT_FUA = 2;

/**
 * A completion's result word: GOOD; ANSWER, the answer is in `answers` for JS
 * to decode (sense, residuals, anything unusual); SEND_FAILED, the target
 * never saw the CMD.
 */
export const QueueResult = { GOOD: 0, ANSWER: 1, SEND_FAILED: 2 } as const;

export interface InitiatorQueueOptions {
  slots: number;
  answerSize: number;
  credits: number;
  reserve: number;
  remoteData: boolean;
  /**
   * The login's immediate data size (docs/protocol.md §4): WRITEs up to it
   * whose buffer is registered for remote access carry their data in the
   * CMD, so the target need not RDMA-READ it. 0: every WRITE names its buffer.
   */
  immediate: number;
  /**
   * Version 5 (docs/protocol.md §5.1): the largest message of several CMDs,
   * which the commands of one submit share; 0, one CMD per message. Each
   * slot's send memory is at least this large, since a train is built in the
   * slot of its first command.
   */
  train: number;
}

export class InitiatorQueue {
  readonly #native: NativeInitiatorQueue;
  readonly #region: MemoryRegion;
  readonly submissions: Uint32Array;
  readonly completions: Uint32Array;
  readonly answers: Buffer;
  /** The connection's credits, shared with the native side. */
  readonly credits: Int32Array;
  readonly answerSize: number;
  #closed = false;
  onComplete: ((count: number) => void) | null = null;

  constructor(ep: Endpoint, opts: InitiatorQueueOptions) {
    const slotSize = Math.max(SEND_SLOT + opts.immediate, opts.train);
    this.#region = ep.domain.register(opts.slots * slotSize);
    try {
      this.#native = new (addon().InitiatorQueue)(ep.native, this.#region.native, { ...opts, slotSize }, (n) => this.onComplete?.(n));
    } catch (e) {
      void this.#region.close().catch(() => undefined);
      throw FabricError.from(e);
    }
    this.submissions = this.#native.submissions;
    this.completions = this.#native.completions;
    this.answers = this.#native.answers;
    this.credits = this.#native.credits;
    this.answerSize = opts.answerSize;
  }

  /** Posts the first `count` submissions; returns how many went out (the rest need another way). */
  submit(count: number): number {
    if (this.#closed) return 0;
    try {
      return this.#native.submit(count);
    } catch (e) {
      throw FabricError.from(e);
    }
  }

  get outstanding(): number {
    return this.#closed ? 0 : this.#native.outstanding;
  }

  /** WRITEs sent with their data in the CMD (InitiatorQueueOptions.immediate). */
  get immediateWrites(): number {
    return this.#closed ? 0 : this.#native.immediateWrites;
  }

  /** Messages that carried more than one CMD (InitiatorQueueOptions.train). */
  get trains(): number {
    return this.#closed ? 0 : this.#native.trains;
  }

  /** Submits of several messages sent corked, as one transmit (InitiatorQueueOptions.cork). */
  get corked(): number {
    return this.#closed ? 0 : this.#native.corked;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#native.close();
    void this.#region.close().catch(() => undefined);
  }
}
