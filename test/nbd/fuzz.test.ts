// Fuzzed NBD at both protocol steps (docs/nbd.md): the export that `rblk
// attach` serves takes whatever a local client sends, so a malformed option
// or request must end at most its own connection, with the server still up
// and every other client unaffected. A seeded generator (RBLK_FUZZ_SEED to
// replay) builds well-formed handshakes and requests, then mutates them
// (flipped bytes, truncation, lengths and fields set to extremes), for:
//  - the handshake: client flags and a run of options (LIST, INFO, GO,
//    STRUCTURED_REPLY, EXPORT_NAME, unknown codes);
//  - transmission: after a real NBD_OPT_GO, simple or structured, a run of
//    requests (every command type, flags, offsets and lengths at and past
//    the ends, write payloads shorter or longer than they claim).
// Beside them a healthy client writes and reads back its own export the whole
// time. At the end: no fuzzed connection is left open on the server, the
// healthy client saw no error and no wrong byte, the server logged no error,
// a new client still gets through, and this process's fds came back.
import test from 'ava';
import type { Socket } from 'node:net';
import { prng as rng } from '../../bench/soak/mutate.js';
import { MemoryDevice } from '../helpers/memory-device.js';
import { mutateBytes } from '../helpers/mutate-bytes.js';
import { checkSuiteResources } from '../helpers/resources.js';
import { serve } from './helpers/harness.js';
import { CMD, IHAVEOPT, INFO, OPT, RawClient, infoRequest } from './helpers/raw-client.js';

checkSuiteResources(test);

const MiB = 1 << 20;
const CASES = Number(process.env.RBLK_NBD_FUZZ_CASES ?? 1500);
const SEED = Number(process.env.RBLK_FUZZ_SEED ?? 0x6e6264);
const REQUEST_MAGIC = 0x25609513;
/** The healthy client's export: no mutation of the fuzzed one's name can reach it. */
const HEALTHY = 'healthy-export-beside-the-fuzz';

type Rand = () => number;
const int = (r: Rand, n: number): number => Math.floor(r() * n);
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)]!;
const EXTREMES = [0, 1, 511, 512, 4095, 4096, MiB - 1, 4 * MiB, 4 * MiB + 512, 32 * MiB + 1, 0x7fffffff, 0xffffffff];

function option(code: number, data: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(16);
  h.writeBigUInt64BE(IHAVEOPT, 0);
  h.writeUInt32BE(code, 8);
  h.writeUInt32BE(data.length, 12);
  return Buffer.concat([h, data]);
}

function request(r: Rand, type: number, offset: number, length: number, flags: number): Buffer {
  const h = Buffer.alloc(28);
  h.writeUInt32BE(REQUEST_MAGIC, 0);
  h.writeUInt16BE(flags, 4);
  h.writeUInt16BE(type, 6);
  h.writeBigUInt64BE(BigInt(int(r, 0x10000)), 8);
  h.writeBigUInt64BE(BigInt(offset), 16);
  h.writeUInt32BE(length >>> 0, 24);
  // A write carries its payload, sometimes shorter or longer than it says.
  if (type !== CMD.WRITE) return h;
  const sent = r() < 0.8 ? Math.min(length, 64 * 1024) : int(r, 8192);
  return Buffer.concat([h, Buffer.alloc(sent, int(r, 256))]);
}

function handshakeCase(r: Rand): Buffer {
  const flags = Buffer.alloc(4);
  flags.writeUInt32BE(r() < 0.85 ? 3 : int(r, 0x100), 0);
  const opts: Buffer[] = [flags];
  for (let i = 1 + int(r, 4); i > 0; i--) {
    const name = pick(r, ['disk', '', 'no-such-export', 'x'.repeat(int(r, 5000))]);
    const infos = Array.from({ length: int(r, 5) }, () => pick(r, [INFO.EXPORT, INFO.NAME, INFO.DESCRIPTION, INFO.BLOCK_SIZE, int(r, 0x10000)]));
    opts.push(
      pick(r, [
        () => option(OPT.LIST),
        () => option(OPT.INFO, infoRequest(name, infos)),
        () => option(OPT.GO, infoRequest(name, infos)),
        () => option(OPT.STRUCTURED_REPLY),
        () => option(OPT.EXPORT_NAME, Buffer.from(name)),
        () => option(pick(r, [OPT.STARTTLS, OPT.LIST_META, OPT.SET_META, int(r, 0x100), int(r, 0x100000000)]), Buffer.alloc(int(r, 64), 7)),
      ])(),
    );
  }
  const all = Buffer.concat(opts);
  return r() < 0.85 ? mutateBytes((n) => int(r, n), all, EXTREMES) : all;
}

function transmissionCase(r: Rand): Buffer {
  const reqs: Buffer[] = [];
  for (let i = 1 + int(r, 5); i > 0; i--) {
    const type = r() < 0.9 ? pick(r, Object.values(CMD)) : int(r, 0x10000);
    const offset = r() < 0.7 ? int(r, 4 * MiB / 512) * 512 : pick(r, [...EXTREMES, 2 ** 53 - 1, 2 ** 62]);
    const length = r() < 0.7 ? (1 + int(r, 128)) * 512 : pick(r, EXTREMES);
    const flags = r() < 0.7 ? pick(r, [0, 1, 2, 4, 8, 16]) : int(r, 0x10000);
    reqs.push(request(r, type, offset, length, flags));
  }
  const all = Buffer.concat(reqs);
  return r() < 0.5 ? mutateBytes((n) => int(r, n), all, EXTREMES) : all;
}

/** Sends the bytes, gives the server a moment to answer or close, then hangs up. */
async function throwAt(s: Socket, bytes: Buffer, waitMs: number): Promise<void> {
  const closed = new Promise<void>((r) => s.once('close', () => r()));
  s.write(bytes); // what the server answers, RawClient takes in
  await Promise.race([closed, new Promise((r) => setTimeout(r, waitMs))]);
  s.destroy();
  await closed;
}

test(`${CASES} fuzzed handshakes and ${CASES} fuzzed request runs: the server stays up, a healthy client beside them sees no error`, async (t) => {
  t.timeout(240_000);
  const fuzzed = new MemoryDevice({ size: 4 * MiB });
  const healthyDevice = new MemoryDevice({ size: 4 * MiB });
  const { server, address, logs } = await serve(t, new Map([['disk', fuzzed], [HEALTHY, healthyDevice]]));

  // The healthy client: its own export, a pattern written and read back, block after block, until told to stop.
  const healthy = await RawClient.open(address, HEALTHY, { structured: true });
  t.teardown(() => healthy.destroy());
  let stop = false;
  const seen = { ops: 0, errors: [] as string[] };
  const beside = (async () => {
    for (let i = 0; !stop; i++) {
      const offset = (i % 1024) * 4096;
      const data = Buffer.alloc(4096, (i * 7 + 1) & 0xff);
      const w = await healthy.write(offset, data);
      const rd = await healthy.read(offset, 4096);
      if (w.error !== 0 || rd.error !== 0 || !rd.data.equals(data)) seen.errors.push(`op ${i}: write ${w.error}, read ${rd.error}, data ${rd.data.equals(data) ? 'equal' : 'differs'}`);
      seen.ops++;
    }
  })();

  const r = rng(SEED);
  for (let i = 0; i < CASES; i++) {
    const c = await RawClient.connect(address);
    await throwAt(c.socket, handshakeCase(r), 5);
  }
  for (let i = 0; i < CASES; i++) {
    const c = await RawClient.open(address, 'disk', { structured: r() < 0.5 });
    await throwAt(c.socket, transmissionCase(r), 5);
  }
  stop = true;
  await beside;

  t.log(`seed ${SEED}: the healthy client made ${seen.ops} write+read pairs beside the fuzz; the server logged ${logs.length} lines`);
  t.deepEqual(seen.errors, [], 'the healthy client saw an error or a wrong byte');
  t.true(seen.ops > 0, 'the healthy client ran beside the fuzz');
  t.deepEqual(logs.filter((l) => l.level === 'error').map((l) => l.msg).slice(0, 5), [], 'the server logged no error');
  // Every fuzzed connection ends on the server too; the healthy one stays.
  for (let waited = 0; server.connections > 1 && waited < 5000; waited += 20) await new Promise((res) => setTimeout(res, 20));
  t.is(server.connections, 1, 'only the healthy connection is left');
  // A new client still gets through, and the fuzzed export still answers correctly.
  const after = await RawClient.open(address, 'disk');
  const probe = Buffer.alloc(4096, 0x5a);
  t.is((await after.write(0, probe)).error, 0);
  const back = await after.read(0, 4096);
  t.is(back.error, 0);
  t.true(back.data.equals(probe));
  await after.disconnect();
  await healthy.disconnect();
});
