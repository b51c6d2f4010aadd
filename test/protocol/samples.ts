// One valid example of every capsule and connect-data kind, shared by the protocol tests.

import {
  ConnectKind,
  ConnectRejectReason,
  DataDirection,
  DataFormat,
  LoginRejectReason,
  LogoutReason,
  Opcode,
  TaskAttribute,
  TaskFunction,
  TaskResponse,
  type Capsule,
  type ConnectData,
} from '../../protocol/wire/index.js';

/** READ(10) of 8 blocks at LBA 16 (SBC-4 5.12), zero-padded to 16 bytes. */
export const cdb = (): Buffer => Buffer.from('28000000001000000800000000000000', 'hex');

/** Fixed-format sense: ILLEGAL REQUEST, LBA OUT OF RANGE (SPC-5 4.4.3). */
export const sense = (): Buffer => Buffer.from('700005000000000a00000000210000000000', 'hex');

const bytes = (length: number, seed: number): Buffer => Buffer.from(Array.from({ length }, (_, i) => (seed + i * 7) & 0xff));

export function sampleCapsules(): Capsule[] {
  return [
    {
      op: Opcode.LOGIN_REQ,
      tag: 1n,
      authRequired: true,
      maxItCapsule: 8192,
      maxTiCapsule: 1024,
      immediateDataSize: 4096,
      credits: 64,
      initiatorName: 'iqn.2025-01.org.example:host-ä',
      targetName: 'iqn.2025-01.org.example:vol0',
    },
    { op: Opcode.LOGIN_CHALLENGE, tag: 1n, targetNonce: bytes(32, 1) },
    { op: Opcode.LOGIN_AUTH, tag: 1n, initiatorNonce: bytes(32, 2), initiatorProof: bytes(32, 3) },
    {
      op: Opcode.LOGIN_RSP,
      tag: 1n,
      sessionId: 0x0123456789abcdefn,
      maxItCapsule: 8192,
      maxTiCapsule: 1024,
      immediateDataSize: 4096,
      maxTransfer: 1 << 20,
      credits: 32,
      maxDescriptors: 16,
      keepAliveMs: 5000,
      targetProof: bytes(32, 4),
    },
    {
      op: Opcode.LOGIN_RSP,
      tag: 2n,
      sessionId: 7n,
      maxItCapsule: 512,
      maxTiCapsule: 512,
      immediateDataSize: 0,
      maxTransfer: 4096,
      credits: 1,
      maxDescriptors: 1,
      keepAliveMs: 0,
      targetProof: null,
    },
    { op: Opcode.LOGIN_REJ, tag: 1n, reason: LoginRejectReason.CAPSULE_TOO_LARGE, maxItCapsule: 4096 },
    {
      op: Opcode.CMD,
      tag: 0xfedcba9876543210n,
      lun: 3,
      taskAttribute: TaskAttribute.SIMPLE,
      direction: DataDirection.READ,
      cdb: cdb(),
      data: { format: DataFormat.DIRECT, descriptor: { address: 0x10000n, key: 0xdeadbeefcafef00dn, length: 4096 } },
    },
    {
      op: Opcode.CMD,
      tag: 5n,
      lun: 300,
      taskAttribute: TaskAttribute.ORDERED,
      direction: DataDirection.WRITE,
      cdb: cdb(),
      data: {
        format: DataFormat.LIST,
        descriptors: [
          { address: 0n, key: 1n, length: 512 },
          { address: 0xffffffffffff0000n, key: 2n, length: 0x10000 },
          { address: 4096n, key: 3n, length: 1 },
        ],
      },
    },
    {
      op: Opcode.CMD,
      tag: 6n,
      lun: 0,
      taskAttribute: TaskAttribute.HEAD_OF_QUEUE,
      direction: DataDirection.WRITE,
      cdb: cdb(),
      data: { format: DataFormat.IMMEDIATE, data: bytes(1000, 9) },
    },
    {
      op: Opcode.CMD,
      tag: 7n,
      lun: 16383,
      taskAttribute: TaskAttribute.ACA,
      direction: DataDirection.NONE,
      cdb: Buffer.alloc(16),
      data: { format: DataFormat.NONE },
    },
    {
      op: Opcode.RSP,
      tag: 0xfedcba9876543210n,
      creditDelta: 1,
      status: 0x02,
      sense: sense(),
      dataOutResidual: null,
      dataInResidual: { kind: 'under', count: 4096 },
    },
    {
      op: Opcode.RSP,
      tag: 5n,
      creditDelta: 0,
      status: 0x00,
      sense: Buffer.alloc(0),
      dataOutResidual: { kind: 'over', count: 512 },
      dataInResidual: null,
    },
    { op: Opcode.TSK_MGMT, tag: 9n, lun: 3, function: TaskFunction.ABORT_TASK, taskTag: 5n },
    { op: Opcode.TSK_MGMT, tag: 10n, lun: 3, function: TaskFunction.LUN_RESET, taskTag: 0n },
    { op: Opcode.TSK_RSP, tag: 9n, creditDelta: 1, response: TaskResponse.COMPLETE },
    { op: Opcode.I_LOGOUT, tag: 11n },
    { op: Opcode.KEEPALIVE, tag: 12n },
    { op: Opcode.KEEPALIVE_RSP, tag: 12n },
    { op: Opcode.CRED_RSP, tag: 13n },
    { op: Opcode.T_LOGOUT, tag: 14n, reason: LogoutReason.CREDIT_OVERRUN },
    { op: Opcode.CRED_REQ, tag: 13n, creditDelta: 8 },
    // Versions 3 and 4: rejects.test.ts takes the samples above by position, so these come last.
    { op: Opcode.TSK_MGMT, tag: 15n, lun: 0, function: TaskFunction.FENCE_CONNECTION, taskTag: 0x1_0000_0002n },
    { op: Opcode.TSK_MGMT, tag: 16n, lun: 3, function: TaskFunction.FENCE_GATEWAY, taskTag: 2n },
  ];
}

export function sampleConnectData(): ConnectData[] {
  return [
    { kind: ConnectKind.CONNECT, version: 1, maxCapsule: 8192, queueDepth: 128 },
    { kind: ConnectKind.ACCEPT, version: 1, maxCapsule: 4096, recvBuffers: 35 },
    { kind: ConnectKind.REJECT, version: 1, reason: ConnectRejectReason.NO_RESOURCES },
    { kind: ConnectKind.CONNECT, version: 2, maxCapsule: 1024, queueDepth: 32 },
    { kind: ConnectKind.ACCEPT, version: 2, maxCapsule: 8240, recvBuffers: 35 },
  ];
}
