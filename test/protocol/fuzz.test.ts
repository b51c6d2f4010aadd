// Seeded fuzzing of every decoder: whatever the bytes, a decoder returns a capsule or throws a
// ProtocolError, and whatever it accepts re-encodes to exactly the bytes it was given.

import test from 'ava';
import {
  capsuleBuffer,
  connectDataBuffer,
  decodeCapsule,
  decodeCommand,
  decodeConnectData,
  decodeLoginRequest,
  decodeResponse,
  Opcode,
  PROTOCOL_LIMITS,
  ProtocolError,
  sessionLimits,
  type DecodeOptions,
  type LoginResponse,
  type ProtocolErrorReason,
  type WireLimits,
} from '../../protocol/wire/index.js';
import { mutate, prng, randomCapsule } from './fuzz-corpus.js';
import { sampleCapsules, sampleConnectData } from './samples.js';

const REASONS = new Set<ProtocolErrorReason>([
  'TRUNCATED',
  'LENGTH_MISMATCH',
  'OVERSIZE',
  'BAD_VERSION',
  'BAD_OPCODE',
  'BAD_MAGIC',
  'BAD_FIELD',
  'RESERVED_NONZERO',
  'BAD_NAME',
  'BAD_DESCRIPTOR',
  'BAD_DESCRIPTOR_COUNT',
]);
const OPCODES = Object.values(Opcode);

interface Outcome {
  accepted: number;
  reasons: Map<string, number>;
  failures: string[];
}

function newOutcome(): Outcome {
  return { accepted: 0, reasons: new Map(), failures: [] };
}

/** Runs one decoder; anything but a ProtocolError with a known reason is recorded as a failure. */
function attempt<T>(outcome: Outcome, input: Buffer, decode: () => T, reencode: (value: T) => Buffer): T | undefined {
  let value: T;
  try {
    value = decode();
  } catch (err) {
    if (err instanceof ProtocolError && REASONS.has(err.reason) && err.message.length > 0) {
      outcome.reasons.set(err.reason, (outcome.reasons.get(err.reason) ?? 0) + 1);
    } else {
      outcome.failures.push(`${String(err)} for ${input.toString('hex')}`);
    }
    return undefined;
  }
  outcome.accepted++;
  try {
    const again = reencode(value);
    if (!again.equals(input)) outcome.failures.push(`accepted non-canonical ${input.toString('hex')}, re-encodes as ${again.toString('hex')}`);
  } catch (err) {
    outcome.failures.push(`accepted ${input.toString('hex')} but cannot re-encode it: ${String(err)}`);
  }
  return value;
}

test('20k random and mutated capsules: decoders only throw ProtocolError and accept only canonical bytes', (t) => {
  const rand = prng(0x5eed1234);
  const samples = sampleCapsules().map((c) => capsuleBuffer(c));
  const loginRsp = sampleCapsules().find((c): c is LoginResponse => c.op === Opcode.LOGIN_RSP);
  if (loginRsp === undefined) return t.fail('no LOGIN_RSP sample');
  const limitChoices: Array<WireLimits | undefined> = [
    undefined,
    PROTOCOL_LIMITS,
    sessionLimits(loginRsp, 'target'),
    sessionLimits(loginRsp, 'initiator'),
    { maxCapsule: 0xffffffff, maxImmediate: 0xffffffff, maxDescriptors: 255, maxTransfer: 0xffffffff },
    { maxCapsule: 64, maxImmediate: 0, maxDescriptors: 1, maxTransfer: 1 },
  ];
  const outcome = newOutcome();
  const acceptedOps = new Set<number>();
  for (let i = 0; i < 20_000; i++) {
    const input = i % 4 === 0 ? randomCapsule(rand) : mutate(rand, samples[Math.floor(rand() * samples.length)]);
    const r = rand();
    const options: DecodeOptions = {
      limits: limitChoices[Math.floor(rand() * limitChoices.length)],
      from: r < 0.2 ? 'initiator' : r < 0.4 ? 'target' : undefined,
    };
    const capsule = attempt(outcome, input, () => decodeCapsule(input, options), capsuleBuffer);
    if (capsule !== undefined) acceptedOps.add(capsule.op);
    if (i % 10 === 0) {
      attempt(outcome, input, () => decodeCommand(input), capsuleBuffer);
      attempt(outcome, input, () => decodeResponse(input), capsuleBuffer);
      attempt(outcome, input, () => decodeLoginRequest(input), capsuleBuffer);
    }
  }
  t.deepEqual(outcome.failures.slice(0, 5), []);
  // The fuzzer must reach deep into the bodies, not only bounce off headers.
  t.true(outcome.accepted > 1000, `only ${outcome.accepted} inputs decoded`);
  for (const reason of REASONS) {
    if (reason === 'BAD_MAGIC') continue;
    t.true((outcome.reasons.get(reason) ?? 0) > 0, `no input was rejected with ${reason}`);
  }
  t.deepEqual([...acceptedOps].sort((a, b) => a - b), [...OPCODES].sort((a, b) => a - b));
  t.log(`accepted ${outcome.accepted}; rejected ${JSON.stringify(Object.fromEntries(outcome.reasons))}`);
});

test('5k random and mutated connect private data: only ProtocolError, only canonical bytes', (t) => {
  const rand = prng(0xc0ffee);
  const samples = sampleConnectData().map((d) => connectDataBuffer(d));
  const outcome = newOutcome();
  for (let i = 0; i < 5_000; i++) {
    let input: Buffer;
    if (i % 5 === 0) {
      input = Buffer.from(Array.from({ length: Math.floor(rand() * 64) }, () => Math.floor(rand() * 256)));
    } else {
      input = mutate(rand, samples[Math.floor(rand() * samples.length)]);
      // mutate() patches capsule header fields; put the connect-data magic back most of the time.
      if (input.length >= 4 && rand() < 0.8) input.writeUInt32BE(0x52424c4b, 0);
    }
    // Padding after the 16 bytes is legal when zero, and is not part of the canonical encoding.
    attempt(outcome, input, () => decodeConnectData(input), (d) => {
      const encoded = connectDataBuffer(d);
      return input.length > encoded.length ? Buffer.concat([encoded, Buffer.alloc(input.length - encoded.length)]) : encoded;
    });
  }
  t.deepEqual(outcome.failures.slice(0, 5), []);
  t.true(outcome.accepted > 100, `only ${outcome.accepted} inputs decoded`);
  for (const reason of ['TRUNCATED', 'BAD_MAGIC', 'BAD_FIELD', 'BAD_VERSION', 'RESERVED_NONZERO'] as const) {
    t.true((outcome.reasons.get(reason) ?? 0) > 0, `no input was rejected with ${reason}`);
  }
});
