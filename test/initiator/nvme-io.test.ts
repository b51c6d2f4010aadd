// The rblk library as an NVMe/TCP host (initiator/nvme/) against the real
// rblkd's nvme-tcp listener: bytes written, read back and compared, and
// found in the volume's file; FUA writes and Flush; Dataset Management
// deallocate and Write Zeroes reading back as zeroes on a thin file; an
// LBA beyond the namespace rejected with a typed error; digests; bad URLs
// and unknown namespaces refused with typed errors (docs/nvme.md "The rblk
// library as an NVMe/TCP host").
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { connect, connectNvme, hasCode, type RblkError } from '../../initiator/index.js';
import { buildSqe, IoOpcode } from '../../protocol/nvme/command.js';
import { checkSuiteResources } from '../helpers/resources.js';
import { startNvmeDaemon } from './helpers/nvme-daemon.js';
import { fileBytes } from '../daemon/helpers/daemon-process.js';

checkSuiteResources(test);

test('write, read back and compare, in-capsule and by R2T, with the bytes in the volume file', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const s = await connect(`nvme+tcp://127.0.0.1:${dmn.port}/nqn.2026-12.io.rblk:host-test`);
  t.teardown(() => s.close());
  const vol = await s.open(1);
  t.is(vol.size, 16 * 1024 * 1024);
  t.is(vol.blockSize, 512);
  t.false(vol.readOnly);
  t.true(vol.canDiscard);
  t.regex(vol.uuid ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'the UUID from the descriptor list (CNS 03h)');
  t.regex(vol.nguid, /^[0-9a-f]{32}$/);
  t.not(vol.nguid, '0'.repeat(32));
  t.is(s.paths[0].ioQueues, 4, 'min(4, granted) I/O queues');
  const small = randomBytes(4096);
  const big = randomBytes(384 * 1024); // more than MDTS (128 KiB here): split into three commands, each by R2T
  await vol.write(0, small);
  await vol.write(1 << 20, big);
  t.true((await vol.read(0, small.length)).equals(small));
  t.true((await vol.read(1 << 20, big.length)).equals(big));
  const into = Buffer.alloc(4096);
  await vol.readInto(0, into);
  t.true(into.equals(small));
  t.true(fileBytes(dmn.file, 1 << 20, big.length).equals(big), 'the bytes are in the volume file');
  // rblkd lists the admin queue and the four I/O queues under this host's NQN.
  const sessions = await dmn.sessions();
  t.is(sessions.length, 5);
  t.true(sessions.every((x) => x.initiator === s.hostnqn));
});

test('FUA writes and Flush complete, and the data is on the file after them', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const s = await connectNvme(dmn.url('?digest=header,data'));
  t.teardown(() => s.close());
  const vol = await s.open('1');
  const data = randomBytes(64 * 1024);
  await vol.write(8192, data, { fua: true });
  t.true(fileBytes(dmn.file, 8192, data.length).equals(data), 'a FUA write is on the file when it resolves');
  const more = randomBytes(8192);
  await vol.write(0, more);
  await vol.flush();
  t.true(fileBytes(dmn.file, 0, more.length).equals(more));
  t.true((await vol.read(8192, data.length)).equals(data), 'read back with header and data digests');
  t.is(s.paths[0].completedBySuccessFlag, 0, 'SQ flow control on: every command has its CapsuleResp');
});

test('SQ flow control disabled (?sqflow=off): reads complete by the C2HData SUCCESS flag, with and without digests', async (t) => {
  const dmn = await startNvmeDaemon(t);
  for (const q of ['?sqflow=off', '?sqflow=off&digest=header,data']) {
    const s = await connectNvme(dmn.url(q));
    const vol = await s.open(1);
    const data = randomBytes(192 * 1024);
    await vol.write(0, data);
    t.true((await vol.read(0, data.length)).equals(data), q);
    t.true((await vol.read(4096, 4096)).equals(data.subarray(4096, 8192)), q);
    t.true(s.paths[0].completedBySuccessFlag >= 3, `${q}: reads completed by SUCCESS (${s.paths[0].completedBySuccessFlag})`);
    await vol.flush();
    await s.close();
  }
});

test('discard (Dataset Management deallocate) and writeZeroes read back as zeroes on a thin file', async (t) => {
  const dmn = await startNvmeDaemon(t, { thin: true });
  const s = await connectNvme(dmn.url());
  t.teardown(() => s.close());
  const vol = await s.open(1);
  const data = randomBytes(256 * 1024);
  await vol.write(0, data);
  await vol.discard(64 * 1024, 128 * 1024);
  const back = await vol.read(0, data.length);
  t.true(back.subarray(0, 64 * 1024).equals(data.subarray(0, 64 * 1024)), 'before the range: untouched');
  t.true(back.subarray(64 * 1024, 192 * 1024).equals(Buffer.alloc(128 * 1024)), 'the deallocated range reads as zeroes');
  t.true(back.subarray(192 * 1024).equals(data.subarray(192 * 1024)), 'after the range: untouched');
  t.true(fileBytes(dmn.file, 64 * 1024, 128 * 1024).equals(Buffer.alloc(128 * 1024)));
  await vol.write(0, data);
  await vol.writeZeroes(4096, 8192, { unmap: true });
  await vol.writeZeroes(32768, 4096);
  const z = await vol.read(0, 64 * 1024);
  t.true(z.subarray(4096, 12288).equals(Buffer.alloc(8192)));
  t.true(z.subarray(32768, 36864).equals(Buffer.alloc(4096)));
  t.true(z.subarray(12288, 32768).equals(data.subarray(12288, 32768)));
});

test('an LBA beyond the namespace: RangeError before sending, LBA_OUT_OF_RANGE from the controller', async (t) => {
  const dmn = await startNvmeDaemon(t, { size: '1MiB' });
  const s = await connectNvme(dmn.url());
  t.teardown(() => s.close());
  const vol = await s.open(1);
  await t.throwsAsync(vol.read(vol.size, 512), { instanceOf: RangeError });
  await t.throwsAsync(vol.write(vol.size - 512, Buffer.alloc(1024)), { instanceOf: RangeError });
  // The same Read sent anyway: SLBA = NSZE, past the end (NVM 1.0 §3.2.4).
  const sqe = buildSqe({ opcode: IoOpcode.Read, cid: 0, nsid: 1, cdw: { 10: vol.size / 512, 12: 0 } });
  const e = await t.throwsAsync(vol.command({ sqe, readLength: 512 }, 'read past the end'));
  t.true(hasCode(e, 'LBA_OUT_OF_RANGE'), String(e));
  t.deepEqual((e as RblkError).nvme, { sct: 0, sc: 0x80, dnr: true });
  // The session goes on.
  t.is((await vol.read(0, 512)).length, 512);
  t.is(s.reconnects, 0);
  // AbortSignal, as on the SCSI Volume: aborted before the call, nothing is sent.
  const aborted = AbortSignal.abort();
  await t.throwsAsync(vol.write(0, Buffer.alloc(512, 9), { signal: aborted }), { name: 'AbortError' });
  await t.throwsAsync(vol.flush({ signal: aborted }), { name: 'AbortError' });
  t.true((await vol.read(0, 512)).equals(Buffer.alloc(512)), 'the aborted write was never sent');
  const into = Buffer.alloc(512, 1);
  await vol.read(0, into, { signal: new AbortController().signal });
  t.true(into.equals(Buffer.alloc(512)), 'a read with a live signal fills the buffer');
});

test('an unknown namespace, a volume name and a wrong subsystem are refused with typed errors', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const s = await connectNvme(dmn.url());
  t.teardown(() => s.close());
  t.true(hasCode(await t.throwsAsync(s.open(7)), 'INVALID'));
  t.true(hasCode(await t.throwsAsync(s.open('vol')), 'INVALID'));
  t.deepEqual((await s.namespaces()).map((n) => n.nsid), [1]);
  const e = await t.throwsAsync(connectNvme(`nvme+tcp://127.0.0.1:${dmn.port}/nqn.2026-12.io.rblk:nobody`, { timeouts: { connectMs: 5000 } }));
  t.true(hasCode(e, 'LOGIN_FAILED'), String(e));
  t.regex(e!.message, /Connect Invalid Parameters/);
  await t.throwsAsync(connectNvme('nvme+tcp://127.0.0.1:1/not-an-nqn'), { instanceOf: RangeError });
});

test('an O_DIRECT volume: reads, in-capsule and R2T writes, and Verify, through page-aligned memory', async (t) => {
  // rblkd's NVMe front end once handed the backend plain Buffers, which O_DIRECT refuses (EINVAL: Internal Error).
  const dmn = await startNvmeDaemon(t, { direct: true, thin: false });
  const s = await connectNvme(dmn.url());
  t.teardown(() => s.close());
  const vol = await s.open(1);
  const small = randomBytes(4096);
  const big = randomBytes(256 * 1024);
  await vol.write(0, small);
  await vol.write(64 * 1024, big, { fua: true });
  t.true((await vol.read(0, small.length)).equals(small));
  t.true((await vol.read(64 * 1024, big.length)).equals(big));
  t.true(fileBytes(dmn.file, 64 * 1024, big.length).equals(big));
  // Verify (NVM 1.0 §3.2.8) reads the blocks itself.
  const verify = buildSqe({ opcode: IoOpcode.Verify, cid: 0, nsid: 1, cdw: { 10: 0, 12: 63 } });
  t.is(await vol.command({ sqe: verify }, 'verify'), null);
});

test('an O_DIRECT volume under concurrent reads: each read gets its own bytes though rblkd sends them from reused scratch slots', async (t) => {
  // rblkd sends a Read's data from its scratch slot and frees the slot only once the socket has written it
  // (target/nvme/io.ts readForSend): a slot reused too early would hand one read another's bytes.
  const dmn = await startNvmeDaemon(t, { direct: true, thin: false, size: '32MiB' });
  for (const query of ['', '?sqflow=off&digest=header,data']) {
    const s = await connectNvme(dmn.url(query), { queueDepth: 32 });
    const vol = await s.open(1);
    const data = randomBytes(16 << 20);
    await vol.write(0, data);
    for (const bs of [4096, 128 * 1024, 1 << 20]) {
      const offsets = Array.from({ length: 96 }, (_, i) => ((i * 7919) % Math.floor(data.length / bs)) * bs);
      const got = await Promise.all(offsets.map((o) => vol.read(o, bs)));
      const bad = offsets.filter((o, i) => !got[i].equals(data.subarray(o, o + bs)));
      t.deepEqual(bad, [], `${bs}-byte reads${query}: every one its own bytes`);
    }
    await s.close();
  }
});
