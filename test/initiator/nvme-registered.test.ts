// Registered buffers over NVMe/TCP (initiator/nvme/session.ts allocate,
// volume.ts read/write): the Volume API's registered-buffer calls against the
// real rblkd, reads landing in the caller's memory (views at an offset, more
// than one command, with digests and with SQ flow control off), writes from it
// reaching the volume file, and release making every use fail
// BUFFER_RELEASED (docs/nvme.md "Registered buffers").
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { connectNvme, RblkError } from '../../initiator/index.js';
import { checkSuiteResources } from '../helpers/resources.js';
import { startNvmeDaemon } from './helpers/nvme-daemon.js';
import { fileBytes } from '../daemon/helpers/daemon-process.js';

checkSuiteResources(test);

for (const query of ['', '?digest=header,data', '?sqflow=off']) {
  test(`reads into and writes from registered memory${query ? ` (${query.slice(1)})` : ''}`, async (t) => {
    const dmn = await startNvmeDaemon(t);
    const s = await connectNvme(dmn.url(query));
    t.teardown(() => s.close());
    const vol = await s.open(1);
    // 384 KiB: more than MDTS (128 KiB here), so three commands each way, the writes by R2T.
    const size = 384 * 1024;
    const reg = vol.allocate(size);
    t.is(reg.length, size);
    const data = randomBytes(size);
    data.copy(reg.buffer);
    await vol.write(4096, reg);
    t.true(fileBytes(dmn.file, 4096, size).equals(data), 'the registered bytes are in the volume file');

    const back = s.allocate(size + 8192);
    back.buffer.fill(0xee);
    const view = back.buffer.subarray(4096, 4096 + size);
    const r = await vol.read(4096, view);
    t.is(r.buffer, back.buffer.buffer, 'the result is the caller memory');
    t.true(view.equals(data));
    t.true(back.buffer.subarray(0, 4096).equals(Buffer.alloc(4096, 0xee)), 'nothing written before the view');
    t.true(back.buffer.subarray(4096 + size).equals(Buffer.alloc(4096, 0xee)), 'nothing written after it');

    // A signal does not make a read into registered memory go through a copy: it is filled.
    const small = s.allocate(8192);
    await vol.read(4096, small, { signal: new AbortController().signal });
    t.true(small.buffer.equals(data.subarray(0, 8192)));
    // A view of registered memory as the data of a write, in the capsule (4 KiB).
    await vol.write(0, small.buffer.subarray(0, 4096), { fua: true });
    t.true(fileBytes(dmn.file, 0, 4096).equals(data.subarray(0, 4096)));
  });
}

test('released memory: read, write and a view of it fail BUFFER_RELEASED, and close releases the rest', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const s = await connectNvme(dmn.url());
  const vol = await s.open(1);
  const reg = s.allocate(8192);
  reg.buffer.fill(7);
  await vol.write(0, reg);
  const view = reg.buffer.subarray(4096);
  reg.release();
  t.false(reg.valid);
  for (const p of [vol.read(0, reg), vol.read(0, view), vol.write(0, reg), vol.write(0, view)]) {
    const e = await t.throwsAsync(p, { instanceOf: RblkError });
    t.is(e?.code, 'BUFFER_RELEASED');
  }
  t.true(fileBytes(dmn.file, 0, 8192).equals(Buffer.alloc(8192, 7)), 'nothing was written from the released memory');
  const kept = s.allocate(4096);
  await s.close();
  t.false(kept.valid, 'session.close() releases what it handed out');
  t.is((t.throws(() => s.allocate(4096), { instanceOf: RblkError }) as RblkError).code, 'CONNECTION_LOST');
  t.throws(() => s.allocate(0), { instanceOf: RangeError });
});
