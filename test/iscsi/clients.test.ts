// rblkd's iSCSI portal driven by real initiators: libiscsi's tools (iscsi-ls,
// iscsi-inq, iscsi-readcapacity16) and qemu-img's iscsi driver, with the
// bytes compared both ways (docs/iscsi.md).
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resources } from '../helpers/resources.js';
import { INITIATOR, IQN, run, startIscsi, type IscsiFixture } from './portal-fixture.js';

const SIZE = 8 << 20;
let f: IscsiFixture;
let dir: string;
let fdsBefore = 0;

test.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rblk-iscsi-'));
  f = await startIscsi([
    { name: 'vol0', lun: 0, size: SIZE },
    { name: 'vol1', lun: 1, size: 1 << 20, blockSize: 4096, readOnly: true },
  ]);
  // Warm-up: a first login loads everything lazily imported, so the fd baseline is steady.
  await run('iscsi-inq', ['-i', INITIATOR, f.url()]);
  fdsBefore = resources().fds;
});

test.after.always(async () => {
  await f?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function contents(i: number, n: number): Promise<Buffer> {
  const b = Buffer.alloc(n);
  await f.backends[i].backend.read(b, 0);
  return b;
}

test.serial('iscsi-ls discovers the target and lists both LUNs with their sizes', async (t) => {
  const r = await run('iscsi-ls', ['-i', INITIATOR, '-s', `iscsi://127.0.0.1:${f.port}`]);
  t.is(r.code, 0, r.stderr);
  t.regex(r.stdout, new RegExp(`Target:${IQN.replace(/\./g, '\\.')} Portal:127\\.0\\.0\\.1:${f.port},1`));
  t.regex(r.stdout, /Lun:0\s+Type:DIRECT_ACCESS \(Size:\d+[Mk]\)/);
  t.regex(r.stdout, /Lun:1\s+Type:DIRECT_ACCESS \(Size:\d+[Mk]\)/);
});

test.serial('iscsi-inq reads standard INQUIRY and the VPD pages', async (t) => {
  const r = await run('iscsi-inq', ['-i', INITIATOR, f.url()]);
  t.is(r.code, 0, r.stderr);
  t.regex(r.stdout, /Peripheral Device Type:DIRECT_ACCESS/);
  t.regex(r.stdout, /Vendor:RBLK/);
  const serial = await run('iscsi-inq', ['-i', INITIATOR, '-e', '1', '-c', '128', f.url()]);
  t.is(serial.code, 0, serial.stderr);
  t.regex(serial.stdout, /Unit Serial Number:\S+/);
});

test.serial('iscsi-readcapacity16 reports each LUN’s blocks and block size', async (t) => {
  const r0 = await run('iscsi-readcapacity16', ['-i', INITIATOR, f.url(0)]);
  t.is(r0.code, 0, r0.stderr);
  t.regex(r0.stdout, new RegExp(`RETURNED LOGICAL BLOCK ADDRESS:${SIZE / 512 - 1}\\b`));
  t.regex(r0.stdout, /LOGICAL BLOCK LENGTH IN BYTES:512/);
  const r1 = await run('iscsi-readcapacity16', ['-i', INITIATOR, f.url(1)]);
  t.regex(r1.stdout, /RETURNED LOGICAL BLOCK ADDRESS:255\b/);
  t.regex(r1.stdout, /LOGICAL BLOCK LENGTH IN BYTES:4096/);
});

test.serial('qemu-img info, and convert to and from the volume with the bytes compared', async (t) => {
  const info = await run('qemu-img', ['info', f.url()]);
  t.is(info.code, 0, info.stderr);
  t.regex(info.stdout, new RegExp(`virtual size: 8 MiB \\(${SIZE} bytes\\)`));

  const src = randomBytes(SIZE);
  writeFileSync(join(dir, 'src.raw'), src);
  // Writes of up to 2 MiB: immediate data, unsolicited Data-Out and R2T-solicited bursts.
  const up = await run('qemu-img', ['convert', '-n', '-f', 'raw', '-O', 'raw', join(dir, 'src.raw'), f.url()]);
  t.is(up.code, 0, up.stderr);
  t.true((await contents(0, SIZE)).equals(src), 'the volume holds what was written');

  const down = await run('qemu-img', ['convert', '-f', 'raw', '-O', 'raw', f.url(), join(dir, 'dst.raw')]);
  t.is(down.code, 0, down.stderr);
  t.true(readFileSync(join(dir, 'dst.raw')).equals(src), 'the bytes read back are the bytes written');
});

test.serial('CRC32C header digests: iscsi-ls and qemu-img negotiate them, and data moves through them intact', async (t) => {
  const before = f.log.filter((l) => /logged in.*HeaderDigest=CRC32C/.test(l.message)).length;
  const ls = await run('iscsi-ls', ['-i', INITIATOR, '-s', `iscsi://127.0.0.1:${f.port}?header_digest=crc32c`]);
  t.is(ls.code, 0, ls.stderr);
  t.regex(ls.stdout, /Lun:0/);
  const opts = `driver=iscsi,transport=tcp,portal=127.0.0.1:${f.port},target=${IQN},lun=0,header-digest=crc32c,initiator-name=${INITIATOR}`;
  const src = randomBytes(1 << 20);
  writeFileSync(join(dir, 'hd.raw'), src);
  const up = await run('qemu-img', ['convert', '-n', '-f', 'raw', '--target-image-opts', join(dir, 'hd.raw'), `driver=raw,file.${opts.replace(/,/g, ',file.')}`]);
  t.is(up.code, 0, up.stderr);
  const down = await run('qemu-img', ['convert', '--image-opts', `driver=raw,file.${opts.replace(/,/g, ',file.')}`, '-O', 'raw', join(dir, 'hd-back.raw')]);
  t.is(down.code, 0, down.stderr);
  t.true(readFileSync(join(dir, 'hd-back.raw')).subarray(0, src.length).equals(src));
  t.true(f.log.filter((l) => /logged in.*HeaderDigest=CRC32C/.test(l.message)).length >= before + 3, 'every one of those sessions ran with header digests');
});

test.serial('a read-only LUN refuses qemu-img writes with a data-protect error', async (t) => {
  writeFileSync(join(dir, 'small.raw'), randomBytes(1 << 20));
  const r = await run('qemu-img', ['convert', '-n', '-f', 'raw', '-O', 'raw', join(dir, 'small.raw'), f.url(1)]);
  t.not(r.code, 0);
  t.true((await contents(1, 1 << 20)).every((b) => b === 0), 'nothing was written');
});

test.serial('a wrong target name is refused with status 0x0203 (not found)', async (t) => {
  const r = await run('iscsi-inq', ['-i', INITIATOR, `iscsi://127.0.0.1:${f.port}/iqn.2026-12.io.rblk:nonesuch/0`]);
  t.not(r.code, 0);
  t.true(f.log.some((l) => /login refused \(status 0x0203\)/.test(l.message)));
});

test.serial('every connection’s fds come back', async (t) => {
  // The sessions above are all logged out; give the sockets' close a turn.
  for (let i = 0; i < 50 && (f.server.sessions.size > 0 || resources().fds > fdsBefore); i++) await new Promise((r) => setTimeout(r, 20));
  t.is(f.server.sessions.size, 0);
  t.true(resources().fds <= fdsBefore, `fds ${resources().fds} > ${fdsBefore}`);
});
