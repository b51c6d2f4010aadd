// Malformed input never stops the portal (docs/iscsi.md "Protocol errors"):
// connections that send random bytes, or well-framed PDUs with random
// opcodes, flags and fields, before and after login, each end alone; a
// session opened first keeps working, and every fd comes back.
import test from 'ava';
import { mutateBytes } from '../helpers/mutate-bytes.js';
import { resources } from '../helpers/resources.js';
import { INITIATOR, IQN, startIscsi } from './portal-fixture.js';
import { framePdu, loginStatus, RawInitiator } from './raw-initiator.js';

/** xorshift32: the same sequence every run, so a failure can be replayed. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

const OPCODES = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10, 0x1c, 0x3f];

test.serial('random PDUs and bytes end only their own connections', async (t) => {
  const f = await startIscsi([{ name: 'vol0', lun: 0, size: 1 << 20 }], { maxSessions: 64 });
  t.teardown(() => f.close());
  const before = resources().fds;
  const keeper = await RawInitiator.open(f.port);
  t.is(loginStatus((await keeper.login({ initiator: INITIATOR, target: IQN }))!), 0);

  const rnd = prng(0x15c51);
  for (let round = 0; round < 120; round++) {
    const c = await RawInitiator.open(f.port);
    if (round % 3 !== 0) await c.login({ initiator: `${INITIATOR}-${round}`, target: IQN });
    if (round % 5 === 0) {
      c.socket.write(Buffer.from(Array.from({ length: 1 + (rnd() % 300) }, () => rnd() & 0xff)));
    } else {
      for (let i = 0; i < 8 && !c.closed; i++) {
        const h = Buffer.alloc(48);
        for (let b = 0; b < 48; b++) h[b] = rnd() & 0xff;
        h[0] = (h[0] & 0x40) | OPCODES[rnd() % OPCODES.length];
        h[4] = rnd() % 3; // a small AHS now and then
        const data = Buffer.alloc(rnd() % 1100, rnd() & 0xff);
        c.send(h, data);
        if (h[4] > 0) c.socket.write(Buffer.alloc(h[4] * 4));
      }
    }
    await Promise.race([c.whenClosed, new Promise((r) => setTimeout(r, 20))]);
    c.close();
  }

  keeper.command({ itt: 1, cdb: Buffer.alloc(16), edtl: 0 });
  t.truthy(await keeper.next(0x21), 'the first session still answers');
  keeper.close();
  for (let i = 0; i < 200 && (f.server.sessions.size > 0 || resources().fds > before); i++) await new Promise((r) => setTimeout(r, 20));
  t.is(f.server.sessions.size, 0);
  t.true(resources().fds <= before, `fds ${resources().fds} > ${before}`);
  t.false(f.log.some((l) => l.level === 'error'), f.log.filter((l) => l.level === 'error').map((l) => l.message).join('\n'));
});

// Structure-aware fuzz at each step (docs/iscsi.md "Protocol errors"): login
// PDUs built from real keys and stages, then mutated, and after a real login,
// runs of full-feature PDUs of every kind an initiator sends (SCSI commands
// with immediate data, Data-Out, NOP-Out, Text, task management, Logout,
// SNACK), their fields drawn from the values that matter and then mutated.
// Beside them a healthy session, on a LUN only it can see, reads a known
// pattern and writes and reads back its own blocks throughout.
const CASES = Number(process.env.RBLK_ISCSI_FUZZ_CASES ?? 1500);
const HEALTHY = 'iqn.2026-12.io.rblk:a-healthy-session-beside-the-fuzz';
const EXTREMES = [0, 1, 0x1ff, 0x200, 0xfff, 0x1000, 0x2000, 0xffff, 0x10000, 0xffffff, 0x7fffffff, 0xffffffff];
const LOGIN_KEYS: [string, (rnd: () => number) => string][] = [
  ['HeaderDigest', () => 'None,CRC32C'],
  ['DataDigest', () => 'CRC32C'],
  ['MaxRecvDataSegmentLength', (rnd) => String(EXTREMES[rnd() % EXTREMES.length])],
  ['MaxBurstLength', () => '262144'],
  ['FirstBurstLength', () => '0'],
  ['ImmediateData', () => 'Maybe'],
  ['InitialR2T', () => 'No'],
  ['MaxConnections', () => '65536'],
  ['ErrorRecoveryLevel', () => '2'],
  ['AuthMethod', () => 'CHAP,None'],
  ['CHAP_A', () => '5'],
  ['CHAP_N', () => 'x'],
  ['CHAP_R', () => '0x' + 'ab'.repeat(16)],
  ['SessionType', () => 'Discovery'],
  ['X-com.example.key', () => 'v'],
  ['NoEqualsSign', () => ''],
  ['MaxOutstandingR2T', () => '-1'],
  ['TargetAlias', () => 'y'.repeat(300)],
];

function loginCase(rnd: () => number, round: number): Buffer {
  const h = Buffer.alloc(48);
  h[0] = 0x43;
  h[1] = [0x87, 0x81, 0x83, 0x01, 0x80 | (1 << 2) | 3, 0x84][rnd() % 6]!; // T/C, CSG and NSG, valid and not
  h[3] = rnd() % 4 === 0 ? rnd() & 0xff : 0; // version min
  Buffer.from([0x80, 0, 0, 0x20, (round >> 8) & 0xff, round & 0xff]).copy(h, 8);
  h.writeUInt16BE(rnd() % 5 === 0 ? rnd() & 0xffff : 0, 14); // TSIH
  h.writeUInt32BE(1, 16);
  const keys: [string, string][] = [['InitiatorName', `${INITIATOR}-fuzz-${round}`]];
  if (rnd() % 4 !== 0) keys.push(['TargetName', rnd() % 5 === 0 ? 'iqn.2026-12.io.rblk:nonesuch' : IQN]);
  for (let n = rnd() % 6; n > 0; n--) {
    const [k, v] = LOGIN_KEYS[rnd() % LOGIN_KEYS.length]!;
    keys.push([k, v(rnd)]);
  }
  const text = Buffer.from(keys.map(([k, v]) => (k === 'NoEqualsSign' ? k : `${k}=${v}`)).join('\0') + '\0');
  const bytes = framePdu(h, text);
  return rnd() % 10 < 7 ? mutateBytes((n) => rnd() % n, bytes, EXTREMES) : bytes;
}

function fullFeatureCase(rnd: () => number, cmdSN: number): Buffer {
  const out: Buffer[] = [];
  for (let n = 1 + (rnd() % 6); n > 0; n--) {
    const h = Buffer.alloc(48);
    const itt = rnd() % 4 === 0 ? 0xffffffff : rnd() % 64;
    h.writeUInt32BE(itt, 16);
    h.writeUInt32BE(cmdSN, 24);
    let data = Buffer.alloc(0);
    switch (rnd() % 8) {
      case 0:
      case 1: {
        // SCSI Command: READ/WRITE(10), TEST UNIT READY, INQUIRY, or random CDB bytes, immediate data now and then.
        h[0] = 0x01 | (rnd() % 5 === 0 ? 0x40 : 0);
        h[1] = (rnd() % 4 === 0 ? 0 : 0x80) | [0x40, 0x20, 0x60, 0][rnd() % 4]! | (rnd() % 8);
        h[9] = rnd() % 6 === 0 ? rnd() & 0xff : 0;
        h.writeUInt32BE(rnd() % 3 === 0 ? EXTREMES[rnd() % EXTREMES.length]! >>> 0 : 512 * (1 + (rnd() % 16)), 20);
        const cdb = [[0x28], [0x2a], [0x00], [0x12, 0, 0, 0, 0xff], [0x35], [rnd() & 0xff]][rnd() % 6]!;
        Buffer.from(cdb).copy(h, 32);
        if (cdb[0] === 0x28 || cdb[0] === 0x2a) {
          h.writeUInt32BE(rnd() % 4 === 0 ? rnd() >>> 0 : rnd() % 2048, 34);
          h.writeUInt16BE(rnd() % 4 === 0 ? rnd() & 0xffff : 1 + (rnd() % 16), 39);
        }
        if (rnd() % 2 === 0) data = Buffer.alloc(rnd() % 9000, rnd() & 0xff);
        cmdSN = (cmdSN + 1) >>> 0;
        break;
      }
      case 2: // Data-Out for a transfer that may or may not exist
        h[0] = 0x05;
        h[1] = rnd() % 2 === 0 ? 0x80 : 0;
        h.writeUInt32BE(rnd() % 8, 20); // TTT
        h.writeUInt32BE(rnd() % 4, 36); // DataSN
        h.writeUInt32BE(rnd() % 3 === 0 ? EXTREMES[rnd() % EXTREMES.length]! >>> 0 : 512 * (rnd() % 8), 40); // buffer offset
        data = Buffer.alloc(rnd() % 4096, 0x33);
        break;
      case 3: // NOP-Out, pinging or answering a ping
        h[0] = 0x00 | (rnd() % 2 === 0 ? 0x40 : 0);
        h[1] = 0x80;
        h.writeUInt32BE(rnd() % 2 === 0 ? 0xffffffff : rnd() >>> 0, 20);
        data = Buffer.alloc(rnd() % 600, 0x44);
        break;
      case 4: // Text: SendTargets, or keys it must not take in full feature phase
        h[0] = 0x04;
        h[1] = rnd() % 3 === 0 ? 0x40 : 0x80;
        h.writeUInt32BE(0xffffffff, 20);
        data = Buffer.from(['SendTargets=All\0', 'MaxRecvDataSegmentLength=512\0', 'X-y=z\0', 'garbage'][rnd() % 4]!);
        break;
      case 5: // Task management: any function, referencing any task
        h[0] = 0x02 | 0x40;
        h[1] = 0x80 | (rnd() % 16);
        h.writeUInt32BE(rnd() % 64, 20);
        break;
      case 6: // Logout, any reason
        h[0] = 0x06 | (rnd() % 2 === 0 ? 0x40 : 0);
        h[1] = 0x80 | (rnd() % 4);
        break;
      default: // SNACK, or an opcode no initiator sends
        h[0] = [0x10, 0x1c, 0x03, 0x3f, rnd() & 0x3f][rnd() % 5]!;
        h[1] = rnd() & 0xff;
        break;
    }
    h.writeUInt32BE(0, 28);
    const bytes = framePdu(h, data);
    out.push(rnd() % 10 < 3 ? mutateBytes((n) => rnd() % n, bytes, EXTREMES) : bytes);
  }
  return Buffer.concat(out);
}

test.serial(`${CASES} mutated logins and ${CASES} runs of mutated full-feature PDUs end only their own connections; a healthy session beside them sees no error`, async (t) => {
  t.timeout(240_000);
  const size = 1 << 20;
  const f = await startIscsi(
    [
      { name: 'vol0', lun: 0, size },
      { name: 'kept', lun: 1, size, acl: { [HEALTHY]: 'rw' } },
    ],
    { maxSessions: 64, preLoginConnections: 64 },
  );
  t.teardown(() => f.close());
  const before = resources().fds;
  const pattern = Buffer.alloc(size);
  for (let i = 0; i < size; i++) pattern[i] = (i * 13 + (i >> 9)) & 0xff;
  await f.backends[1]!.backend.write(pattern, 0);

  const keeper = await RawInitiator.open(f.port);
  t.is(loginStatus((await keeper.login({ initiator: HEALTHY, target: IQN }))!), 0);
  keeper.command({ itt: 0xfff0, cdb: Buffer.alloc(16), edtl: 0, lun: 1 }); // the new nexus's 29/00
  t.truthy(await keeper.next(0x21));
  let stop = false;
  const seen = { ops: 0, errors: [] as string[] };
  const beside = (async () => {
    for (let i = 0; !stop; i++) {
      const lba = i % 1024; // the LUN's first half; the second keeps the pattern
      // Write a block of its own (the last pattern byte changed), then read it back.
      const data = Buffer.alloc(512, (i * 5 + 3) & 0xff);
      const write10 = Buffer.from([0x2a, 0, 0, 0, (lba >> 8) & 0xff, lba & 0xff, 0, 0, 1, 0]);
      keeper.command({ itt: 2 * i + 1, cdb: write10, write: true, edtl: 512, lun: 1, data });
      const w = await keeper.next(0x21);
      const read10 = Buffer.from([0x28, 0, 0, 0, (lba >> 8) & 0xff, lba & 0xff, 0, 0, 1, 0]);
      keeper.command({ itt: 2 * i + 2, cdb: read10, read: true, edtl: 512, lun: 1 });
      const r = await keeper.next(0x25);
      if (w === null || r === null) {
        seen.errors.push(`op ${i}: the session closed`);
        return;
      }
      if (w.bhs[3] !== 0 || r.bhs[3] !== 0 || !r.data.equals(data)) seen.errors.push(`op ${i}: write status ${w.bhs[3]}, read status ${r.bhs[3]}, data ${r.data.equals(data) ? 'equal' : 'differs'}`);
      seen.ops++;
    }
  })();

  const rnd = prng(0x15c52);
  for (let round = 0; round < CASES; round++) {
    const c = await RawInitiator.open(f.port);
    c.socket.write(loginCase(rnd, round));
    await Promise.race([c.whenClosed, new Promise((r) => setTimeout(r, 5))]);
    c.close();
  }
  for (let round = 0; round < CASES; round++) {
    const c = await RawInitiator.open(f.port);
    const ok = await c.login({ initiator: `${INITIATOR}-ffp-${round}`, target: IQN });
    if (ok === null || loginStatus(ok) !== 0) {
      seen.errors.push(`round ${round}: a well-formed login was refused`);
      c.close();
      continue;
    }
    c.socket.write(fullFeatureCase(rnd, c.cmdSN));
    await Promise.race([c.whenClosed, new Promise((r) => setTimeout(r, 5))]);
    c.close();
  }
  stop = true;
  await beside;

  t.log(`the healthy session made ${seen.ops} write+read pairs beside the fuzz; the portal logged ${f.log.length} lines`);
  t.deepEqual(seen.errors.slice(0, 5), [], 'the healthy session (or a well-formed login) saw an error');
  t.true(seen.ops > 0);
  // The pattern beyond the blocks the healthy session wrote is intact: nothing fuzzed reached its LUN.
  const kept = Buffer.alloc(size / 2);
  await f.backends[1]!.backend.read(kept, size / 2);
  t.true(kept.equals(pattern.subarray(size / 2)), 'the healthy LUN was touched by no fuzzed session');
  keeper.close();
  for (let i = 0; i < 250 && (f.server.sessions.size > 0 || resources().fds > before); i++) await new Promise((r) => setTimeout(r, 20));
  t.is(f.server.sessions.size, 0, 'every session ended');
  t.true(resources().fds <= before, `fds ${resources().fds} > ${before}`);
  t.deepEqual(f.log.filter((l) => l.level === 'error').map((l) => l.message).slice(0, 5), [], 'the portal logged no error');
});
