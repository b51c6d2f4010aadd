// The library's common read and write (docs/initiator.md "Fast path", "The
// common read and write"): a READ or WRITE of registered memory that fits one
// command, on a single-path session that is up, with no AbortSignal. It costs
// one promise, the caller's, and one record from a pool: the record is the
// command's attempt (its deadline, the recovery ladder's tag), the native
// queue's waiter and the holder of the caller's resolve and reject, so no
// closure or object is made per I/O. Anything but a plain GOOD answer (a unit
// attention, BUSY, a lost connection, a timeout) hands the command to the
// general path (Session.command) from where it stands, which then keeps every
// rule of docs/initiator.md (reissue, fencing, retries, errors with codes).
import type { Attempt } from './channel.js';
import type { Connection, QueuedCommand } from './connection.js';
import type { RegisteredBuffer } from './registered-buffer.js';
import type { ScsiRequest } from './scsi-request.js';

/** The volume that issued a command: builds the general path's request for it. */
export interface FastIoOwner {
  readonly lun: number;
  /** Bytes per LBA: offsets and lengths are whole blocks (Volume checks). */
  readonly blockSize: number;
  /** @internal The request the general path sends when this one did not end plainly. */
  requestFor(io: FastIo): ScsiRequest;
  /** @internal Names the operation in errors. */
  what(op: string, offset: number, length: number): string;
}

/** Where a record's end is reported: the channel that sent it, then the session. */
export interface FastIoChannel {
  fastPosted(io: FastIo, tagWord: number): void;
  fastUnposted(io: FastIo): void;
  fastEnded(io: FastIo): void;
}

export interface FastIoSession {
  fastUnposted(io: FastIo): void;
  fastAnswered(io: FastIo, status: number, sense: Buffer, underflow: number): void;
  fastFailed(io: FastIo, e: Error): void;
}

/** One command of the common read and write; reused from the session's pool once it ends plainly. */
export class FastIo implements QueuedCommand, Attempt {
  // Attempt (channel.ts): the deadline and the recovery ladder read these.
  sent = false;
  timedOut = false;
  settled = false;
  conn: Connection | undefined = undefined;
  lun = 0;
  /** The queue tag's low word (its high word is 0): a BigInt only if the recovery ladder needs one. */
  tagWord = 0;

  owner: FastIoOwner | null = null;
  write = false;
  fua = false;
  /** Byte offset in the volume, and length. */
  offset = 0;
  length = 0;
  lba = 0;
  blocks = 0;
  reg: RegisteredBuffer | null = null;
  /** Offset of the data in `reg`. */
  regOffset = 0;
  /** What a read resolves with (the caller's Buffer view). */
  result: Buffer | undefined = undefined;
  channel: FastIoChannel | null = null;
  /** The path index of the channel, for fencing when the command is lost with its connection. */
  pathIndex = 0;
  resolve: (v: Buffer | undefined) => void = noop;
  reject: (e: Error) => void = noop;

  constructor(readonly session: FastIoSession) {}

  get tag(): bigint {
    return BigInt(this.tagWord);
  }

  /** Went out with its batch (Connection.postBatch). */
  posted(tagWord: number): void {
    this.channel!.fastPosted(this, tagWord);
  }

  /** Did not go out with its batch: the general path sends it. */
  unposted(): void {
    this.channel!.fastUnposted(this);
    this.session.fastUnposted(this);
  }

  /** The native queue's answer (Connection.onFastComplete). */
  done(status: number, sense: Buffer, underflow: number): void {
    this.channel!.fastEnded(this);
    this.session.fastAnswered(this, status, sense, underflow);
  }

  fail(e: Error): void {
    this.channel!.fastEnded(this);
    this.session.fastFailed(this, e);
  }

  /** Readies a pooled record for its next command. */
  reset(): void {
    this.sent = false;
    this.timedOut = false;
    this.settled = false;
    this.conn = undefined;
    this.owner = null;
    this.reg = null;
    this.result = undefined;
    this.channel = null;
    this.resolve = noop;
    this.reject = noop;
  }
}

function noop(): void {}

let capturedResolve: (v: Buffer | undefined) => void = noop;
let capturedReject: (e: Error) => void = noop;

/** The Promise executor, one function for every command: it hands the resolving functions over without a closure per call. */
function capture(resolve: (v: Buffer | undefined) => void, reject: (e: Error) => void): void {
  capturedResolve = resolve;
  capturedReject = reject;
}

/** The caller's promise for `io`, its resolving functions stored in the record. */
export function promiseFor(io: FastIo): Promise<Buffer | undefined> {
  const p = new Promise<Buffer | undefined>(capture);
  io.resolve = capturedResolve;
  io.reject = capturedReject;
  capturedResolve = noop;
  capturedReject = noop;
  return p;
}
