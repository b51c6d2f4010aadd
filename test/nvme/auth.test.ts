// NVMe in-band authentication, DH-HMAC-CHAP (docs/nvme.md "Authentication";
// NVMe Base 2.0 §8.13, TP 8006), against the in-process target with the raw
// host's authenticate() (bench/soak/nvme-raw-host.ts), which is written from
// the message layouts and not from target/ or protocol/nvme/auth.ts.
import test, { type ExecutionContext } from 'ava';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { parseDhchapSecret, transformKey, dhchapResponse } from '../../protocol/nvme/auth.js';
import { FFDHE_PRIMES } from '../../protocol/nvme/ffdhe.js';
import { authenticate, HOST_NQN, RawHost, rwSqe, type Result } from '../../bench/soak/nvme-raw-host.js';
import { startNvme, type NvmeFixture } from './fixture.js';

const SECRET = 'a plain secret of the host, 32 chars';
const OTHER_NQN = 'nqn.2014-08.org.nvmexpress:uuid:6f1b2c9e-0000-4000-8000-0000000000ff';
/** Status field (CQE bytes 14-15): SC bits 8:1, SCT 11:9, DNR bit 15. */
const AUTH_REQUIRED = (0x91 << 1) | (1 << 9) | 0x8000;
const INVALID_HOST = (0x84 << 1) | (1 << 9) | 0x8000;

function dhhc1(key: Buffer, transform: number): string {
  const crc = Buffer.alloc(4);
  crc.writeUInt32LE(crc32(key) >>> 0, 0);
  return `DHHC-1:0${transform}:${Buffer.concat([key, crc]).toString('base64')}:`;
}

async function start(t: ExecutionContext, secrets: Record<string, string>, required = true, limits = {}): Promise<NvmeFixture> {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }], limits, undefined, { required, secrets });
  t.teardown(() => f.close());
  return f;
}

async function connectAdmin(t: ExecutionContext, f: NvmeFixture, hostnqn = HOST_NQN): Promise<{ h: RawHost; connect: Result }> {
  const h = await RawHost.open(f.port);
  t.teardown(() => h.close());
  await h.initialize();
  const connect = await h.connect({ qid: 0, sqsize: 32, subnqn: f.nqn, hostnqn });
  return { h, connect };
}

function noErrors(t: ExecutionContext, f: NvmeFixture): void {
  t.deepEqual(
    f.log.lines.filter((l) => l.level === 'error').map((l) => l.message),
    [],
    'nothing logged at error level',
  );
  t.false(
    f.log.lines.some((l) => JSON.stringify(l).includes(SECRET)),
    'the secret is never logged',
  );
}

test('Connect sets AUTHREQ.ATR (DW0 bit 17); before authentication only Authentication Send/Receive run', async (t) => {
  const f = await start(t, { [HOST_NQN]: SECRET });
  const { h, connect } = await connectAdmin(t, f);
  t.is(connect.statusField, 0);
  t.is(connect.dw0 >>> 16, 0b10, 'AUTHREQ: ATR only');
  t.deepEqual([...f.server.sessions].map((s) => s.info().state), ['authenticating'], 'ctl sessions shows the queue authenticating');
  t.is((await h.propertyGet(0x00, true)).statusField, AUTH_REQUIRED, 'Property Get: Authentication Required');
  t.is((await h.propertySet(0x14, 1)).statusField, AUTH_REQUIRED);
  t.is((await h.admin(0x06, { length: 4096, cdw: { 10: 1 } })).statusField, AUTH_REQUIRED, 'Identify: Authentication Required');
  noErrors(t, f);
});

test('NULL DH and ffdhe2048 with SHA-256 and SHA-512, ffdhe8192 with SHA-384; R1 pinned by a known-answer computation', async (t) => {
  const f = await start(t, { [HOST_NQN]: SECRET });
  for (const [hash, group] of [
    [1, 0],
    [3, 0],
    [1, 1],
    [3, 1],
    [2, 5],
  ]) {
    const { h } = await connectAdmin(t, f);
    const a = await authenticate(h, { key: Buffer.from(SECRET), subnqn: f.nqn, hashes: [hash], dhGroups: [group], tid: 0x1234 });
    t.is(a.result, 'success', `hash ${hash} group ${group}`);
    // The Challenge as sent: HASHID byte 8, DHGID byte 9, HL 6.
    t.is(a.challenge[8], hash);
    t.is(a.challenge[9], group);
    const name = ['', 'sha256', 'sha384', 'sha512'][hash];
    const hl = [0, 32, 48, 64][hash];
    t.is(a.challenge[6], hl);
    t.is(a.challenge.readUInt16LE(10), [0, 256, 384, 512, 768, 1024][group], 'DHVLEN: the prime\'s size');
    // R1 = HMAC(Kh, C1 || S1 || T_ID || SC_C || "HostHost" || NQNh || 00h || NQNc), C1 augmented with a DH group.
    let c1 = a.challenge.subarray(16, 16 + hl);
    if (group !== 0) c1 = createHmac(name, createHash(name).update(a.sharedSecret!).digest()).update(c1).digest();
    const input = Buffer.concat([c1, a.challenge.subarray(12, 16), Buffer.from([0x34, 0x12, 0x00]), Buffer.from('HostHost'), Buffer.from(HOST_NQN), Buffer.from([0]), Buffer.from(f.nqn)]);
    const r1 = createHmac(name, Buffer.from(SECRET)).update(input).digest();
    t.deepEqual(a.reply!.subarray(16, 16 + hl), r1, 'the R1 the raw host sent is the spec formula');
    t.is(a.success1![8], 0, 'no RVALID without a C2');
    t.is((await h.propertyGet(0x00, true)).statusField, 0, 'authenticated: Property Get runs');
  }
  noErrors(t, f);
});

test('a DHHC-1 secret with a SHA-256 transform, bidirectional over ffdhe2048, and an authenticated I/O queue', async (t) => {
  const key = randomBytes(32);
  const f = await start(t, { [HOST_NQN]: dhhc1(key, 1) });
  const { h, connect } = await connectAdmin(t, f);
  const cntlid = connect.dw0 & 0xffff;
  const a = await authenticate(h, { key, transform: 1, subnqn: f.nqn, hashes: [3, 1], dhGroups: [1, 0], controllerKey: key });
  t.is(a.result, 'success', 'the raw host accepted R2 and sent Success2');
  t.is(a.challenge[8], 3, "the host's first choice of hash");
  t.deepEqual(a.hostKey, createHmac('sha256', key).update(HOST_NQN + 'NVMe-over-Fabrics').digest(), "Kh' = HMAC-SHA-256(key, NQNh || \"NVMe-over-Fabrics\")");
  t.is(a.success1![8], 1, 'RVALID');
  t.is((await h.propertySet(0x14, 1 | (6 << 16) | (4 << 20))).statusField, 0);
  // The I/O queue authenticates on its own.
  const io = await RawHost.open(f.port);
  t.teardown(() => io.close());
  await io.initialize();
  const c = await io.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid });
  t.is(c.statusField, 0);
  t.is(c.dw0 >>> 16, 0b10, 'ATR on the I/O queue too');
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512))).statusField, AUTH_REQUIRED, 'a Read before authentication');
  t.is((await authenticate(io, { key, transform: 1, subnqn: f.nqn, dhGroups: [0] })).result, 'success');
  const r = await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512));
  t.is(r.statusField, 0);
  t.is(r.data.length, 512);
  t.true(f.log.lines.some((l) => /authentication succeeded.*bidirectional/.test(l.message)));
  noErrors(t, f);
});

test('a wrong secret gets Failure1 (authentication failed) and the queue does no I/O; a wrong R2 check sends Failure2', async (t) => {
  const f = await start(t, { [HOST_NQN]: SECRET });
  const { h } = await connectAdmin(t, f);
  const a = await authenticate(h, { key: Buffer.from('not the secret'), subnqn: f.nqn, dhGroups: [1] });
  t.is(a.result, 'failure1');
  t.is(a.success1![0], 0x00, 'AUTH_Type: common message');
  t.is(a.success1![1], 0xf1, 'AUTH_Failure1');
  t.is(a.success1![6], 0x01, 'reason: authentication failure');
  t.is(a.explanation, 0x01, 'explanation: authentication failed');
  t.is((await h.propertyGet(0x00, true)).statusField, AUTH_REQUIRED);
  t.true(f.log.lines.some((l) => l.level === 'warn' && /host response does not match/.test(l.message)));
  // The same host may try again on the queue, and succeed.
  t.is((await authenticate(h, { key: Buffer.from(SECRET), subnqn: f.nqn })).result, 'success');
  // A host that expects another controller key rejects R2 with Failure2: the queue stays unauthenticated.
  const { h: h2 } = await connectAdmin(t, f);
  t.is((await authenticate(h2, { key: Buffer.from(SECRET), subnqn: f.nqn, controllerKey: Buffer.from('some other key') })).result, 'failure2-sent');
  t.is((await h2.propertyGet(0x00, true)).statusField, AUTH_REQUIRED);
  noErrors(t, f);
});

test('auth.required: a host without a secret is refused as a wrong secret is; without auth.required it connects unauthenticated', async (t) => {
  const f = await start(t, { [HOST_NQN]: SECRET });
  const { h: stranger, connect } = await connectAdmin(t, f, OTHER_NQN);
  t.is(connect.statusField, 0);
  t.is(connect.dw0 >>> 16, 0b10, 'challenged like any listed host');
  const a = await authenticate(stranger, { key: Buffer.from(SECRET), subnqn: f.nqn, hostnqn: OTHER_NQN });
  t.is(a.result, 'failure1');
  t.is(a.explanation, 0x01, 'the same Failure1 as a wrong secret');
  t.is((await stranger.propertyGet(0x00, true)).statusField, AUTH_REQUIRED);
  t.is((await stranger.admin(0x06, { length: 4096, cdw: { 10: 1 } })).statusField, AUTH_REQUIRED);
  t.true(f.log.lines.some((l) => l.level === 'warn' && /has no secret in auth.initiators/.test(l.message)), 'the log says which');
  const open = await start(t, { [HOST_NQN]: SECRET }, false);
  const { h, connect: c2 } = await connectAdmin(t, open, OTHER_NQN);
  t.is(c2.statusField, 0);
  t.is(c2.dw0 >>> 16, 0, 'no ATR for a host without a secret');
  t.is((await h.propertyGet(0x00, true)).statusField, 0);
  // A DHHC-1 secret whose CRC does not check out refuses the host, without logging the secret.
  const bad = dhhc1(randomBytes(32), 0).replace(/^(DHHC-1:00:)(.)/, (_m, p: string, c: string) => p + (c === 'A' ? 'B' : 'A'));
  const g = await start(t, { [HOST_NQN]: bad });
  t.is((await connectAdmin(t, g)).connect.statusField, INVALID_HOST);
  t.true(g.log.lines.some((l) => /unusable: DHHC-1 secret CRC-32 mismatch/.test(l.message)));
  t.false(g.log.lines.some((l) => JSON.stringify(l).includes(bad)));
});

test('malformed authentication commands and messages: field errors, Failure1 explanations, only that connection ends', async (t) => {
  const f = await start(t, { [HOST_NQN]: SECRET }, true, { loginTimeoutMs: 1500 });
  const { h } = await connectAdmin(t, f);
  const INVALID_FIELD = (0x02 << 1) | 0x8000;
  t.is((await h.authSend(Buffer.alloc(16), { secp: 0xea })).statusField, INVALID_FIELD, 'SECP other than E9h');
  t.is((await h.authReceive(64, { secp: 0 })).statusField, INVALID_FIELD);
  t.is((await h.authReceive(0)).statusField, INVALID_FIELD, 'AL 0');
  // A Receive before any Negotiate: Failure1, incorrect protocol message.
  const early = await h.authReceive(64);
  t.is(early.data[1], 0xf1);
  t.is(early.data[7], 0x07);
  // Negotiate asking for secure channel concatenation, an unknown hash, no DH-HMAC-CHAP descriptor, a short one.
  const negotiate = (edit: (b: Buffer) => void): Buffer => {
    const b = Buffer.alloc(72);
    b[7] = 1;
    b[8] = 1;
    b[10] = 1;
    b[11] = 1;
    b[12] = 1;
    edit(b);
    return b;
  };
  for (const [edit, explanation] of [
    [(b: Buffer) => (b[6] = 1), 0x03],
    [(b: Buffer) => (b[12] = 9), 0x04],
    [(b: Buffer) => (b[42] = 9), 0x05],
    [(b: Buffer) => (b[8] = 2), 0x02],
    [(b: Buffer) => (b[7] = 3), 0x06],
  ] as const) {
    t.is((await h.authSend(negotiate(edit))).statusField, 0);
    const r = await h.authReceive(64);
    t.is(r.data[1], 0xf1);
    t.is(r.data[7], explanation);
  }
  // A Reply with the wrong T_ID and one with the wrong HL.
  for (const tamper of [(b: Buffer) => (b.writeUInt16LE(99, 4), b), (b: Buffer) => ((b[6] = 16), b), (b: Buffer) => b.subarray(0, 20)]) {
    const a = await authenticate(h, { key: Buffer.from(SECRET), subnqn: f.nqn, tamperReply: tamper });
    t.is(a.result, 'failure1');
    t.is(a.explanation, 0x06);
  }
  // A DH value of 0, or one above p - 1 (RFC 7919 §5.1 peer checks): DH group not usable.
  for (const fill of [0x00, 0xff]) {
    const a = await authenticate(h, {
      key: Buffer.from(SECRET),
      subnqn: f.nqn,
      dhGroups: [1],
      tamperReply: (r) => (r.fill(fill, 16 + 2 * 32), fill === 0xff ? (r[r.length - 1] = 0xfe, r) : r),
    });
    t.is(a.explanation, 0x05);
  }
  // Random messages: every one answered, never a crash.
  for (let i = 0; i < 200; i++) {
    const m = randomBytes(1 + (i % 90));
    if (i % 3 === 0) m[0] = i % 2;
    const s = await h.authSend(m);
    t.is(s.statusField, 0);
    if (i % 4 === 0) t.is((await h.authReceive(2048)).statusField, 0);
  }
  t.is((await h.propertyGet(0x00, true)).statusField, AUTH_REQUIRED);
  // Not authenticated within login_timeout_ms of the Connect: that connection ends, the target serves on.
  t.true(await h.waitClosed(5000));
  const { h: ok } = await connectAdmin(t, f);
  t.is((await authenticate(ok, { key: Buffer.from(SECRET), subnqn: f.nqn, dhGroups: [2] })).result, 'success');
  noErrors(t, f);
});

test('codec known answers: DHHC-1 parsing, key transforms with each NQN, R1 and R2 inputs', (t) => {
  const key = Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex');
  const k = parseDhchapSecret(dhhc1(key, 2));
  t.deepEqual(k, { key, transform: 2 });
  t.deepEqual(parseDhchapSecret('plain'), { key: Buffer.from('plain'), transform: 0 });
  t.throws(() => parseDhchapSecret('DHHC-1:04:AAAA:'));
  t.throws(() => parseDhchapSecret('DHHC-1:00:' + Buffer.alloc(20).toString('base64') + ':'));
  t.deepEqual(transformKey(k, 'nqn.h'), createHmac('sha384', key).update('nqn.hNVMe-over-Fabrics').digest());
  const c = Buffer.alloc(32, 7);
  const r2 = dhchapResponse({ hash: 'sha256', key, challenge: c, seqnum: 0x01020304, tid: 5, scc: 0, role: 'controller', hostnqn: 'nqn.h', subnqn: 'nqn.c' });
  const want = createHmac('sha256', key)
    .update(Buffer.concat([c, Buffer.from([4, 3, 2, 1, 5, 0, 0]), Buffer.from('Controller'), Buffer.from('nqn.c'), Buffer.from([0]), Buffer.from('nqn.h')]))
    .digest();
  t.deepEqual(r2, want);
});

test('the ffdhe primes are RFC 7919 §A: p = 2^b - 2^(b-64) + (floor(2^(b-130) e) + X) * 2^64 - 1', (t) => {
  const X = { 2048: 560316n, 3072: 2625351n, 4096: 5736041n, 6144: 15705020n, 8192: 10965728n } as const;
  for (const b of [2048, 3072, 4096, 6144, 8192] as const) {
    const B = BigInt(b);
    const prec = B + 64n;
    // e to prec fraction bits: the sum of 1/k!.
    let e = 0n;
    for (let k = 1n, term = 1n << prec; term > 0n; k++) {
      e += term;
      term /= k;
    }
    const p = (1n << B) - (1n << (B - 64n)) + (((e << (B - 130n)) >> prec) + X[b]) * (1n << 64n) - 1n;
    t.is(p, BigInt(`0x${FFDHE_PRIMES[b]}`), `ffdhe${b}`);
  }
});
