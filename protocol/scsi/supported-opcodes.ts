// REPORT SUPPORTED OPERATION CODES parameter data (SPC-5 6.35.2, 6.35.3).

export interface CommandTimeouts {
  nominal: number;
  recommended: number;
}

export interface CommandDescriptor {
  opcode: number;
  serviceAction: number;
  hasServiceAction: boolean;
  cdbLength: number;
  timeouts?: CommandTimeouts;
}

export function parseAllCommands(b: Buffer): CommandDescriptor[] {
  if (b.length < 4) throw new RangeError(`REPORT SUPPORTED OPERATION CODES data is ${b.length} bytes; the header alone is 4`);
  const end = Math.min(b.length, 4 + b.readUInt32BE(0));
  const out: CommandDescriptor[] = [];
  for (let at = 4; at + 8 <= end; ) {
    const ctdp = (b[at + 5] & 0x02) !== 0;
    const size = ctdp ? 20 : 8;
    if (at + size > end) break;
    out.push({
      opcode: b[at],
      serviceAction: b.readUInt16BE(at + 2),
      hasServiceAction: (b[at + 5] & 0x01) !== 0,
      cdbLength: b.readUInt16BE(at + 6),
      ...(ctdp ? { timeouts: { nominal: b.readUInt32BE(at + 12), recommended: b.readUInt32BE(at + 16) } } : {}),
    });
    at += size;
  }
  return out;
}

/** SUPPORT field (SPC-5 table 282). */
export const CommandSupport = { NOT_AVAILABLE: 0, NOT_SUPPORTED: 1, SUPPORTED: 3 } as const;

export interface OneCommand {
  support: number;
  cdbLength: number;
  /** CDB USAGE DATA: byte 0 is the opcode, other bits mark the fields the target evaluates. */
  usage: Buffer;
  timeouts?: CommandTimeouts;
}

export function parseOneCommand(b: Buffer): OneCommand {
  if (b.length < 4) throw new RangeError(`one-command data is ${b.length} bytes; the header alone is 4`);
  const cdbLength = b.readUInt16BE(2);
  const ctdp = (b[1] & 0x80) !== 0;
  const t = 4 + cdbLength;
  return {
    support: b[1] & 0x07,
    cdbLength,
    usage: Buffer.from(b.subarray(4, Math.min(b.length, t))),
    ...(ctdp && b.length >= t + 12
      ? { timeouts: { nominal: b.readUInt32BE(t + 4), recommended: b.readUInt32BE(t + 8) } }
      : {}),
  };
}
