import test, { type ExecutionContext } from 'ava';
import {
  capsuleBuffer,
  checkLoginGrant,
  connectDataBuffer,
  ConnectKind,
  decodeCapsule,
  decodeCommand,
  decodeConnectData,
  encodeCapsule,
  Opcode,
  PROTOCOL_LIMITS,
  ProtocolError,
  sessionLimits,
  TaskFunction,
  DataFormat,
  type Capsule,
  type CommandCapsule,
  type ConnectData,
  type CreditRequest,
  type DecodeOptions,
  type LoginRequest,
  type LoginResponse,
  type ProtocolErrorReason,
  type ResponseCapsule,
  type TaskManagement,
} from '../../protocol/wire/index.js';
import { sampleCapsules, sampleConnectData } from './samples.js';

const S = sampleCapsules();
const loginReq = S[0] as LoginRequest;
const challenge = S[1];
const loginRsp = S[3] as LoginResponse;
const unauthRsp = S[4];
const reject = S[5];
const [directCmd, listCmd, immediateCmd, noDataCmd] = S.slice(6, 10) as CommandCapsule[];
const [senseRsp, plainRsp] = S.slice(10, 12) as ResponseCapsule[];
const [abortTask, lunReset] = S.slice(12, 14) as TaskManagement[];
const tskRsp = S[14];
const keepAlive = S[16];
const tLogout = S[19];
const credReq = S[20] as CreditRequest;

/** A fresh encoding of `capsule`, changed by `edit`; the header's length field is kept equal to the new size. */
function mutated(capsule: Capsule, edit: (buf: Buffer) => Buffer | void, fixLength = true): Buffer {
  const buf = capsuleBuffer(capsule);
  const out = edit(buf) ?? buf;
  if (fixLength && out.length >= 8) out.writeUInt32BE(out.length, 4);
  return out;
}

function rejects(
  t: ExecutionContext,
  buf: Buffer,
  reason: ProtocolErrorReason,
  options: DecodeOptions = {},
  message?: string,
): void {
  const err = t.throws(() => decodeCapsule(buf, options), { instanceOf: ProtocolError });
  t.is(err?.reason, reason, err?.message);
  if (message !== undefined) t.is(err?.message, message);
}

function connectRejects(t: ExecutionContext, buf: Buffer, reason: ProtocolErrorReason, message?: string): void {
  const err = t.throws(() => decodeConnectData(buf), { instanceOf: ProtocolError });
  t.is(err?.reason, reason, err?.message);
  if (message !== undefined) t.is(err?.message, message);
}

test('header: truncated, wrong version, unknown opcode, wrong sender', (t) => {
  rejects(t, Buffer.alloc(0), 'TRUNCATED', {}, 'capsule is 0 bytes, shorter than the 16-byte header');
  rejects(t, capsuleBuffer(keepAlive).subarray(0, 15), 'TRUNCATED');
  rejects(t, mutated(keepAlive, (b) => void (b[1] = 2)), 'BAD_VERSION', {}, 'capsule version is 2, expected 1');
  rejects(t, mutated(keepAlive, (b) => void (b[1] = 0)), 'BAD_VERSION');
  rejects(t, mutated(keepAlive, (b) => void (b[0] = 0x06)), 'BAD_OPCODE', {}, 'unknown opcode 0x06');
  rejects(t, mutated(keepAlive, (b) => void (b[0] = 0x82)), 'BAD_OPCODE');
  rejects(t, capsuleBuffer(senseRsp), 'BAD_OPCODE', { from: 'initiator' }, 'RSP is not sent by the initiator');
  rejects(t, capsuleBuffer(directCmd), 'BAD_OPCODE', { from: 'target' }, 'CMD is not sent by the target');
  const err = t.throws(() => decodeCommand(capsuleBuffer(senseRsp)), { instanceOf: ProtocolError });
  t.is(err?.reason, 'BAD_OPCODE');
  t.is(err?.message, 'expected CMD, got RSP');
});

test('header: the length field must equal the bytes received', (t) => {
  const longer = Buffer.concat([capsuleBuffer(keepAlive), Buffer.alloc(1)]);
  rejects(t, longer, 'LENGTH_MISMATCH', {}, 'KEEPALIVE: length field says 16 bytes, got 17');
  rejects(t, mutated(keepAlive, (b) => void b.writeUInt32BE(17, 4), false), 'TRUNCATED');
  rejects(t, mutated(keepAlive, (b) => void b.writeUInt32BE(0xffffffff, 4), false), 'TRUNCATED');
  // A consistent length field does not make extra bytes acceptable.
  rejects(t, mutated(keepAlive, (b) => Buffer.concat([b, Buffer.alloc(1)])), 'LENGTH_MISMATCH', {}, 'KEEPALIVE is 16 bytes, got 17');
  rejects(t, mutated(tLogout, (b) => b.subarray(0, 20)), 'TRUNCATED', {}, 'T_LOGOUT needs 24 bytes, got 20');
});

test('header: capsules over the receiver limit and reserved flag bits', (t) => {
  const limits = sessionLimits(loginRsp, 'target');
  rejects(t, capsuleBuffer(immediateCmd), 'OVERSIZE', { limits: { ...limits, maxCapsule: 1000 } }, 'capsule is 1048 bytes, the limit is 1000');
  rejects(t, Buffer.alloc(PROTOCOL_LIMITS.maxCapsule + 1), 'OVERSIZE');
  rejects(t, mutated(directCmd, (b) => void b.writeUInt16BE(1, 2)), 'RESERVED_NONZERO', {}, 'CMD: flags 0x0001 set reserved bits 0x0001');
  rejects(t, mutated(senseRsp, (b) => void (b[3] |= 0x40)), 'RESERVED_NONZERO');
  rejects(t, mutated(loginReq, (b) => void (b[3] |= 0x02)), 'RESERVED_NONZERO');
});

test('LOGIN_REQ: names are bounded, well-formed and printable', (t) => {
  const withNames = (initiator: Buffer, target: Buffer): Buffer =>
    mutated(loginReq, (b) => {
      const out = Buffer.concat([b.subarray(0, 32), initiator, target]);
      out[30] = initiator.length & 0xff;
      out[31] = target.length & 0xff;
      return out;
    });
  const ok = Buffer.from('iqn.x:y');
  t.is((decodeCapsule(withNames(ok, ok)) as LoginRequest).targetName, 'iqn.x:y');
  rejects(t, withNames(Buffer.alloc(0), ok), 'BAD_NAME', {}, 'LOGIN_REQ: initiator name is empty');
  rejects(t, withNames(ok, Buffer.alloc(224, 0x61)), 'BAD_NAME', {}, 'LOGIN_REQ: target name is 224 bytes, the limit is 223');
  t.notThrows(() => decodeCapsule(withNames(ok, Buffer.alloc(223, 0x61))));
  rejects(t, withNames(Buffer.from([0x61, 0xff]), ok), 'BAD_NAME', {}, 'LOGIN_REQ: initiator name is not valid UTF-8');
  rejects(t, withNames(Buffer.from([0x61, 0xed, 0xa0, 0x80]), ok), 'BAD_NAME'); // an encoded surrogate
  rejects(t, withNames(Buffer.from('a b'), ok), 'BAD_NAME', {}, 'LOGIN_REQ: initiator name contains a control, format or space character');
  rejects(t, withNames(Buffer.from('a\u0000'), ok), 'BAD_NAME');
  rejects(t, withNames(Buffer.from('\ufeffa'), ok), 'BAD_NAME');
  rejects(t, withNames(ok, Buffer.from('a\u202eb')), 'BAD_NAME');
  for (const name of ['', 'a'.repeat(224), 'a\ud800', 'tab\there']) {
    const err = t.throws(() => capsuleBuffer({ ...loginReq, initiatorName: name }), { instanceOf: ProtocolError });
    t.is(err?.reason, 'BAD_NAME');
  }
});

test('LOGIN_REQ: name lengths must match the capsule, parameters must be in range', (t) => {
  rejects(t, mutated(loginReq, (b) => void b[31]++), 'TRUNCATED');
  rejects(t, mutated(loginReq, (b) => void b[31]--), 'LENGTH_MISMATCH');
  rejects(t, mutated(loginReq, (b) => b.subarray(0, 31)), 'TRUNCATED', {}, 'LOGIN_REQ needs at least 32 bytes, got 31');
  rejects(t, mutated(loginReq, (b) => void b.writeUInt16BE(0, 28)), 'BAD_FIELD', {}, 'LOGIN_REQ: credits is 0, allowed 1 to 4096');
  rejects(t, mutated(loginReq, (b) => void b.writeUInt16BE(4097, 28)), 'BAD_FIELD');
  rejects(t, mutated(loginReq, (b) => void b.writeUInt32BE(511, 16)), 'BAD_FIELD');
  rejects(t, mutated(loginReq, (b) => void b.writeUInt32BE((1 << 20) + 1, 20)), 'BAD_FIELD');
  rejects(t, mutated(loginReq, (b) => void b.writeUInt32BE(8192 - 47, 24)), 'BAD_FIELD', {}, 'LOGIN_REQ: immediate data size is 8145, allowed 0 to 8144');
});

test('LOGIN_RSP, LOGIN_REJ and LOGIN_CHALLENGE: fields and reserved bytes', (t) => {
  rejects(t, mutated(unauthRsp, (b) => void (b[79] = 1)), 'RESERVED_NONZERO', {}, 'LOGIN_RSP without AUTHENTICATED: reserved byte 79 is 0x01, must be 0');
  rejects(t, mutated(loginRsp, (b) => void b.writeUInt32BE(50, 44)), 'BAD_FIELD');
  rejects(t, mutated(loginRsp, (b) => void b.writeUInt16BE(0, 42)), 'BAD_FIELD');
  rejects(t, mutated(loginRsp, (b) => void b.writeUInt16BE(256, 42)), 'BAD_FIELD');
  rejects(t, mutated(loginRsp, (b) => void b.writeUInt32BE(0, 36)), 'BAD_FIELD');
  rejects(t, mutated(loginRsp, (b) => void b.writeUInt32BE(1000, 36)), 'BAD_FIELD', {}, 'LOGIN_RSP: immediate data size is 4096, allowed 0 to 1000');
  rejects(t, mutated(reject, (b) => void b.writeUInt32BE(0x00010005, 16)), 'BAD_FIELD', {}, 'LOGIN_REJ: unknown reason 0x00010005');
  rejects(t, mutated(reject, (b) => void b.writeUInt32BE(100, 20)), 'BAD_FIELD');
  rejects(t, mutated(challenge, (b) => void (b[16] = 2)), 'BAD_FIELD', {}, 'LOGIN_CHALLENGE: unknown authentication algorithm 2');
  rejects(t, mutated(challenge, (b) => void (b[20] = 1)), 'RESERVED_NONZERO');
  rejects(t, mutated(challenge, (b) => b.subarray(0, 55)), 'TRUNCATED');
});

test('checkLoginGrant: a target may lower what was asked for, never raise it', (t) => {
  const grant = { ...loginRsp, maxTiCapsule: 1024, credits: 32 };
  t.notThrows(() => checkLoginGrant(loginReq, grant));
  const cases: Array<[LoginResponse, string]> = [
    [{ ...grant, credits: 65 }, 'LOGIN_RSP: credits 65 exceeds the requested 64'],
    [{ ...grant, maxTiCapsule: 2048 }, 'LOGIN_RSP: max target-to-initiator capsule 2048 exceeds the requested 1024'],
    [{ ...grant, targetProof: null }, 'LOGIN_RSP: not authenticated, but the initiator required it'],
    [{ ...grant, tag: 2n }, 'LOGIN_RSP: tag 2 does not answer LOGIN_REQ tag 1'],
  ];
  for (const [rsp, message] of cases) {
    const err = t.throws(() => checkLoginGrant(loginReq, rsp), { instanceOf: ProtocolError });
    t.is(err?.message, message);
  }
});

test('CMD: LUN, task attribute, direction and format', (t) => {
  rejects(t, mutated(directCmd, (b) => b.subarray(0, 40)), 'TRUNCATED', {}, 'CMD needs at least 48 bytes, got 40');
  rejects(t, mutated(directCmd, (b) => void (b[16] = 0x40)), 'BAD_FIELD', {}, 'CMD: LUN 4003000000000000 is not in canonical form');
  rejects(t, mutated(directCmd, (b) => void (b[18] = 1)), 'BAD_FIELD', {}, 'CMD: LUN 0003010000000000 is not single-level');
  rejects(t, mutated(directCmd, (b) => void (b[16] = 0x80)), 'BAD_FIELD');
  rejects(t, mutated(directCmd, (b) => void (b[24] = 3)), 'BAD_FIELD', {}, 'CMD: unknown task attribute 3');
  rejects(t, mutated(directCmd, (b) => void (b[25] = 3)), 'BAD_FIELD');
  rejects(t, mutated(directCmd, (b) => void (b[26] = 4)), 'BAD_FIELD');
  rejects(t, mutated(directCmd, (b) => void (b[25] = 0)), 'BAD_FIELD', {}, 'CMD: direction 0 does not go with data format 1');
  rejects(t, mutated(immediateCmd, (b) => void (b[25] = 2)), 'BAD_FIELD', {}, 'CMD: immediate data is only for writes');
  rejects(t, mutated(noDataCmd, (b) => void (b[27] = 1)), 'BAD_DESCRIPTOR_COUNT');
  rejects(t, mutated(noDataCmd, (b) => void b.writeUInt32BE(5, 28)), 'LENGTH_MISMATCH');
});

test('CMD: descriptor counts and lengths are checked against each other and the limits', (t) => {
  const limits = { ...PROTOCOL_LIMITS, maxDescriptors: 2 };
  rejects(t, capsuleBuffer(listCmd), 'BAD_DESCRIPTOR_COUNT', { limits }, 'CMD: descriptor count 3, allowed 1 to 2');
  rejects(t, mutated(listCmd, (b) => void (b[27] = 0)), 'BAD_DESCRIPTOR_COUNT');
  rejects(t, mutated(listCmd, (b) => void (b[27] = 4)), 'TRUNCATED', {}, 'CMD with 4 descriptors needs 144 bytes, got 120');
  rejects(t, mutated(listCmd, (b) => void (b[27] = 2)), 'LENGTH_MISMATCH');
  rejects(t, mutated(directCmd, (b) => void (b[27] = 2)), 'BAD_DESCRIPTOR_COUNT', {}, 'CMD: a direct descriptor needs count 1, got 2');
  rejects(t, mutated(immediateCmd, (b) => void (b[27] = 1)), 'BAD_DESCRIPTOR_COUNT');
  rejects(t, mutated(listCmd, (b) => void b.writeUInt32BE(0x10200, 28)), 'LENGTH_MISMATCH', {}, 'CMD: descriptors add up to 66049 bytes, data length is 66048');
  rejects(t, mutated(directCmd, (b) => void b.writeUInt32BE(4097, 28)), 'LENGTH_MISMATCH', {}, 'CMD: descriptor length 4096 differs from data length 4097');
  rejects(t, capsuleBuffer(directCmd), 'OVERSIZE', { limits: { ...PROTOCOL_LIMITS, maxTransfer: 4095 } }, 'CMD: data length 4096 exceeds the limit 4095');
});

test('CMD: descriptors must not be empty, wrap, or carry reserved bits', (t) => {
  // The second list entry starts at 48 + 24; its length is at +16 and reserved at +20.
  rejects(t, mutated(listCmd, (b) => void b.writeUInt32BE(0, 72 + 16)), 'BAD_DESCRIPTOR', {}, 'CMD: descriptor 1 has length 0');
  rejects(t, mutated(listCmd, (b) => void b.writeBigUInt64BE(0xffffffffffffffffn, 72)), 'BAD_DESCRIPTOR', {}, 'CMD: descriptor 1: address range wraps past 2^64');
  rejects(t, mutated(listCmd, (b) => void (b[72 + 23] = 1)), 'RESERVED_NONZERO', {}, 'CMD: descriptor 1: reserved byte 95 is 0x01, must be 0');
  // The largest address that does not wrap is fine: 2^64 - 0x10000 + 0x10000 = 2^64.
  t.notThrows(() => decodeCapsule(capsuleBuffer(listCmd)));
  const wrapping: CommandCapsule = {
    ...listCmd,
    data: { format: DataFormat.LIST, descriptors: [{ address: 0xffffffffffffff00n, key: 0n, length: 0x101 }] },
  };
  const err = t.throws(() => capsuleBuffer(wrapping), { instanceOf: ProtocolError });
  t.is(err?.reason, 'BAD_DESCRIPTOR');
});

test('CMD: immediate data is bounded by the negotiated size and cannot wrap the capsule', (t) => {
  const limits = sessionLimits(loginRsp, 'target');
  t.notThrows(() => decodeCapsule(capsuleBuffer(immediateCmd), { limits }));
  rejects(t, capsuleBuffer(immediateCmd), 'OVERSIZE', { limits: { ...limits, maxImmediate: 999 } }, 'CMD: immediate data is 1000 bytes, the limit is 999');
  rejects(t, mutated(immediateCmd, (b) => void b.writeUInt32BE(0, 28)), 'LENGTH_MISMATCH', {}, 'CMD: immediate data of length 0');
  rejects(t, mutated(immediateCmd, (b) => void b.writeUInt32BE(1001, 28)), 'TRUNCATED');
  rejects(t, mutated(immediateCmd, (b) => void b.writeUInt32BE(999, 28)), 'LENGTH_MISMATCH');
  // Even with every limit at its maximum, a 2^32-1 byte claim is measured against the buffer, not added to an offset.
  const open = { maxCapsule: 1 << 20, maxImmediate: 0xffffffff, maxDescriptors: 255, maxTransfer: 0xffffffff };
  rejects(t, mutated(immediateCmd, (b) => void b.writeUInt32BE(0xffffffff, 28)), 'TRUNCATED', { limits: open }, 'CMD with immediate data needs 4294967343 bytes, got 1048');
});

test('RSP: status, sense, residuals and credits', (t) => {
  rejects(t, mutated(senseRsp, (b) => void (b[20] = 0x01)), 'BAD_FIELD', {}, 'RSP: 0x01 is not a SCSI status');
  rejects(t, mutated(senseRsp, (b) => void b.writeUInt32BE(4097, 16)), 'BAD_FIELD', {}, 'RSP: credit delta is 4097, allowed 0 to 4096');
  rejects(t, mutated(senseRsp, (b) => void (b[21] = 1)), 'RESERVED_NONZERO');
  rejects(t, mutated(senseRsp, (b) => void b.writeUInt16BE(253, 22)), 'OVERSIZE', {}, 'RSP: sense length 253, the limit is 252');
  rejects(t, mutated(senseRsp, (b) => void b.writeUInt16BE(19, 22)), 'TRUNCATED');
  rejects(t, mutated(senseRsp, (b) => void b.writeUInt16BE(17, 22)), 'LENGTH_MISMATCH');
  rejects(t, mutated(senseRsp, (b) => void (b[3] &= ~0x02)), 'BAD_FIELD', {}, 'RSP: SNSVALID is clear with sense length 18');
  rejects(t, mutated(plainRsp, (b) => void (b[3] |= 0x02)), 'BAD_FIELD');
  rejects(t, mutated(senseRsp, (b) => void (b[32] = 0x00)), 'BAD_FIELD', {}, 'RSP: sense response code 0x00 is not 70h-73h');
  rejects(t, mutated(senseRsp, (b) => void (b[3] |= 0x10)), 'BAD_FIELD', {}, 'RSP: data-in residual is flagged both over and under');
  rejects(t, mutated(senseRsp, (b) => void b.writeUInt32BE(1, 24)), 'BAD_FIELD', {}, 'RSP: data-out residual count 1 without an over/under flag');
  rejects(t, mutated(senseRsp, (b) => void b.writeUInt32BE(0, 28)), 'BAD_FIELD', {}, 'RSP: data-in residual flagged with count 0');
  const err = t.throws(() => capsuleBuffer({ ...senseRsp, sense: Buffer.alloc(253, 0x70) }), { instanceOf: ProtocolError });
  t.is(err?.reason, 'OVERSIZE');
});

test('task management and session control', (t) => {
  rejects(t, mutated(abortTask, (b) => void (b[24] = 0x10)), 'BAD_FIELD', {}, 'TSK_MGMT: unknown function 0x10');
  rejects(t, mutated(abortTask, (b) => void (b[27] = 1)), 'RESERVED_NONZERO');
  rejects(t, mutated(lunReset, (b) => void (b[39] = 5)), 'RESERVED_NONZERO', {}, 'TSK_MGMT: reserved byte 39 is 0x05, must be 0');
  const err = t.throws(() => capsuleBuffer({ ...lunReset, taskTag: 5n }), { instanceOf: ProtocolError });
  t.is(err?.message, 'TSK_MGMT: a task tag is only for ABORT TASK, FENCE CONNECTION and FENCE GATEWAY');
  // FENCE CONNECTION (version 3) carries a session id in the task tag field, and goes to LUN 0 only.
  const fence: TaskManagement = { ...lunReset, lun: 0, function: TaskFunction.FENCE_CONNECTION, taskTag: 0x1234_0000_0007n };
  t.like(decodeCapsule(capsuleBuffer(fence), { from: 'initiator' }), { op: Opcode.TSK_MGMT, lun: 0, function: TaskFunction.FENCE_CONNECTION, taskTag: 0x1234_0000_0007n });
  t.is(t.throws(() => capsuleBuffer({ ...lunReset, lun: 3, function: TaskFunction.FENCE_CONNECTION, taskTag: 1n }), { instanceOf: ProtocolError })?.message, 'TSK_MGMT: FENCE CONNECTION is sent to LUN 0');
  rejects(t, mutated(fence, (b) => void (b[17] = 3)), 'BAD_FIELD', {}, 'TSK_MGMT: FENCE CONNECTION to LUN 3, not 0');
  // FENCE GATEWAY (version 4) goes to the volume's LUN and names a target port group, 1 to 65535, in the task tag field.
  const gw: TaskManagement = { ...lunReset, lun: 5, function: TaskFunction.FENCE_GATEWAY, taskTag: 2n };
  t.like(decodeCapsule(capsuleBuffer(gw), { from: 'initiator' }), { op: Opcode.TSK_MGMT, lun: 5, function: TaskFunction.FENCE_GATEWAY, taskTag: 2n });
  t.like(decodeCapsule(capsuleBuffer({ ...gw, taskTag: 0xffffn }), { from: 'initiator' }), { taskTag: 0xffffn });
  t.is(t.throws(() => capsuleBuffer({ ...gw, taskTag: 0n }), { instanceOf: ProtocolError })?.message, 'TSK_MGMT: FENCE GATEWAY of target port group 0, not 1 to 65535');
  rejects(t, mutated(gw, (b) => void b.writeBigUInt64BE(0x10000n, 32)), 'BAD_FIELD', {}, 'TSK_MGMT: FENCE GATEWAY of target port group 65536, not 1 to 65535');
  rejects(t, mutated(gw, (b) => void b.writeBigUInt64BE(0n, 32)), 'BAD_FIELD', {}, 'TSK_MGMT: FENCE GATEWAY of target port group 0, not 1 to 65535');
  rejects(t, mutated(tskRsp, (b) => void (b[20] = 3)), 'BAD_FIELD', {}, 'TSK_RSP: unknown response 0x03');
  rejects(t, mutated(tskRsp, (b) => void (b[23] = 1)), 'RESERVED_NONZERO');
  rejects(t, mutated(tLogout, (b) => void b.writeUInt32BE(99, 16)), 'BAD_FIELD', {}, 'T_LOGOUT: unknown reason 99');
  rejects(t, mutated(tLogout, (b) => void (b[22] = 1)), 'RESERVED_NONZERO');
  rejects(t, mutated(credReq, (b) => void b.writeUInt32BE(0, 16)), 'BAD_FIELD', {}, 'CRED_REQ: credit delta is 0, allowed 1 to 4096');
  rejects(t, mutated(keepAlive, (b) => void b.writeUInt16BE(0x8000, 2)), 'RESERVED_NONZERO');
});

test('connect data: magic, kind, version, padding and ranges', (t) => {
  const [connect, accept, rej] = sampleConnectData();
  const edit = (d: ConnectData, f: (b: Buffer) => void): Buffer => {
    const b = connectDataBuffer(d);
    f(b);
    return b;
  };
  connectRejects(t, connectDataBuffer(connect).subarray(0, 15), 'TRUNCATED', 'connect data is 15 bytes, needs 16');
  connectRejects(t, Buffer.alloc(257), 'OVERSIZE');
  connectRejects(t, edit(connect, (b) => void (b[0] = 0x72)), 'BAD_MAGIC', 'connect data magic is 72424c4b, expected "RBLK"');
  connectRejects(t, edit(connect, (b) => void (b[5] = 4)), 'BAD_FIELD', 'connect data kind is 0x04');
  connectRejects(t, edit(connect, (b) => void (b[4] = 6)), 'BAD_VERSION', 'connect data version is 6, expected 1 to 5');
  connectRejects(t, edit(connect, (b) => void (b[4] = 0)), 'BAD_VERSION');
  connectRejects(t, edit(accept, (b) => void (b[4] = 0)), 'BAD_VERSION');
  connectRejects(t, edit(connect, (b) => void (b[12] = 1)), 'RESERVED_NONZERO');
  connectRejects(t, Buffer.concat([connectDataBuffer(connect), Buffer.from([0, 0, 1])]), 'RESERVED_NONZERO');
  connectRejects(t, edit(connect, (b) => void b.writeUInt32BE(511, 8)), 'BAD_FIELD', 'CONNECT: max capsule is 511, allowed 512 to 1048576');
  connectRejects(t, edit(connect, (b) => void b.writeUInt16BE(0, 6)), 'BAD_FIELD');
  connectRejects(t, edit(accept, (b) => void b.writeUInt16BE(0, 6)), 'BAD_FIELD');
  connectRejects(t, edit(rej, (b) => void b.writeUInt16BE(99, 6)), 'BAD_FIELD');
  connectRejects(t, edit(rej, (b) => void (b[9] = 1)), 'RESERVED_NONZERO');
  // A newer target names its own version in a REJECT; that must stay readable.
  t.deepEqual(decodeConnectData(edit(rej, (b) => void (b[4] = 7))), { ...rej, version: 7 });
  // Encoders refuse a version this side does not speak.
  t.throws(() => connectDataBuffer({ ...connect, kind: ConnectKind.CONNECT, version: 6, maxCapsule: 1024, queueDepth: 1 }), { message: /version 6 is not one this side speaks/ });
  const err = t.throws(() => decodeConnectData(connectDataBuffer(accept), ConnectKind.CONNECT), { instanceOf: ProtocolError });
  t.is(err?.message, 'connect data kind is 2, expected 1');
});

test('encoders reject what decoders would reject', (t) => {
  const bad: Capsule[] = [
    { ...loginReq, credits: 0 },
    { ...loginRsp, keepAliveMs: 99 },
    { ...loginRsp, targetProof: Buffer.alloc(31) },
    { ...directCmd, lun: 16384 },
    { ...directCmd, cdb: Buffer.alloc(10) },
    { ...noDataCmd, direction: 1 },
    { ...plainRsp, status: 3 },
    { ...credReq, creditDelta: 0 },
    { ...keepAlive, tag: -1n },
    { ...keepAlive, tag: 1n << 64n },
  ];
  for (const capsule of bad) {
    const err = t.throws(() => encodeCapsule(Buffer.alloc(2048), capsule), { instanceOf: ProtocolError });
    t.is(err?.reason, 'BAD_FIELD', err?.message);
  }
});
