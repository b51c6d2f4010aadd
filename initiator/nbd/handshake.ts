// Fixed newstyle negotiation (proto.md "Fixed newstyle negotiation", "Option
// types"): greet, read the client flags, then answer options until the client
// picks an export with NBD_OPT_GO or NBD_OPT_EXPORT_NAME, or leaves.
import type { Socket } from 'node:net';
import type { ByteReader } from './byte-reader.js';
import {
  BASE_ALLOCATION,
  BASE_ALLOCATION_ID,
  ClientFlag,
  HandshakeFlag,
  IHAVEOPT,
  Info,
  MAX_OPTION_DATA,
  MAX_STRING,
  OPTION_HEADER_SIZE,
  Option,
  OptionReply,
} from './constants.js';
import { ProtocolViolation } from './errors.js';
import { transmissionFlags, type NbdExport } from './export-info.js';
import { greeting, messageBytes, optionReply } from './replies.js';

export interface ExportTable {
  /** The export for a client's name; "" is the default export. */
  find(name: string): NbdExport | undefined;
  list(): readonly NbdExport[];
}

export interface Negotiated {
  readonly export: NbdExport;
  /** NBD_OPT_STRUCTURED_REPLY was acknowledged. */
  readonly structured: boolean;
  /** The transmission flags the client was given. */
  readonly flags: number;
  /** base:allocation was selected with NBD_OPT_SET_META_CONTEXT for this export: NBD_CMD_BLOCK_STATUS answers. */
  readonly allocation: boolean;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Option data that does not parse; answered with NBD_REP_ERR_INVALID. */
class InvalidOption extends Error {}

function decodeString(bytes: Buffer, what: string): string {
  if (bytes.length > MAX_STRING) throw new InvalidOption(`${what} is longer than ${MAX_STRING} bytes`);
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new InvalidOption(`${what} is not valid UTF-8`);
  }
  // proto.md "Conventions": strings MUST NOT contain NUL.
  if (text.includes('\0')) throw new InvalidOption(`${what} contains a NUL character`);
  return text;
}

/** NBD_OPT_INFO / NBD_OPT_GO data: u32 name length, name, u16 n, n × u16 info requests. */
function parseInfoRequest(data: Buffer): { name: string; requests: number[] } {
  if (data.length < 6) throw new InvalidOption(`option data of ${data.length} bytes is too short`);
  const nameLength = data.readUInt32BE(0);
  if (nameLength > data.length - 6) {
    throw new InvalidOption(`name length ${nameLength} overruns option data of ${data.length} bytes`);
  }
  const name = decodeString(data.subarray(4, 4 + nameLength), 'export name');
  const count = data.readUInt16BE(4 + nameLength);
  if (data.length !== 6 + nameLength + 2 * count) {
    throw new InvalidOption(`${count} information requests do not fill option data of ${data.length} bytes`);
  }
  const requests: number[] = [];
  for (let i = 0; i < count; i++) requests.push(data.readUInt16BE(6 + nameLength + 2 * i));
  return { name, requests };
}

/** NBD_OPT_LIST/SET_META_CONTEXT data: u32 name length, name, u32 n, n × (u32 length, query). */
function parseMetaContextRequest(data: Buffer): { name: string; queries: string[] } {
  if (data.length < 8) throw new InvalidOption(`option data of ${data.length} bytes is too short`);
  const nameLength = data.readUInt32BE(0);
  if (nameLength > data.length - 8) throw new InvalidOption(`name length ${nameLength} overruns option data of ${data.length} bytes`);
  const name = decodeString(data.subarray(4, 4 + nameLength), 'export name');
  const count = data.readUInt32BE(4 + nameLength);
  const queries: string[] = [];
  let at = 8 + nameLength;
  for (let i = 0; i < count; i++) {
    if (at + 4 > data.length) throw new InvalidOption(`${count} queries overrun option data of ${data.length} bytes`);
    const len = data.readUInt32BE(at);
    if (at + 4 + len > data.length) throw new InvalidOption(`query ${i} of ${len} bytes overruns option data of ${data.length} bytes`);
    queries.push(decodeString(data.subarray(at + 4, at + 4 + len), 'metadata context query'));
    at += 4 + len;
  }
  if (at !== data.length) throw new InvalidOption(`${data.length - at} bytes after the last query`);
  return { name, queries };
}

/**
 * Whether a query names base:allocation. LIST also takes a namespace alone
 * ("base:") and no queries at all (everything offered); SET selects only
 * full names (proto.md "Metadata querying").
 */
function wantsAllocation(queries: readonly string[], listing: boolean): boolean {
  if (listing && queries.length === 0) return true;
  return queries.some((q) => q === BASE_ALLOCATION || (listing && q === 'base:'));
}

function metaContextEntry(id: number, name: string): Buffer {
  const text = Buffer.from(name, 'utf8');
  const buf = Buffer.alloc(4 + text.length);
  buf.writeUInt32BE(id, 0);
  text.copy(buf, 4);
  return buf;
}

function infoExport(exp: NbdExport, flags: number): Buffer {
  const buf = Buffer.alloc(12);
  buf.writeUInt16BE(Info.EXPORT, 0);
  buf.writeBigUInt64BE(BigInt(exp.device.size), 2);
  buf.writeUInt16BE(flags, 10);
  return buf;
}

function infoBlockSize(exp: NbdExport): Buffer {
  const buf = Buffer.alloc(14);
  buf.writeUInt16BE(Info.BLOCK_SIZE, 0);
  buf.writeUInt32BE(exp.minBlock, 2);
  buf.writeUInt32BE(exp.preferredBlock, 6);
  buf.writeUInt32BE(exp.maxPayload, 10);
  return buf;
}

function infoName(exp: NbdExport): Buffer {
  const name = Buffer.from(exp.name, 'utf8');
  const buf = Buffer.alloc(2 + name.length);
  buf.writeUInt16BE(Info.NAME, 0);
  name.copy(buf, 2);
  return buf;
}

function serverEntry(exp: NbdExport): Buffer {
  const name = Buffer.from(exp.name, 'utf8');
  const buf = Buffer.alloc(4 + name.length);
  buf.writeUInt32BE(name.length, 0);
  name.copy(buf, 4);
  return buf;
}

function drained(socket: Socket): Promise<void> {
  if (!socket.writableNeedDrain) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.on('drain', done);
    socket.on('close', done);
  });
}

export type HandshakeLog = (level: 'warn' | 'info' | 'debug', msg: string) => void;

/**
 * Runs option haggling on a fresh connection. Resolves with the chosen export
 * once transmission begins, or null when the client aborted or asked for an
 * export that NBD_OPT_EXPORT_NAME cannot refuse politely (the caller then
 * closes). Throws ProtocolViolation for a client that breaks a MUST, and
 * StreamClosed if the connection goes away.
 */
export async function negotiate(
  socket: Socket,
  reader: ByteReader,
  exports: ExportTable,
  log: HandshakeLog,
): Promise<Negotiated | null> {
  const send = (buf: Buffer): void => {
    socket.write(buf);
  };
  const reply = (option: number, type: number, data?: Buffer): void => send(optionReply(option, type, data));
  const refuse = (option: number, type: number, message: string): void =>
    reply(option, type, messageBytes(message));

  send(greeting(HandshakeFlag.FIXED_NEWSTYLE | HandshakeFlag.NO_ZEROES));
  const clientFlags = (await reader.read(4)).readUInt32BE(0);
  // proto.md "Client flags": the server MUST drop a client that sets an unknown flag.
  const unknownFlags = clientFlags & ~(ClientFlag.FIXED_NEWSTYLE | ClientFlag.NO_ZEROES);
  if (unknownFlags !== 0) {
    throw new ProtocolViolation(
      `client flags 0x${clientFlags.toString(16)} include unknown bits 0x${unknownFlags.toString(16)}`,
    );
  }
  const noZeroes = (clientFlags & ClientFlag.NO_ZEROES) !== 0;
  let structured = false;
  /** The export whose base:allocation the last NBD_OPT_SET_META_CONTEXT selected, if any. */
  let allocationFor: NbdExport | null = null;
  const allocation = (exp: NbdExport): boolean => allocationFor === exp;

  for (;;) {
    // A client that keeps sending options without reading the replies (it
    // MUST wait for each final reply) is not read from until they drain.
    await drained(socket);
    const head = await reader.read(OPTION_HEADER_SIZE);
    const magic = head.readBigUInt64BE(0);
    if (magic !== IHAVEOPT) throw new ProtocolViolation(`bad option magic 0x${magic.toString(16)}`);
    const option = head.readUInt32BE(8);
    const length = head.readUInt32BE(12);
    if (length > MAX_OPTION_DATA) {
      // NBD_OPT_EXPORT_NAME cannot be answered with an error, only dropped.
      if (option === Option.EXPORT_NAME) {
        throw new ProtocolViolation(`NBD_OPT_EXPORT_NAME with ${length} bytes of name`);
      }
      await reader.skip(length);
      refuse(option, OptionReply.ERR_TOO_BIG, `option data of ${length} bytes exceeds ${MAX_OPTION_DATA}`);
      continue;
    }
    const data = length > 0 ? await reader.read(length) : Buffer.alloc(0);

    try {
      switch (option) {
        case Option.EXPORT_NAME: {
          const name = decodeString(data, 'export name');
          const exp = exports.find(name);
          if (exp === undefined) {
            // proto.md: an export it will not serve MUST end the session.
            log('warn', `client asked for unknown export "${name}" with NBD_OPT_EXPORT_NAME; closing`);
            return null;
          }
          const flags = transmissionFlags(exp, structured);
          const out = Buffer.alloc(noZeroes ? 10 : 10 + 124);
          out.writeBigUInt64BE(BigInt(exp.device.size), 0);
          out.writeUInt16BE(flags, 8);
          send(out);
          return { export: exp, structured, flags, allocation: allocation(exp) };
        }
        case Option.ABORT:
          // proto.md: any data is ignored, and the reply is NBD_REP_ACK.
          reply(option, OptionReply.ACK);
          return null;
        case Option.LIST:
          if (length !== 0) throw new InvalidOption('NBD_OPT_LIST takes no data');
          for (const exp of exports.list()) reply(option, OptionReply.SERVER, serverEntry(exp));
          reply(option, OptionReply.ACK);
          break;
        case Option.INFO:
        case Option.GO: {
          const { name, requests } = parseInfoRequest(data);
          const exp = exports.find(name);
          if (exp === undefined) {
            refuse(option, OptionReply.ERR_UNKNOWN, `no export named "${name}"`);
            break;
          }
          const flags = transmissionFlags(exp, structured);
          reply(option, OptionReply.INFO, infoExport(exp, flags));
          // Sent even when not requested (proto.md allows it) because the
          // constraints are not the defaults; requests that break them are
          // still answered cleanly with EINVAL.
          reply(option, OptionReply.INFO, infoBlockSize(exp));
          if (requests.includes(Info.NAME)) reply(option, OptionReply.INFO, infoName(exp));
          reply(option, OptionReply.ACK);
          if (option === Option.GO) return { export: exp, structured, flags, allocation: allocation(exp) };
          break;
        }
        case Option.STRUCTURED_REPLY:
          if (length !== 0) throw new InvalidOption('NBD_OPT_STRUCTURED_REPLY takes no data');
          structured = true;
          reply(option, OptionReply.ACK);
          break;
        case Option.LIST_META_CONTEXT:
        case Option.SET_META_CONTEXT: {
          const listing = option === Option.LIST_META_CONTEXT;
          // proto.md NBD_OPT_SET_META_CONTEXT: only after structured replies were negotiated.
          if (!listing && !structured) throw new InvalidOption('NBD_OPT_SET_META_CONTEXT needs NBD_OPT_STRUCTURED_REPLY first');
          const { name, queries } = parseMetaContextRequest(data);
          const exp = exports.find(name);
          if (exp === undefined) {
            refuse(option, OptionReply.ERR_UNKNOWN, `no export named "${name}"`);
            break;
          }
          // Holes can be told only by a device that reports allocation (GET LBA STATUS on a volume).
          const offered = exp.device.lbaStatus !== undefined && wantsAllocation(queries, listing);
          // Each SET replaces the selection before it, an empty one included.
          if (!listing) allocationFor = offered ? exp : null;
          if (offered) reply(option, OptionReply.META_CONTEXT, metaContextEntry(listing ? 0 : BASE_ALLOCATION_ID, BASE_ALLOCATION));
          reply(option, OptionReply.ACK);
          break;
        }
        default:
          // Includes NBD_OPT_STARTTLS: this server runs in NOTLS mode.
          log('debug', `unsupported option ${option}`);
          refuse(option, OptionReply.ERR_UNSUP, `option ${option} is not supported`);
      }
    } catch (err) {
      if (!(err instanceof InvalidOption)) throw err;
      if (option === Option.EXPORT_NAME) throw new ProtocolViolation(`NBD_OPT_EXPORT_NAME: ${err.message}`);
      refuse(option, OptionReply.ERR_INVALID, err.message);
    }
  }
}
