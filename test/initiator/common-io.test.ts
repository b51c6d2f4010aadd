// The common read and write (initiator/fast-io.ts, docs/initiator.md "The
// common read and write"): registered memory, one command, over tcp, where the
// native queue carries it with one promise per I/O. Whatever is not a plain
// GOOD is taken up by the general path from the answer the queue got: a unit
// attention is absorbed and the command sent again, a CHECK CONDITION is the
// typed error, and more I/O than the target's credits waits its turn.
import test from 'ava';
import { connect, RblkError } from '../../initiator/index.js';
import { TRAIN_VERSION } from '../../protocol/wire/index.js';
import { gated, pattern, startServer } from './helpers/target.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric(['tcp']) });

const MiB = 1 << 20;

test('tcp: the common read and write go through the native queue; a unit attention, a CHECK CONDITION and a credit shortage are taken up by the general path', async (t) => {
  const target = await startServer('tcp', [{ name: 'vol0', lun: 0, size: 4 * MiB }], { queueDepth: 8 });
  const s = await connect(target.options());
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const vol = await s.open('vol0');
  const out = s.allocate(4096);
  const into = s.allocate(3 * 4096);
  pattern(4096, 1).copy(out.buffer);

  // Plain GOOD: both through the queue; a view of registered memory as much as the whole buffer.
  const before = s.fastPathCommands;
  await vol.write(8192, out);
  const view = into.buffer.subarray(4096, 8192);
  t.is(await vol.read(8192, view), view, 'read() resolves with the view it filled');
  t.true(view.equals(pattern(4096, 1)));
  t.is(s.fastPathCommands, before + 2, 'both went through the native queue');

  // A unit attention (CAPACITY DATA HAS CHANGED) on a queued read: absorbed, the read sent again.
  const attentions: number[][] = [];
  s.on('unitAttention', (lun, sense) => attentions.push([lun, sense.key, sense.asc, sense.ascq]));
  const resized = new Promise<number[]>((r) => vol.once('resize', (size, previous) => r([size, previous])));
  const unit = target.units.get('vol0')!;
  gated(target, 'vol0').inner.resize(8 * MiB);
  t.true(await unit.lu.refreshCapacity());
  into.buffer.fill(0);
  const queued = s.fastPathCommands;
  t.is(await vol.read(8192, into), into.buffer);
  t.true(s.fastPathCommands > queued, 'the read met the unit attention on the native queue');
  t.true(into.buffer.subarray(0, 4096).equals(pattern(4096, 1)), 'the read ran after the unit attention');
  t.deepEqual(attentions, [[0, 6, 0x2a, 0x09]]);
  t.deepEqual(await resized, [8 * MiB, 4 * MiB]);

  // A CHECK CONDITION answer: the medium shrank without a unit attention.
  const backend = gated(target, 'vol0');
  backend.inner.resize(MiB);
  await backend.refreshSize();
  const e = await t.throwsAsync(vol.read(6 * MiB, out), { instanceOf: RblkError });
  t.is(e?.code, 'LBA_OUT_OF_RANGE');
  t.is(e?.message, `read [${6 * MiB}, +4096) on volume vol0: ILLEGAL REQUEST 21/00 LOGICAL BLOCK ADDRESS OUT OF RANGE`);
  const w = await t.throwsAsync(vol.write(6 * MiB, out.buffer), { instanceOf: RblkError });
  t.is(w?.code, 'LBA_OUT_OF_RANGE');

  // Four times the target's 8 credits at once: what the queue cannot take waits for a credit on the general path.
  const bufs = Array.from({ length: 32 }, (_, i) => {
    const b = s.allocate(4096);
    pattern(4096, 100 + i).copy(b.buffer);
    return b;
  });
  await Promise.all(bufs.map((b, i) => vol.write(i * 4096, b)));
  for (const b of bufs) b.buffer.fill(0);
  await Promise.all(bufs.map((b, i) => vol.read(i * 4096, b)));
  bufs.forEach((b, i) => t.true(b.buffer.equals(pattern(4096, 100 + i)), `block ${i} read back`));
  const onDisk = Buffer.alloc(32 * 4096);
  await backend.inner.read(onDisk, 0);
  t.true(onDisk.equals(Buffer.concat(bufs.map((_, i) => pattern(4096, 100 + i)))), 'the writes reached the backend');
});

// docs/protocol.md §5.1: from version 5 the commands one turn of the loop
// queues go out several to a message (a train); before, one CMD each. Either
// way every byte comes back as written.
for (const version of [TRAIN_VERSION, TRAIN_VERSION - 1]) {
  test(`tcp, target version ${version}: concurrent common reads and writes go ${version >= TRAIN_VERSION ? 'several CMDs to a message' : 'one CMD to a message'}, every byte back`, async (t) => {
    const target = await startServer('tcp', [{ name: 'vol0', lun: 0, size: 4 * MiB }], { queueDepth: 32, protocolVersion: version });
    const s = await connect(target.options());
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    const vol = await s.open('vol0');
    const bufs = Array.from({ length: 24 }, () => s.allocate(4096));
    const before = s.fastPathCommands;
    for (let round = 0; round < 20; round++) {
      bufs.forEach((b, i) => pattern(4096, round * 100 + i).copy(b.buffer));
      await Promise.all(bufs.map((b, i) => vol.write((round % 4) * 128 * 1024 + i * 4096, b)));
      for (const b of bufs) b.buffer.fill(0);
      await Promise.all(bufs.map((b, i) => vol.read((round % 4) * 128 * 1024 + i * 4096, b)));
      bufs.forEach((b, i) => t.true(b.buffer.equals(pattern(4096, round * 100 + i)), `round ${round}, block ${i} read back`));
    }
    t.is(s.fastPathCommands - before, 20 * 2 * 24, 'every command went through the native queue');
    // At least each round's 24 reads (64 bytes each) in one; a 4 KiB write carries its data, so few share a message.
    if (version >= TRAIN_VERSION) t.true(s.fastPathTrains >= 20, `only ${s.fastPathTrains} trains`);
    else t.is(s.fastPathTrains, 0);
    t.log(`${s.fastPathTrains} trains for ${s.fastPathCommands - before} commands`);
  });
}
