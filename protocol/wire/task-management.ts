// TSK_MGMT and TSK_RSP (protocol.md "Task management"), after SRP_TSK_MGMT (SRP r16a 6.7).
// rblk answers with its own TSK_RSP rather than SRP's RSP-with-response-data.
//   TSK_MGMT: 16 LUN | 24 function u8 | 25-31 reserved | 32 task tag u64
//   (FENCE CONNECTION, version 3: LUN 0, and the task tag field holds the session id to fence)
//   (FENCE GATEWAY, version 4: the volume's LUN, and the task tag field holds the target port group, 1 to 65535)
//   TSK_RSP:  16 credit delta u32 | 20 response u8 | 21-23 reserved

import { CapsuleSize, Opcode, TaskFunction, TaskResponse, valueGuard } from './constants.js';
import { fail } from './errors.js';
import { checkCreditDelta, checkU64, exactLength, hex, readLun, requireFlags, requireZero, writeLun } from './fields.js';
import { PROTOCOL_LIMITS, readHeaderOf, writeHeader, type CapsuleHeader, type WireLimits } from './header.js';

export interface TaskManagement {
  op: typeof Opcode.TSK_MGMT;
  /** This request's own tag; it shares the tag space of CMDs. */
  tag: bigint;
  lun: number;
  function: TaskFunction;
  /** The CMD to abort, for ABORT_TASK; the session id to fence, for FENCE_CONNECTION; the target port group, for FENCE_GATEWAY; 0n for every other function. */
  taskTag: bigint;
}

export interface TaskManagementResponse {
  op: typeof Opcode.TSK_RSP;
  /** The TSK_MGMT's tag. */
  tag: bigint;
  creditDelta: number;
  response: TaskResponse;
}

const isTaskFunction = valueGuard(TaskFunction);
const takesTaskTag = (fn: number): boolean => fn === TaskFunction.ABORT_TASK || fn === TaskFunction.FENCE_CONNECTION || fn === TaskFunction.FENCE_GATEWAY;
/** SPC-4 7.8.6.7: a target port group is 1 to 65535 (0 is reserved). */
const isPortGroup = (tag: bigint): boolean => tag >= 1n && tag <= 0xffffn;
const isTaskResponse = valueGuard(TaskResponse);

export function encodeTaskManagement(buf: Buffer, tm: TaskManagement): number {
  if (!isTaskFunction(tm.function)) fail('BAD_FIELD', `TSK_MGMT: unknown function ${tm.function}`);
  checkU64(tm.taskTag, 'TSK_MGMT: task tag');
  if (!takesTaskTag(tm.function) && tm.taskTag !== 0n) {
    fail('BAD_FIELD', 'TSK_MGMT: a task tag is only for ABORT TASK, FENCE CONNECTION and FENCE GATEWAY');
  }
  if (tm.function === TaskFunction.FENCE_GATEWAY && !isPortGroup(tm.taskTag)) fail('BAD_FIELD', `TSK_MGMT: FENCE GATEWAY of target port group ${tm.taskTag}, not 1 to 65535`);
  if (tm.function === TaskFunction.FENCE_CONNECTION && tm.lun !== 0) fail('BAD_FIELD', 'TSK_MGMT: FENCE CONNECTION is sent to LUN 0');
  writeHeader(buf, Opcode.TSK_MGMT, 0, CapsuleSize.TSK_MGMT, tm.tag);
  writeLun(buf, 16, tm.lun, 'TSK_MGMT');
  buf[24] = tm.function;
  buf.fill(0, 25, 32);
  buf.writeBigUInt64BE(tm.taskTag, 32);
  return CapsuleSize.TSK_MGMT;
}

export function readTaskManagement(buf: Buffer, header: CapsuleHeader): TaskManagement {
  requireFlags(header.flags, 0, 'TSK_MGMT');
  exactLength(buf, CapsuleSize.TSK_MGMT, 'TSK_MGMT');
  const lun = readLun(buf, 16, 'TSK_MGMT');
  const fn = buf[24];
  if (!isTaskFunction(fn)) fail('BAD_FIELD', `TSK_MGMT: unknown function ${hex(fn)}`);
  requireZero(buf, 25, 32, 'TSK_MGMT');
  // Outside ABORT TASK, FENCE CONNECTION and FENCE GATEWAY the task tag field is reserved.
  if (!takesTaskTag(fn)) requireZero(buf, 32, 40, 'TSK_MGMT');
  if (fn === TaskFunction.FENCE_CONNECTION && lun !== 0) fail('BAD_FIELD', `TSK_MGMT: FENCE CONNECTION to LUN ${lun}, not 0`);
  const taskTag = buf.readBigUInt64BE(32);
  if (fn === TaskFunction.FENCE_GATEWAY && !isPortGroup(taskTag)) fail('BAD_FIELD', `TSK_MGMT: FENCE GATEWAY of target port group ${taskTag}, not 1 to 65535`);
  return { op: Opcode.TSK_MGMT, tag: header.tag, lun, function: fn, taskTag };
}

export function decodeTaskManagement(buf: Buffer, limits: WireLimits = PROTOCOL_LIMITS): TaskManagement {
  return readTaskManagement(buf, readHeaderOf(buf, Opcode.TSK_MGMT, limits));
}

export function encodeTaskManagementResponse(buf: Buffer, rsp: TaskManagementResponse): number {
  checkCreditDelta(rsp.creditDelta, 'TSK_RSP');
  if (!isTaskResponse(rsp.response)) fail('BAD_FIELD', `TSK_RSP: unknown response ${rsp.response}`);
  writeHeader(buf, Opcode.TSK_RSP, 0, CapsuleSize.TSK_RSP, rsp.tag);
  buf.writeUInt32BE(rsp.creditDelta, 16);
  buf[20] = rsp.response;
  buf.fill(0, 21, 24);
  return CapsuleSize.TSK_RSP;
}

export function readTaskManagementResponse(buf: Buffer, header: CapsuleHeader): TaskManagementResponse {
  requireFlags(header.flags, 0, 'TSK_RSP');
  exactLength(buf, CapsuleSize.TSK_RSP, 'TSK_RSP');
  const creditDelta = buf.readUInt32BE(16);
  checkCreditDelta(creditDelta, 'TSK_RSP');
  const response = buf[20];
  if (!isTaskResponse(response)) fail('BAD_FIELD', `TSK_RSP: unknown response ${hex(response)}`);
  requireZero(buf, 21, 24, 'TSK_RSP');
  return { op: Opcode.TSK_RSP, tag: header.tag, creditDelta, response };
}

export function decodeTaskManagementResponse(buf: Buffer, limits: WireLimits = PROTOCOL_LIMITS): TaskManagementResponse {
  return readTaskManagementResponse(buf, readHeaderOf(buf, Opcode.TSK_RSP, limits));
}
