// The one error type every wire decoder throws (docs/protocol.md §15, "Errors and how each side reacts").
// The reason is a stable code for logs, metrics and tests; the message is for people.

export type ProtocolErrorReason =
  /** Fewer bytes than the layout needs, or fewer than the header's length field claims. */
  | 'TRUNCATED'
  /** Bytes that no layout accounts for, or two length fields that disagree. */
  | 'LENGTH_MISMATCH'
  /** Larger than a protocol maximum or a negotiated limit. */
  | 'OVERSIZE'
  | 'BAD_VERSION'
  /** Unknown opcode, the wrong opcode for this decoder, or an opcode the sender may not send. */
  | 'BAD_OPCODE'
  /** Connection private data without the "RBLK" magic. */
  | 'BAD_MAGIC'
  /** A field holds a value outside its allowed set or range. */
  | 'BAD_FIELD'
  | 'RESERVED_NONZERO'
  | 'BAD_NAME'
  /** A data descriptor of zero length, or one whose address range wraps past 2^64. */
  | 'BAD_DESCRIPTOR'
  | 'BAD_DESCRIPTOR_COUNT';

export class ProtocolError extends Error {
  readonly reason: ProtocolErrorReason;

  constructor(reason: ProtocolErrorReason, message: string) {
    super(message);
    this.name = 'ProtocolError';
    this.reason = reason;
  }
}

export function fail(reason: ProtocolErrorReason, message: string): never {
  throw new ProtocolError(reason, message);
}
