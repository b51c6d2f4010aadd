// CMD: one SCSI command and where its data is (protocol.md "CMD"). Modelled on SRP_CMD
// (SRP r16a 6.5) with 64-bit keys, one data direction per command, and the total transfer
// length stated once so that it can be checked against the descriptors.
//   16 LUN | 24 task attribute | 25 direction | 26 format | 27 descriptor count
//   28 data length u32 | 32 CDB (16) | 48 descriptors (24 each) or immediate data

import {
  CapsuleSize,
  CDB_SIZE,
  CmdField,
  DataDirection,
  DataFormat,
  DESCRIPTOR_SIZE,
  MAX_DESCRIPTORS,
  Opcode,
  TaskAttribute,
  valueGuard,
} from './constants.js';
import { fail } from './errors.js';
import {
  checkBytes,
  checkRange,
  exactLength,
  readDescriptor,
  readLun,
  requireFlags,
  writeDescriptor,
  writeLun,
  U32_MAX,
  type DataDescriptor,
} from './fields.js';
import { PROTOCOL_LIMITS, readHeaderOf, writeHeader, type CapsuleHeader, type WireLimits } from './header.js';

export type CommandData =
  | { format: typeof DataFormat.NONE }
  /** One region of initiator memory. */
  | { format: typeof DataFormat.DIRECT; descriptor: DataDescriptor }
  /** Scatter-gather: the regions in order, all carried in the capsule. */
  | { format: typeof DataFormat.LIST; descriptors: DataDescriptor[] }
  /** Write data carried in the capsule itself, up to the negotiated immediate data size. */
  | { format: typeof DataFormat.IMMEDIATE; data: Buffer };

export interface CommandCapsule {
  op: typeof Opcode.CMD;
  tag: bigint;
  lun: number;
  taskAttribute: TaskAttribute;
  direction: DataDirection;
  /** 16 bytes; shorter CDBs are zero-padded. */
  cdb: Buffer;
  data: CommandData;
}

const isTaskAttribute = valueGuard(TaskAttribute);
const isDataDirection = valueGuard(DataDirection);
const isDataFormat = valueGuard(DataFormat);

/** Total bytes the command moves: the data length field of the capsule. */
export function transferLength(data: CommandData): number {
  switch (data.format) {
    case DataFormat.NONE:
      return 0;
    case DataFormat.DIRECT:
      return data.descriptor.length;
    case DataFormat.LIST: {
      let total = 0;
      for (const d of data.descriptors) total += d.length;
      return total;
    }
    case DataFormat.IMMEDIATE:
      return data.data.length;
  }
}

function descriptorCount(data: CommandData): number {
  switch (data.format) {
    case DataFormat.DIRECT:
      return 1;
    case DataFormat.LIST:
      return data.descriptors.length;
    default:
      return 0;
  }
}

export function commandLength(cmd: CommandCapsule): number {
  if (cmd.data.format === DataFormat.IMMEDIATE) return CapsuleSize.CMD_FIXED + cmd.data.data.length;
  return CapsuleSize.CMD_FIXED + DESCRIPTOR_SIZE * descriptorCount(cmd.data);
}

/** Direction NONE goes with format NONE only, and only writes carry immediate data. */
function checkDirectionFormat(direction: number, format: number): void {
  const none = direction === DataDirection.NONE;
  if (none !== (format === DataFormat.NONE)) fail('BAD_FIELD', `CMD: direction ${direction} does not go with data format ${format}`);
  if (format === DataFormat.IMMEDIATE && direction !== DataDirection.WRITE) {
    fail('BAD_FIELD', 'CMD: immediate data is only for writes');
  }
}

export function encodeCommand(buf: Buffer, cmd: CommandCapsule): number {
  if (!isTaskAttribute(cmd.taskAttribute)) fail('BAD_FIELD', `CMD: unknown task attribute ${cmd.taskAttribute}`);
  if (!isDataDirection(cmd.direction)) fail('BAD_FIELD', `CMD: unknown data direction ${cmd.direction}`);
  if (!isDataFormat(cmd.data.format)) fail('BAD_FIELD', 'CMD: unknown data format');
  checkDirectionFormat(cmd.direction, cmd.data.format);
  checkBytes(cmd.cdb, CDB_SIZE, 'CMD: CDB');
  const count = descriptorCount(cmd.data);
  if (cmd.data.format === DataFormat.LIST) checkRange(count, 1, MAX_DESCRIPTORS, 'CMD: descriptor count', 'BAD_DESCRIPTOR_COUNT');
  if (cmd.data.format === DataFormat.IMMEDIATE) checkRange(cmd.data.data.length, 1, U32_MAX, 'CMD: immediate data length', 'OVERSIZE');
  const dataLength = transferLength(cmd.data);
  checkRange(dataLength, 0, U32_MAX, 'CMD: data length', 'OVERSIZE');
  const length = commandLength(cmd);
  writeHeader(buf, Opcode.CMD, 0, length, cmd.tag);
  writeLun(buf, CmdField.LUN, cmd.lun, 'CMD');
  buf[CmdField.TASK_ATTRIBUTE] = cmd.taskAttribute;
  buf[CmdField.DIRECTION] = cmd.direction;
  buf[CmdField.FORMAT] = cmd.data.format;
  buf[CmdField.DESCRIPTOR_COUNT] = count;
  buf.writeUInt32BE(dataLength, CmdField.DATA_LENGTH);
  cmd.cdb.copy(buf, CmdField.CDB);
  switch (cmd.data.format) {
    case DataFormat.DIRECT:
      writeDescriptor(buf, CapsuleSize.CMD_FIXED, cmd.data.descriptor, 'CMD: descriptor');
      break;
    case DataFormat.LIST:
      cmd.data.descriptors.forEach((d, i) => writeDescriptor(buf, CapsuleSize.CMD_FIXED + i * DESCRIPTOR_SIZE, d, `CMD: descriptor ${i}`));
      break;
    case DataFormat.IMMEDIATE:
      cmd.data.data.copy(buf, CapsuleSize.CMD_FIXED);
      break;
    case DataFormat.NONE:
      break;
  }
  return length;
}

function readData(buf: Buffer, format: DataFormat, count: number, dataLength: number, limits: WireLimits): CommandData {
  const start = CapsuleSize.CMD_FIXED;
  switch (format) {
    case DataFormat.NONE:
      if (count !== 0) fail('BAD_DESCRIPTOR_COUNT', `CMD: ${count} descriptors with no data`);
      if (dataLength !== 0) fail('LENGTH_MISMATCH', `CMD: data length ${dataLength} with no data`);
      exactLength(buf, start, 'CMD');
      return { format };
    case DataFormat.DIRECT: {
      if (count !== 1) fail('BAD_DESCRIPTOR_COUNT', `CMD: a direct descriptor needs count 1, got ${count}`);
      exactLength(buf, start + DESCRIPTOR_SIZE, 'CMD with a direct descriptor');
      const descriptor = readDescriptor(buf, start, 'CMD: descriptor');
      if (descriptor.length !== dataLength) {
        fail('LENGTH_MISMATCH', `CMD: descriptor length ${descriptor.length} differs from data length ${dataLength}`);
      }
      return { format, descriptor };
    }
    case DataFormat.LIST: {
      if (count === 0 || count > limits.maxDescriptors) {
        fail('BAD_DESCRIPTOR_COUNT', `CMD: descriptor count ${count}, allowed 1 to ${limits.maxDescriptors}`);
      }
      // count is a u8, so the expected length is small and exact; nothing here can wrap.
      exactLength(buf, start + count * DESCRIPTOR_SIZE, `CMD with ${count} descriptors`);
      const descriptors: DataDescriptor[] = new Array<DataDescriptor>(count);
      let total = 0;
      for (let i = 0; i < count; i++) {
        descriptors[i] = readDescriptor(buf, start + i * DESCRIPTOR_SIZE, `CMD: descriptor ${i}`);
        total += descriptors[i].length;
      }
      if (total !== dataLength) fail('LENGTH_MISMATCH', `CMD: descriptors add up to ${total} bytes, data length is ${dataLength}`);
      return { format, descriptors };
    }
    case DataFormat.IMMEDIATE:
      if (count !== 0) fail('BAD_DESCRIPTOR_COUNT', `CMD: ${count} descriptors with immediate data`);
      if (dataLength === 0) fail('LENGTH_MISMATCH', 'CMD: immediate data of length 0');
      if (dataLength > limits.maxImmediate) {
        fail('OVERSIZE', `CMD: immediate data is ${dataLength} bytes, the limit is ${limits.maxImmediate}`);
      }
      exactLength(buf, start + dataLength, 'CMD with immediate data');
      return { format, data: buf.subarray(start, start + dataLength) };
  }
}

export function readCommand(buf: Buffer, header: CapsuleHeader, limits: WireLimits): CommandCapsule {
  requireFlags(header.flags, 0, 'CMD');
  if (buf.length < CapsuleSize.CMD_FIXED) fail('TRUNCATED', `CMD needs at least ${CapsuleSize.CMD_FIXED} bytes, got ${buf.length}`);
  const lun = readLun(buf, CmdField.LUN, 'CMD');
  const taskAttribute = buf[CmdField.TASK_ATTRIBUTE];
  if (!isTaskAttribute(taskAttribute)) fail('BAD_FIELD', `CMD: unknown task attribute ${taskAttribute}`);
  const direction = buf[CmdField.DIRECTION];
  if (!isDataDirection(direction)) fail('BAD_FIELD', `CMD: unknown data direction ${direction}`);
  const format = buf[CmdField.FORMAT];
  if (!isDataFormat(format)) fail('BAD_FIELD', `CMD: unknown data format ${format}`);
  checkDirectionFormat(direction, format);
  const dataLength = buf.readUInt32BE(CmdField.DATA_LENGTH);
  if (dataLength > limits.maxTransfer) fail('OVERSIZE', `CMD: data length ${dataLength} exceeds the limit ${limits.maxTransfer}`);
  const data = readData(buf, format, buf[CmdField.DESCRIPTOR_COUNT], dataLength, limits);
  return { op: Opcode.CMD, tag: header.tag, lun, taskAttribute, direction, cdb: buf.subarray(CmdField.CDB, CmdField.CDB + CDB_SIZE), data };
}

export function decodeCommand(buf: Buffer, limits: WireLimits = PROTOCOL_LIMITS): CommandCapsule {
  return readCommand(buf, readHeaderOf(buf, Opcode.CMD, limits), limits);
}
