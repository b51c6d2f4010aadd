// Every typed error, produced by a real target (not a mock): the SCSI verdicts
// the target sends back, and login failures.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { connect, MiscompareError, RblkError, ReservationType, type RblkErrorCode, type Volume } from '../../initiator/index.js';
import { gated, INITIATOR, pattern, startServer, TARGET_NAME, type TestTarget } from './helpers/target.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const MiB = 1 << 20;

async function open(t: import('ava').ExecutionContext, target: TestTarget, name: string, extra = {}): Promise<Volume> {
  const s = await connect(target.options(extra));
  t.teardown(() => s.close());
  return s.open(name);
}

async function rejects(t: import('ava').ExecutionContext, p: Promise<unknown>, code: RblkErrorCode, message: string): Promise<RblkError | undefined> {
  const e = await t.throwsAsync(p, { instanceOf: RblkError, message });
  t.is(e?.code, code);
  return e;
}

test('LBA_OUT_OF_RANGE: the target shrank and the initiator has not heard yet', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, size: 2 * MiB }]);
  t.teardown(() => target.close());
  const vol = await open(t, target, 'vol0');
  const backend = gated(target, 'vol0');
  // The medium shrinks without a capacity-changed unit attention.
  backend.inner.resize(MiB);
  await backend.refreshSize();
  t.is(vol.size, 2 * MiB);
  const e = await rejects(t, vol.write(MiB, Buffer.alloc(512)), 'LBA_OUT_OF_RANGE', `write [${MiB}, +512) on volume vol0: ILLEGAL REQUEST 21/00 LOGICAL BLOCK ADDRESS OUT OF RANGE`);
  t.is(e?.status, 0x02);
  t.like(e?.sense, { key: 5, asc: 0x21, ascq: 0 });
  const resized = new Promise<[number, number]>((r) => vol.once('resize', (size, previous) => r([size, previous])));
  t.is(await vol.capacity(), MiB);
  t.deepEqual(await resized, [MiB, 2 * MiB]);
  await t.throwsAsync(vol.write(MiB, Buffer.alloc(512)), { instanceOf: RangeError });
});

test('WRITE_PROTECTED: a read-only volume, and read-only access by ACL', async (t) => {
  const target = await startServer('loop', [
    { name: 'ro', lun: 0, size: MiB, readOnly: true },
    { name: 'acl', lun: 1, size: MiB, acl: { [INITIATOR]: 'ro' } },
  ]);
  t.teardown(() => target.close());
  const ro = await open(t, target, 'ro');
  t.true(ro.readOnly);
  await rejects(t, ro.write(0, Buffer.alloc(4096)), 'WRITE_PROTECTED', 'write [0, +4096) on volume ro: DATA PROTECT 27/00 WRITE PROTECTED');
  t.true((await ro.read(0, 512)).equals(Buffer.alloc(512)), 'reads still work');
  const acl = await open(t, target, 'acl');
  t.true(acl.readOnly);
  await rejects(t, acl.writeZeroes(0, 512), 'WRITE_PROTECTED', 'writeZeroes [0, +512) on volume acl: DATA PROTECT 27/00 WRITE PROTECTED');
});

test('MISCOMPARE: COMPARE AND WRITE reports the first differing byte and writes nothing', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, size: MiB, limits: { maxCompareAndWriteBlocks: 2 } }]);
  t.teardown(() => target.close());
  const vol = await open(t, target, 'vol0');
  const current = pattern(1024, 1);
  await vol.write(4096, current);
  const expected = Buffer.from(current);
  expected[700] ^= 0xff;
  const next = pattern(1024, 2);
  const e = await t.throwsAsync(vol.compareAndWrite(4096, expected, next), { instanceOf: MiscompareError });
  t.is(e?.code, 'MISCOMPARE');
  t.is(e?.offset, 700);
  t.is(e?.message, 'compareAndWrite [4096, +1024) on volume vol0: MISCOMPARE 1D/00 MISCOMPARE DURING VERIFY OPERATION');
  t.true((await vol.read(4096, 1024)).equals(current), 'nothing was written');
  await vol.compareAndWrite(4096, current, next);
  t.true((await vol.read(4096, 1024)).equals(next), 'a full match writes');
});

test('BUSY: retried busyRetries times, then reported', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, size: MiB }]);
  t.teardown(() => target.close());
  const vol = await open(t, target, 'vol0', { busyRetries: 2 });
  const backend = gated(target, 'vol0');
  backend.fail('write', 'EBUSY');
  backend.calls.length = 0;
  const e = await rejects(t, vol.write(0, Buffer.alloc(512)), 'BUSY', 'write [0, +512) on volume vol0: the target stayed BUSY');
  t.is(e?.status, 0x08);
  t.is(backend.calls.filter((c) => c.op === 'write').length, 3, 'one try and two retries');
  // A transient BUSY is absorbed.
  backend.calls.length = 0;
  const w = vol.write(0, Buffer.alloc(512, 9));
  await new Promise((r) => setTimeout(r, 5));
  backend.heal('write');
  await w;
  t.true((await vol.read(0, 512)).equals(Buffer.alloc(512, 9)));
});

test('MEDIUM_ERROR, NO_SPACE and IO_ERROR from the backend errno, NOT_SUPPORTED and INVALID from the SCSI core', async (t) => {
  const target = await startServer('loop', [
    { name: 'vol0', lun: 0, size: MiB },
    { name: 'thick', lun: 1, size: MiB, thin: false },
  ]);
  t.teardown(() => target.close());
  const vol = await open(t, target, 'vol0');
  const backend = gated(target, 'vol0');
  backend.fail('read', 'EIO');
  await rejects(t, vol.read(0, 512), 'MEDIUM_ERROR', 'read [0, +512) on volume vol0: MEDIUM ERROR 11/00 UNRECOVERED READ ERROR');
  backend.heal('read');
  backend.fail('write', 'ENOSPC');
  await rejects(t, vol.write(0, Buffer.alloc(512)), 'NO_SPACE', 'write [0, +512) on volume vol0: DATA PROTECT 27/07 SPACE ALLOCATION FAILED WRITE PROTECT');
  backend.heal('write');
  backend.fail('flush', 'EXDEV');
  await rejects(t, vol.flush(), 'IO_ERROR', 'flush of volume vol0: HARDWARE ERROR 44/00 INTERNAL TARGET FAILURE');
  backend.heal('flush');
  const thick = await open(t, target, 'thick');
  t.false(thick.canDiscard);
  await rejects(t, thick.discard(0, 4096), 'NOT_SUPPORTED', 'discard [0, +4096) on volume thick: ILLEGAL REQUEST 20/00 INVALID COMMAND OPERATION CODE');
  await vol.reservations.register(0x1234n);
  await vol.reservations.reserve(0x1234n, ReservationType.WRITE_EXCLUSIVE);
  await rejects(
    t,
    vol.reservations.release(0x1234n, ReservationType.EXCLUSIVE_ACCESS),
    'INVALID',
    'PERSISTENT RESERVE OUT RELEASE on volume vol0: ILLEGAL REQUEST 26/04 INVALID RELEASE OF PERSISTENT RESERVATION',
  );
});

test('LOGIN_FAILED: an unknown target name, and nothing listening', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, size: MiB }]);
  t.teardown(() => target.close());
  await rejects(
    t,
    connect(target.options({ targetName: 'iqn.2026-11.io.rblk:nope' })),
    'LOGIN_FAILED',
    `cannot log in to iqn.2026-11.io.rblk:nope at ${target.address}:${target.port}: login rejected by the target: it has no target named 'iqn.2026-11.io.rblk:nope' (UNABLE_TO_ASSOCIATE); a target does not tell its name before login: \`rblkd ctl status\` on its host shows it (target_name in rblkd's config; leave target= out for the default, iqn.2026-11.io.rblk:target)`,
  );
  const e = await t.throwsAsync(connect(target.options({ port: target.port + 1000 })), { instanceOf: RblkError });
  t.is(e?.code, 'LOGIN_FAILED');
  t.regex(e?.message ?? '', /^cannot log in to .* cannot connect to loop-initiator-test:\d+: .*FI_ECONNREFUSED/);
});

test('LOGIN_FAILED: a host name that does not resolve says so, not that no libfabric provider fits', async (t) => {
  // .invalid never resolves (RFC 6761 6.4); libfabric's tcp provider reports that as FI_ENODATA from fi_getinfo.
  const e = await t.throwsAsync(connect('rblk://no-such-host.invalid/vol0?provider=tcp', { timeouts: { connectMs: 5000 } }), { instanceOf: RblkError });
  t.is(e?.code, 'LOGIN_FAILED');
  t.regex(e?.message ?? '', /cannot connect to no-such-host\.invalid:7471: cannot resolve host 'no-such-host\.invalid': .* \((ENOTFOUND|EAI_AGAIN|EAI_NONAME)\)$/);
  t.notRegex(e?.message ?? '', /FI_ENODATA|no libfabric provider/);
});

test.serial('AUTH_FAILED and the three places a secret comes from', async (t) => {
  const secret = 'correct horse battery staple';
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, size: MiB }], { authRequired: true, secrets: { [INITIATOR]: secret } });
  t.teardown(() => target.close());
  const saved = process.env.RBLK_SECRET;
  delete process.env.RBLK_SECRET;
  t.teardown(() => {
    if (saved === undefined) delete process.env.RBLK_SECRET;
    else process.env.RBLK_SECRET = saved;
  });
  const where = `${TARGET_NAME} at ${target.address}:${target.port}`;
  await rejects(t, connect(target.options({ secret: 'wrong secret, long enough' })), 'AUTH_FAILED', `cannot log in to ${where}: login rejected by the target: AUTH_FAILED`);
  await rejects(t, connect(target.options()), 'AUTH_FAILED', `cannot log in to ${where}: the target demands authentication and no secret was given`);
  const direct = await connect(target.options({ secret }));
  await direct.close();
  process.env.RBLK_SECRET = secret;
  const fromEnv = await connect(target.options());
  await fromEnv.close();
  delete process.env.RBLK_SECRET;
  const dir = mkdtempSync(join(tmpdir(), 'rblk-secret-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'secret');
  writeFileSync(file, `${secret}\n`, { mode: 0o644 });
  chmodSync(file, 0o644);
  await rejects(t, connect(target.options({ secretFile: file })), 'INVALID', `secret file ${file} has mode 0644; it must be 0600 or stricter (chmod 600 ${file})`);
  chmodSync(file, 0o600);
  const fromFile = await connect(target.options({ secretFile: file }));
  const vol = await fromFile.open('vol0');
  await vol.write(0, Buffer.alloc(512, 1));
  await fromFile.close();
});
