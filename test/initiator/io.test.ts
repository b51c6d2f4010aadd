// The block API against a real in-process target over loop, tcp and sockets:
// discovery, reads and writes on both data paths, splitting, and the
// provisioning commands.
import test from 'ava';
import { connect, RblkError, RegisteredBuffer, type Session } from '../../initiator/index.js';
import { ALL_TRANSPORTS as TRANSPORTS, gated, INITIATOR, pattern, startServer, TARGET_NAME, type TestTarget } from './helpers/target.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const MiB = 1 << 20;

async function setup(kind: (typeof TRANSPORTS)[number], extra: Parameters<TestTarget['options']>[0] = {}): Promise<{ t: TestTarget; s: Session }> {
  const t = await startServer(kind, [
    { name: 'vol0', lun: 0, size: 4 * MiB },
    { name: 'big', lun: 3, size: 8 * MiB, blockSize: 4096, readOnly: true },
    { name: 'thick', lun: 5, size: MiB, thin: false },
    { name: 'shared-ro', lun: 7, size: MiB, acl: { [INITIATOR]: 'ro' } },
    { name: 'small-io', lun: 9, size: MiB, limits: { maxTransferBlocks: 16, optimalTransferBlocks: 16, maxCompareAndWriteBlocks: 4 } },
    { name: 'wide', lun: 11, size: 2 * MiB, blockSize: 4096 },
  ]);
  const s = await connect(t.options(extra));
  return { t, s };
}

for (const kind of TRANSPORTS) {
  test.serial(`${kind}: volumes() reports each volume's name, size, block size, access, serial and id`, async (t) => {
    const { t: target, s } = await setup(kind);
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    const list = await s.volumes();
    t.deepEqual(
      list.map((v) => [v.lun, v.name, v.size, v.blockSize, v.readOnly, v.thin]),
      [
        [0, 'vol0', 4 * MiB, 512, false, true],
        [3, 'big', 8 * MiB, 4096, true, true],
        [5, 'thick', MiB, 512, false, false],
        [7, 'shared-ro', MiB, 512, true, true],
        [9, 'small-io', MiB, 512, false, true],
        [11, 'wide', 2 * MiB, 4096, false, true],
      ],
    );
    for (const v of list) {
      const lu = target.units.get(v.name)!.lu;
      t.is(v.serial, lu.serial);
      t.is(v.id, `naa.${lu.naa.toString('hex')}`);
      t.is(v.vendor, 'RBLK');
    }
    const big = await s.open(3);
    t.is(big.name, 'big');
    t.is(big.size, 8 * MiB);
    t.true(big.readOnly);
    const byName = await s.open('thick');
    t.is(byName.lun, 5);
    t.false(byName.canDiscard);
    const missing = await t.throwsAsync(s.open('nope'), { instanceOf: RblkError });
    t.is(missing?.code, 'INVALID');
    t.is(missing?.message, `no volume named "nope" at ${target.address}:${target.port} (visible: vol0, big, thick, shared-ro, small-io, wide)`);
    const noLun = await t.throwsAsync(s.open(4), { instanceOf: RblkError });
    t.is(noLun?.message, `LUN 4 at ${target.address}:${target.port} holds no volume`);
  });

  test.serial(`${kind}: the copying and the zero-copy paths write and read the same bytes`, async (t) => {
    const { t: target, s } = await setup(kind);
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    const vol = await s.open('vol0');
    const backend = gated(target, 'vol0');
    // Copying path: an ordinary Buffer goes through the I/O pool.
    const a = pattern(256 * 1024, 1);
    await vol.write(64 * 1024, a);
    t.true((await vol.read(64 * 1024, a.length)).equals(a), 'copy write, copy read');
    // Zero-copy read of the same range into registered memory.
    const reg = s.allocate(a.length);
    t.true(reg instanceof RegisteredBuffer);
    const filled = await vol.read(64 * 1024, reg);
    t.is(filled.buffer, reg.buffer.buffer, 'read() hands back the registered memory itself');
    t.true(reg.buffer.equals(a), 'copy write, zero-copy read');
    // Zero-copy write from a view into registered memory, read back both ways.
    const b = pattern(128 * 1024, 2);
    b.copy(reg.buffer, 4096);
    await vol.write(MiB, reg.buffer.subarray(4096, 4096 + b.length));
    t.true((await vol.read(MiB, b.length)).equals(b), 'zero-copy write, copy read');
    const onTarget = Buffer.alloc(b.length);
    await backend.inner.read(onTarget, MiB);
    t.true(onTarget.equals(b), 'the bytes reached the backend');
    const into = Buffer.alloc(b.length);
    t.is(await vol.read(MiB, into), into, 'read() fills the Buffer it was given');
    t.true(into.equals(b));
    // Small writes travel in the capsule; FUA reaches the backend.
    const c = pattern(1024, 3);
    await vol.write(3 * MiB, c, { fua: true });
    t.deepEqual(backend.calls.at(-1), { op: 'write', offset: 3 * MiB, length: 1024, fua: true });
    t.true((await vol.read(3 * MiB, 1024)).equals(c));
    reg.release();
    t.false(reg.valid);
    // 4096-byte blocks: LBAs count 4 KiB units.
    const wide = await s.open('wide');
    const w = pattern(3 * 4096, 11);
    await wide.write(8192, w);
    t.deepEqual(gated(target, 'wide').calls.at(-1), { op: 'write', offset: 8192, length: 3 * 4096, fua: false });
    t.true((await wide.read(8192, w.length)).equals(w));
    await t.throwsAsync(wide.read(512, 4096), { instanceOf: RangeError, message: 'read: offset 512 is not a multiple of the 4096-byte block size' });
  });

  test.serial(`${kind}: I/O larger than the largest transfer is split into pieces that reassemble exactly`, async (t) => {
    const { t: target, s } = await setup(kind, { maxIo: 64 * 1024 });
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    t.is(s.maxTransfer, 64 * 1024);
    const vol = await s.open('vol0');
    t.is(vol.maxTransfer, 64 * 1024);
    const backend = gated(target, 'vol0');
    const data = pattern(600 * 1024, 4);
    backend.calls.length = 0;
    await vol.write(512, data);
    const writes = backend.calls.filter((c) => c.op === 'write').sort((x, y) => x.offset - y.offset);
    t.is(writes.length, 10);
    t.true(writes.every((w) => w.length <= 64 * 1024));
    let at = 512;
    for (const w of writes) {
      t.is(w.offset, at);
      at += w.length;
    }
    t.is(at, 512 + data.length);
    t.true((await vol.read(512, data.length)).equals(data), 'copying path');
    const reg = s.allocate(data.length);
    await vol.read(512, reg);
    t.true(reg.buffer.equals(data), 'zero-copy path');
    reg.release();
    // The volume's own Block Limits (16 blocks) are smaller still.
    const small = await s.open('small-io');
    t.is(small.maxTransfer, 8192);
    const sb = gated(target, 'small-io');
    const d2 = pattern(40 * 1024, 5);
    await small.write(0, d2);
    t.deepEqual(
      sb.calls.filter((c) => c.op === 'write').map((c) => c.length),
      [8192, 8192, 8192, 8192, 8192],
    );
    t.true((await small.read(0, d2.length)).equals(d2));
  });

  test.serial(`${kind}: flush, discard and writeZeroes`, async (t) => {
    const { t: target, s } = await setup(kind);
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    const vol = await s.open('vol0');
    const backend = gated(target, 'vol0');
    const data = pattern(64 * 1024, 6);
    await vol.write(0, data);
    await vol.flush();
    t.is(backend.calls.at(-1)?.op, 'flush');
    await vol.discard(8192, 16384);
    t.deepEqual(backend.calls.at(-1), { op: 'discard', offset: 8192, length: 16384 });
    const afterDiscard = await vol.read(0, data.length);
    t.true(afterDiscard.subarray(8192, 8192 + 16384).equals(Buffer.alloc(16384)), 'discarded blocks read as zeroes');
    t.true(afterDiscard.subarray(0, 8192).equals(data.subarray(0, 8192)), 'the blocks before are untouched');
    t.true(afterDiscard.subarray(24576).equals(data.subarray(24576)), 'the blocks after are untouched');
    await vol.writeZeroes(32768, 4096);
    t.deepEqual(backend.calls.at(-1), { op: 'writeZeroes', offset: 32768, length: 4096 });
    const afterZero = await vol.read(32768, 8192);
    t.true(afterZero.subarray(0, 4096).equals(Buffer.alloc(4096)));
    t.true(afterZero.subarray(4096).equals(data.subarray(36864, 40960)));
    const allocated = backend.inner.allocatedBytes;
    await vol.writeZeroes(0, 64 * 1024, { unmap: true });
    t.true(backend.inner.allocatedBytes < allocated, 'WRITE SAME with UNMAP deallocated');
    t.true((await vol.read(0, 64 * 1024)).equals(Buffer.alloc(64 * 1024)));
  });
}

test.serial('tcp: connect() takes an rblk:// URL and opens its volume', async (t) => {
  const target = await startServer('tcp', [{ name: 'data', lun: 2, size: MiB }]);
  const s = await connect(`rblk://127.0.0.1:${target.port}/data?provider=tcp&target=${TARGET_NAME}&initiator=${INITIATOR}`);
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  t.is(s.options.provider, 'tcp');
  t.is(s.options.initiatorName, INITIATOR);
  const vol = await s.open();
  t.is(vol.name, 'data');
  t.is(vol.lun, 2);
  await vol.write(0, pattern(4096, 7));
  t.true((await vol.read(0, 4096)).equals(pattern(4096, 7)));
  t.is(s.state, 'connected');
  await s.close();
  t.is(s.state, 'closed');
  const late = await t.throwsAsync(vol.read(0, 512), { instanceOf: RblkError });
  t.is(late?.code, 'CONNECTION_LOST');
  t.is(late?.message, 'read [0, +512) on volume data: the session is closed');
});

test.serial('loop: offsets and lengths are checked before anything is sent', async (t) => {
  const { t: target, s } = await setup('loop');
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const vol = await s.open('vol0');
  const backend = gated(target, 'vol0');
  backend.calls.length = 0;
  const cases: [() => Promise<unknown>, string][] = [
    [() => vol.read(100, 512), 'read: offset 100 is not a multiple of the 512-byte block size'],
    [() => vol.read(0, 100), 'read: length 100 is not a multiple of the 512-byte block size'],
    [() => vol.read(-512, 512), 'read: offset -512 is not a non-negative integer'],
    [() => vol.read(0.5, 512), 'read: offset 0.5 is not a non-negative integer'],
    [() => vol.write(4 * MiB - 512, Buffer.alloc(1024)), `write: [${4 * MiB - 512}, +1024) runs past the end of volume vol0 (${4 * MiB} bytes)`],
    [() => vol.discard(4 * MiB, 512), `discard: [${4 * MiB}, +512) runs past the end of volume vol0 (${4 * MiB} bytes)`],
    [() => vol.writeZeroes(0, 513), 'writeZeroes: length 513 is not a multiple of the 512-byte block size'],
    [() => vol.compareAndWrite(0, Buffer.alloc(512), Buffer.alloc(1024)), 'compareAndWrite: expected is 512 bytes and data 1024; they must be equal'],
    [() => vol.compareAndWrite(0, Buffer.alloc(1024), Buffer.alloc(1024)), "compareAndWrite: 2 blocks exceed volume vol0's COMPARE AND WRITE limit of 1 (VPD B0h)"],
    [() => vol.reservations.reserve(1n, 2 as 1), 'reservation type 2 is not one of 1, 3, 5, 6, 7, 8 (SPC-5 table 200)'],
    [() => vol.reservations.register(-1n), 'key -1 is not a 64-bit unsigned bigint'],
  ];
  for (const [run, message] of cases) await t.throwsAsync(run, { instanceOf: RangeError, message });
  t.throws(() => s.allocate(0), { instanceOf: RangeError, message: 'allocate(0): the size must be a positive integer' });
  t.deepEqual(backend.calls, [], 'no command reached the target');
  t.deepEqual(await vol.read(0, 0), Buffer.alloc(0), 'an empty read is a no-op');
});

test.serial('loop: a target with a smaller maxIo than the initiator sets the piece size', async (t) => {
  const target = await startServer('loop', [{ name: 'vol0', lun: 0, size: 2 * MiB }], { maxIo: 128 * 1024 });
  const s = await connect(target.options());
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  t.is(s.maxTransfer, 128 * 1024);
  const vol = await s.open('vol0');
  const data = pattern(MiB, 8);
  await vol.write(0, data);
  t.deepEqual(
    gated(target, 'vol0')
      .calls.filter((c) => c.op === 'write')
      .map((c) => c.length),
    Array(8).fill(128 * 1024),
  );
  t.true((await vol.read(0, MiB)).equals(data));
});
