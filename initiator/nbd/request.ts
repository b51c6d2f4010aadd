// One transmission request: its header (proto.md "Request message") and the
// checks a request must pass before it reaches the device (proto.md "Size
// constraints", "Command flags", "Error values").
import { Command, CommandFlag, Errno, REQUEST_MAGIC, TransmissionFlag, type NbdErrno } from './constants.js';
import { NbdRequestError, ProtocolViolation } from './errors.js';
import type { NbdExport } from './export-info.js';

export interface NbdRequest {
  readonly flags: number;
  readonly type: number;
  readonly cookie: bigint;
  readonly offset: bigint;
  readonly length: number;
}

const NAMES: Record<number, string> = {
  [Command.READ]: 'NBD_CMD_READ',
  [Command.WRITE]: 'NBD_CMD_WRITE',
  [Command.DISC]: 'NBD_CMD_DISC',
  [Command.FLUSH]: 'NBD_CMD_FLUSH',
  [Command.TRIM]: 'NBD_CMD_TRIM',
  [Command.CACHE]: 'NBD_CMD_CACHE',
  [Command.WRITE_ZEROES]: 'NBD_CMD_WRITE_ZEROES',
  [Command.BLOCK_STATUS]: 'NBD_CMD_BLOCK_STATUS',
};

export function commandName(type: number): string {
  return NAMES[type] ?? `command ${type}`;
}

/** Parses a 28-byte request header; a wrong magic means the stream is lost. */
export function parseRequest(head: Buffer): NbdRequest {
  const magic = head.readUInt32BE(0);
  if (magic !== REQUEST_MAGIC) throw new ProtocolViolation(`bad request magic 0x${magic.toString(16)}`);
  return {
    flags: head.readUInt16BE(4),
    type: head.readUInt16BE(6),
    cookie: head.readBigUInt64BE(8),
    offset: head.readBigUInt64BE(16),
    length: head.readUInt32BE(24),
  };
}

/** Commands that store data: beyond the end they fail with ENOSPC, not EINVAL. */
export function storesData(type: number): boolean {
  return type === Command.WRITE || type === Command.WRITE_ZEROES;
}

function fail(errno: NbdErrno, message: string): NbdRequestError {
  return new NbdRequestError(errno, message);
}

/**
 * Returns the error a request must be answered with, or null when it may run.
 * BLOCK_STATUS runs only when base:allocation was negotiated (`allocation`).
 */
export function checkRequest(
  req: NbdRequest,
  exp: NbdExport,
  flags: number,
  structured: boolean,
  allocation = false,
): NbdRequestError | null {
  const name = commandName(req.type);
  const device = exp.device;
  switch (req.type) {
    case Command.READ:
    case Command.WRITE:
    case Command.FLUSH:
    case Command.TRIM:
    case Command.CACHE:
    case Command.WRITE_ZEROES:
      break;
    case Command.BLOCK_STATUS:
      if (!allocation) return fail(Errno.EINVAL, `${name} needs a metadata context, and none was negotiated (NBD_OPT_SET_META_CONTEXT base:allocation)`);
      // proto.md NBD_CMD_BLOCK_STATUS: a zero length is invalid.
      if (req.length === 0) return fail(Errno.EINVAL, `${name} of length 0`);
      break;
    default:
      // proto.md "Error values": unknown commands get EINVAL. Only WRITE
      // carries a payload, so the stream stays in step.
      return fail(Errno.EINVAL, `unknown ${name}`);
  }
  const writes = req.type === Command.WRITE || req.type === Command.TRIM || req.type === Command.WRITE_ZEROES;
  // proto.md "Error values": EPERM for write, trim and write-zeroes on a read-only export.
  if (writes && device.readOnly) return fail(Errno.EPERM, `${name} on a read-only export`);

  // FUA is valid on every command once SEND_FUA is advertised; the others
  // belong to one command each (proto.md "Command flags").
  let allowed = (flags & TransmissionFlag.SEND_FUA) !== 0 ? CommandFlag.FUA : 0;
  if (req.type === Command.READ && (flags & TransmissionFlag.SEND_DF) !== 0) allowed |= CommandFlag.DF;
  if (req.type === Command.BLOCK_STATUS) allowed |= CommandFlag.REQ_ONE;
  if (req.type === Command.WRITE_ZEROES) {
    allowed |= CommandFlag.NO_HOLE;
    if ((flags & TransmissionFlag.SEND_FAST_ZERO) !== 0) allowed |= CommandFlag.FAST_ZERO;
  }
  if ((req.flags & ~allowed) !== 0) {
    return fail(Errno.EINVAL, `flags 0x${req.flags.toString(16)} are not valid for ${name}`);
  }
  if (req.type === Command.TRIM && (flags & TransmissionFlag.SEND_TRIM) === 0) {
    return fail(Errno.EINVAL, `${name} was not offered for this export`);
  }
  if (req.type === Command.FLUSH) {
    // proto.md NBD_CMD_FLUSH: offset and length MUST be zero.
    if (req.offset !== 0n || req.length !== 0) return fail(Errno.EINVAL, `${name} with nonzero offset or length`);
    return null;
  }

  const bs = BigInt(exp.minBlock);
  if (req.offset % bs !== 0n || req.length % exp.minBlock !== 0) {
    return fail(Errno.EINVAL, `${name} at ${req.offset}+${req.length} is not aligned to ${exp.minBlock}-byte blocks`);
  }
  if ((req.type === Command.READ || req.type === Command.WRITE) && req.length > exp.maxPayload) {
    // proto.md "Size constraints": a structured-reply server may refuse an
    // oversized read with EOVERFLOW; other payload overruns are EINVAL.
    const errno = req.type === Command.READ && structured ? Errno.EOVERFLOW : Errno.EINVAL;
    return fail(errno, `${name} of ${req.length} bytes exceeds the ${exp.maxPayload}-byte maximum payload`);
  }
  if (req.offset + BigInt(req.length) > BigInt(device.size)) {
    const errno = storesData(req.type) ? Errno.ENOSPC : Errno.EINVAL;
    return fail(errno, `${name} at ${req.offset}+${req.length} goes beyond the ${device.size}-byte export`);
  }
  return null;
}
