// A capsule that breaks the rblk protocol (docs/protocol.md §15): it ends its
// connection alone, with the T_LOGOUT reason it carries and a logged message.
import { LogoutReason, Opcode } from '../../protocol/wire/index.js';

export class ProtocolViolation extends Error {
  constructor(
    message: string,
    readonly logoutReason: number = LogoutReason.PROTOCOL_ERROR,
  ) {
    super(message);
  }
}

/** An opcode's name for a log line or a violation's message. */
export function opName(op: number): string {
  for (const [k, v] of Object.entries(Opcode)) if (v === op) return k;
  return `0x${op.toString(16)}`;
}
