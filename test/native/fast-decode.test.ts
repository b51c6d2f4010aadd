// The fast path's native decoders (native/src/core/fast-capsule.cc, fast-cdb.cc)
// against the TypeScript ones, over the capsule fuzzer's corpus
// (test/protocol/fuzz-corpus.ts): the native side takes a capsule exactly when
// the strict decoder accepts it as a CMD of the fast shape, and then reads the
// same fields; its CDB decoder takes exactly the READ/WRITE (10)/(16) CDBs that
// read-write.ts parses without a CHECK CONDITION of its own, with the same LBA,
// length and FUA (docs/target.md "Fast path").
import test from 'ava';
import { addon } from '../../native/binding.js';
import {
  capsuleBuffer,
  DataDirection,
  DataFormat,
  decodeCapsule,
  Opcode,
  PROTOCOL_LIMITS,
  sessionLimits,
  splitTrain,
  TaskAttribute,
  type Capsule,
  type CommandCapsule,
  type LoginResponse,
  type WireLimits,
} from '../../protocol/wire/index.js';
import { lbaAndLength } from '../../target/scsi/commands/read-write.js';
import { mutate, prng, randomCapsule } from '../protocol/fuzz-corpus.js';
import { sampleCapsules } from '../protocol/samples.js';

function tsDecode(input: Buffer, limits: WireLimits): Capsule | null {
  try {
    return decodeCapsule(input, { from: 'initiator', limits });
  } catch {
    return null;
  }
}

function fastShape(c: Capsule | null): c is CommandCapsule {
  if (c === null || c.op !== Opcode.CMD || c.taskAttribute !== TaskAttribute.SIMPLE) return false;
  if (c.data.format === DataFormat.DIRECT) return c.direction === DataDirection.READ || c.direction === DataDirection.WRITE;
  return c.data.format === DataFormat.IMMEDIATE && c.direction === DataDirection.WRITE;
}

/** What read-write.ts makes of a CDB, in the fast decoder's terms, or null for anything else. */
function tsCdb(cdb: Buffer): { write: boolean; fua: boolean; lba: bigint; blocks: number } | null {
  const sizes: Record<number, 10 | 16> = { 0x28: 10, 0x2a: 10, 0x88: 16, 0x8a: 16 };
  const size = sizes[cdb[0]];
  if (size === undefined || cdb[1] >> 5 !== 0 || (cdb[size - 1] & 0x04) !== 0) return null;
  const { lba, blocks } = lbaAndLength(cdb, size);
  return { write: cdb[0] === 0x2a || cdb[0] === 0x8a, fua: (cdb[1] & 0x08) !== 0, lba: BigInt(lba), blocks };
}

/** Fast-shaped CMDs with every CDB the fast path reads, so the mutations start close to its edges. */
function fastSamples(): Buffer[] {
  const out: Buffer[] = [];
  const cdbs = ['2800000000100000080000', '2a08000000100000080000', '88000000000000000010000000080000', '8a080000000000000010000000080000', '2a00ffffffff0000ff0004', '28e0000000000000010000'];
  cdbs.forEach((hex, i) => {
    const cdb = Buffer.alloc(16);
    Buffer.from(hex, 'hex').copy(cdb);
    const write = cdb[0] === 0x2a || cdb[0] === 0x8a;
    out.push(
      capsuleBuffer({
        op: Opcode.CMD,
        tag: BigInt(i) * 0x1000000001n,
        lun: [0, 1, 255, 256, 16383][i % 5],
        taskAttribute: TaskAttribute.SIMPLE,
        direction: write ? DataDirection.WRITE : DataDirection.READ,
        cdb,
        data: { format: DataFormat.DIRECT, descriptor: { address: 0xffff_f000n * BigInt(i), key: 7n + BigInt(i), length: 4096 } },
      }),
    );
    if (write) {
      out.push(
        capsuleBuffer({
          op: Opcode.CMD,
          tag: BigInt(i),
          lun: 2,
          taskAttribute: TaskAttribute.SIMPLE,
          direction: DataDirection.WRITE,
          cdb,
          data: { format: DataFormat.IMMEDIATE, data: Buffer.alloc(512, i) },
        }),
      );
    }
  });
  return out;
}

test('30k fuzzed capsules: the native decoder takes exactly the fast-shaped CMDs the TypeScript decoder accepts, with the same fields', (t) => {
  const native = addon();
  const rand = prng(0xfa57_9a7e);
  const samples = [...sampleCapsules().map((c) => capsuleBuffer(c)), ...fastSamples()];
  const loginRsp = sampleCapsules().find((c): c is LoginResponse => c.op === Opcode.LOGIN_RSP)!;
  const limitChoices: WireLimits[] = [
    PROTOCOL_LIMITS,
    sessionLimits(loginRsp, 'target'),
    { maxCapsule: 0xffffffff, maxImmediate: 0xffffffff, maxDescriptors: 255, maxTransfer: 0xffffffff },
    { maxCapsule: 72, maxImmediate: 0, maxDescriptors: 1, maxTransfer: 4096 },
  ];
  const failures: string[] = [];
  let taken = 0;
  let cdbsTaken = 0;
  for (let i = 0; i < 30_000; i++) {
    const input = i % 5 === 0 ? randomCapsule(rand) : mutate(rand, samples[Math.floor(rand() * samples.length)]);
    const limits = limitChoices[Math.floor(rand() * limitChoices.length)];
    const ts = tsDecode(input, limits);
    const got = native.decodeFastCommand(input, limits.maxCapsule, limits.maxTransfer, limits.maxImmediate);
    const hex = input.toString('hex');
    if (!fastShape(ts)) {
      if (got !== null) failures.push(`native took ${hex}, which TypeScript ${ts === null ? 'rejects' : 'does not give the fast shape'}`);
      continue;
    }
    if (got === null) {
      failures.push(`native left ${hex}, a fast-shaped CMD`);
      continue;
    }
    taken++;
    const direct = ts.data.format === DataFormat.DIRECT ? ts.data.descriptor : null;
    const want = {
      tag: ts.tag,
      lun: ts.lun,
      write: ts.direction === DataDirection.WRITE,
      immediate: ts.data.format === DataFormat.IMMEDIATE,
      address: direct?.address ?? 0n,
      key: direct?.key ?? 0n,
      dataLength: ts.data.format === DataFormat.IMMEDIATE ? ts.data.data.length : (direct?.length ?? 0),
      cdb: tsCdb(ts.cdb),
    };
    if (want.cdb !== null) cdbsTaken++;
    try {
      t.deepEqual(got, want);
    } catch {
      failures.push(`fields differ for ${hex}: ${JSON.stringify(got, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`);
    }
  }
  t.deepEqual(failures.slice(0, 5), []);
  // The corpus must reach the fast shape often, and its CDBs too.
  t.true(taken > 1000, `only ${taken} capsules had the fast shape`);
  t.true(cdbsTaken > 400, `only ${cdbsTaken} had a fast CDB`);
  t.log(`${taken} fast-shaped capsules, ${cdbsTaken} with a READ/WRITE CDB`);
});

/** splitTrain's framing as lengths, or null where it throws. */
function tsTrain(message: Buffer): number[] | null {
  try {
    return splitTrain(message).map((p) => p.length);
  } catch {
    return null;
  }
}

test('20k fuzzed messages: the fast path frames a version-5 message exactly as splitTrain does (docs/protocol.md §5.1)', (t) => {
  const native = addon();
  const rand = prng(0x7a41_4e55);
  const pieces = [...sampleCapsules().map((c) => capsuleBuffer(c)), ...fastSamples()];
  const cmdPieces = pieces.filter((b) => b[0] === Opcode.CMD);
  const failures: string[] = [];
  let trains = 0;
  let malformed = 0;
  for (let i = 0; i < 20_000; i++) {
    // Mostly CMDs, now and then another capsule, sometimes the whole message mutated (length fields included).
    const n = 1 + Math.floor(rand() * 5);
    const parts = Array.from({ length: n }, () => {
      const from = rand() < 0.9 ? cmdPieces : pieces;
      return from[Math.floor(rand() * from.length)];
    });
    let message: Buffer = Buffer.concat(parts);
    if (rand() < 0.4) message = mutate(rand, message);
    else if (rand() < 0.1) message = message.subarray(0, Math.floor(rand() * message.length));
    const want = tsTrain(message);
    const got = native.scanTrain(message);
    if (want === null) malformed++;
    else if (want.length > 1) trains++;
    if (JSON.stringify(got) !== JSON.stringify(want)) failures.push(`${message.toString('hex')}: native ${JSON.stringify(got)}, TypeScript ${JSON.stringify(want)}`);
  }
  t.deepEqual(failures.slice(0, 5), []);
  // The corpus must reach both well-formed and malformed trains often.
  t.true(trains > 3000, `only ${trains} well-formed trains`);
  t.true(malformed > 1000, `only ${malformed} malformed ones`);
  t.log(`${trains} trains, ${malformed} malformed`);
});
