import test from 'ava';
import {
  capsuleBuffer,
  ConnectKind,
  connectDataBuffer,
  decodeCapsule,
  decodeCommand,
  decodeConnectData,
  decodeLoginRequest,
  encodeCapsule,
  encodeCommand,
  encodedLength,
  opcodeName,
  senderOf,
  transferLength,
  DataFormat,
  Opcode,
  type CommandCapsule,
} from '../../protocol/wire/index.js';
import { cdb, sampleCapsules, sampleConnectData, sense } from './samples.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

for (const capsule of sampleCapsules()) {
  test(`${opcodeName(capsule.op)} tag ${capsule.tag} round-trips`, (t) => {
    const buf = capsuleBuffer(capsule);
    t.is(buf.length, encodedLength(capsule));
    t.is(buf[0], capsule.op);
    t.is(buf[1], 1);
    t.is(buf.readUInt32BE(4), buf.length);
    t.deepEqual(decodeCapsule(buf), capsule);
    t.deepEqual(decodeCapsule(buf, { from: senderOf(capsule.op) }), capsule);
  });
}

test('encoding into dirty registered-style memory writes the same bytes and clears reserved fields', (t) => {
  for (const capsule of sampleCapsules()) {
    const clean = capsuleBuffer(capsule);
    const slot = Buffer.alloc(clean.length + 100, 0xa5);
    const length = encodeCapsule(slot, capsule);
    t.is(length, clean.length, opcodeName(capsule.op));
    t.deepEqual(slot.subarray(0, length), clean, opcodeName(capsule.op));
    t.true(slot.subarray(length).every((b) => b === 0xa5), `${opcodeName(capsule.op)} wrote past its length`);
  }
});

test('connect private data round-trips and fits in 56 bytes', (t) => {
  for (const data of sampleConnectData()) {
    const buf = connectDataBuffer(data);
    t.true(buf.length <= 56);
    t.deepEqual(decodeConnectData(buf), data);
    t.deepEqual(decodeConnectData(buf, data.kind), data);
  }
});

test('connect data accepts zero padding from the provider, as IB CM delivers it', (t) => {
  const padded = Buffer.concat([connectDataBuffer(sampleConnectData()[1]), Buffer.alloc(180)]);
  t.deepEqual(decodeConnectData(padded, ConnectKind.ACCEPT), sampleConnectData()[1]);
});

// The golden layouts below are written out by hand from docs/protocol.md, so the codecs
// are checked against the spec's offsets rather than against themselves.

test('CMD with a direct descriptor has the documented layout', (t) => {
  const expected = hex(`
    02 01 0000 00000048 fedcba9876543210
    0003000000000000
    00 02 01 01 00001000
    28000000001000000800000000000000
    0000000000010000 deadbeefcafef00d 00001000 00000000`);
  const cmd = sampleCapsules()[6];
  t.deepEqual(capsuleBuffer(cmd), expected);
  t.deepEqual(decodeCommand(expected), cmd);
});

test('CMD with flat-space LUN 300 and a descriptor list has the documented layout', (t) => {
  const expected = hex(`
    02 01 0000 00000078 0000000000000005
    412c000000000000
    02 01 02 03 00010201
    28000000001000000800000000000000
    0000000000000000 0000000000000001 00000200 00000000
    ffffffffffff0000 0000000000000002 00010000 00000000
    0000000000001000 0000000000000003 00000001 00000000`);
  const cmd = sampleCapsules()[7] as CommandCapsule;
  t.deepEqual(capsuleBuffer(cmd), expected);
  t.is(transferLength(cmd.data), 0x10201);
});

test('RSP has the documented layout', (t) => {
  const expected = Buffer.concat([
    hex(`c1 01 0022 00000032 fedcba9876543210 00000001 02 00 0012 00000000 00001000`),
    sense(),
  ]);
  t.deepEqual(capsuleBuffer(sampleCapsules()[10]), expected);
});

test('LOGIN_REQ has the documented layout', (t) => {
  const expected = Buffer.concat([
    hex(`00 01 0001 00000025 000000000000002a 00002000 00000400 00001000 0040 02 03`),
    Buffer.from('i1t22', 'ascii'),
  ]);
  const req = decodeLoginRequest(expected);
  t.is(req.initiatorName, 'i1');
  t.is(req.targetName, 't22');
  t.true(req.authRequired);
  t.is(req.maxItCapsule, 8192);
  t.is(req.maxTiCapsule, 1024);
  t.is(req.immediateDataSize, 4096);
  t.is(req.credits, 64);
  t.is(req.tag, 42n);
  t.deepEqual(capsuleBuffer(req), expected);
});

test('TSK_MGMT, LOGIN_RSP and CONNECT have the documented layouts', (t) => {
  t.deepEqual(
    capsuleBuffer(sampleCapsules()[12]),
    hex('01 01 0000 00000028 0000000000000009 0003000000000000 01 00000000000000 0000000000000005'),
  );
  t.deepEqual(
    capsuleBuffer(sampleCapsules()[4]),
    Buffer.concat([
      hex('c0 01 0000 00000050 0000000000000002 0000000000000007 00000200 00000200 00000000 00001000 0001 0001 00000000'),
      Buffer.alloc(32),
    ]),
  );
  t.deepEqual(connectDataBuffer(sampleConnectData()[0]), hex('52424c4b 01 01 0080 00002000 00000000'));
  t.deepEqual(connectDataBuffer(sampleConnectData()[2]), hex('52424c4b 01 03 0003 00000000 00000000'));
  t.deepEqual(connectDataBuffer(sampleConnectData()[3]), hex('52424c4b 02 01 0020 00000400 00000000'));
  // An object without a version encodes as version 1, as version-1 code wrote it.
  t.deepEqual(connectDataBuffer({ kind: ConnectKind.ACCEPT, maxCapsule: 4096, recvBuffers: 35 }), hex('52424c4b 01 02 0023 00001000 00000000'));
});

test('decoded buffers are views of the received capsule, not copies', (t) => {
  const buf = capsuleBuffer(sampleCapsules()[8]);
  const cmd = decodeCommand(buf);
  if (cmd.data.format !== DataFormat.IMMEDIATE) return t.fail('expected immediate data');
  buf[48] ^= 0xff;
  t.is(cmd.data.data[0], buf[48]);
  t.is(cmd.cdb.buffer, buf.buffer);
});

test('encoders refuse a buffer that is too small', (t) => {
  const cmd = sampleCapsules()[8];
  const err = t.throws(() => encodeCapsule(Buffer.alloc(100), cmd));
  t.is(err?.name, 'ProtocolError');
  t.is(err?.message, 'CMD needs 1048 bytes, the buffer has 100');
});

test('every opcode is covered by the samples and named', (t) => {
  const covered = new Set(sampleCapsules().map((c) => c.op));
  for (const [name, op] of Object.entries(Opcode)) {
    t.true(covered.has(op), `${name} has no sample`);
    t.is(opcodeName(op), name);
  }
  t.is(opcodeName(0x7e), '0x7e');
});

test('a CMD with a direct descriptor fits a 72-byte buffer exactly', (t) => {
  const cmd: CommandCapsule = {
    op: Opcode.CMD,
    tag: 1n,
    lun: 1,
    taskAttribute: 0,
    direction: 2,
    cdb: cdb(),
    data: { format: DataFormat.DIRECT, descriptor: { address: 1n, key: 2n, length: 3 } },
  };
  const buf = Buffer.alloc(72);
  t.is(encodeCommand(buf, cmd), 72);
});
