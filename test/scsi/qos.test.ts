// QoS buckets (target/scsi/qos-bucket.ts, qos.ts; docs/operations.md "QoS
// limits"): the virtual-scheduling arithmetic on a fixed clock, which limits
// a read and a write are charged to, per-initiator buckets beside the
// volume's, and a reconfiguration that keeps the shared state in place.
import test from 'ava';
import { QosBucket } from '../../target/scsi/qos-bucket.js';
import { VolumeQos } from '../../target/scsi/qos.js';

const MS = 1_000_000n;
const NOW = 5_000_000_000n;

test('an idle bucket lets its burst through at once, then one command per interval', (t) => {
  const b = new QosBucket({ iops: 1000, burstMs: 10 });
  const waits = Array.from({ length: 14 }, () => b.reserve('read', 4096, NOW));
  // burst_ms 10 at 1,000 IOPS: the first 11 start now (the one at TAT = now, and ten more), then 1 ms apart.
  t.deepEqual(waits, [0n, 0n, 0n, 0n, 0n, 0n, 0n, 0n, 0n, 0n, 0n, 1n * MS, 2n * MS, 3n * MS]);
  // Time passes: 20 ms later the bucket is idle again, with its burst back.
  t.is(b.reserve('read', 4096, NOW + 20n * MS), 0n);
});

test('bytes per second charge by the byte, and each direction only its own limits', (t) => {
  const b = new QosBucket({ readBps: 1024 * 1024, writeIops: 10, burstMs: 0 });
  t.is(b.reserve('read', 512 * 1024, NOW), 0n);
  t.is(b.reserve('read', 4096, NOW), 500n * MS, 'half a second of bytes went before it');
  // Writes are not charged to read_bps: only to write_iops, 100 ms apart.
  t.is(b.reserve('write', 1024 * 1024, NOW), 0n);
  t.is(b.reserve('write', 1024 * 1024, NOW), 100n * MS);
  t.deepEqual(b.rates(), { read_iops: 0, write_iops: 10, iops: 0, read_bps: 1024 * 1024, write_bps: 0, bps: 0 });
});

test('no limit: nothing waits, and admit costs nothing', (t) => {
  const q = new VolumeQos(null);
  t.false(q.active);
  t.is(q.admit('a', 'write', 1 << 20), null);
  t.is(new QosBucket(null).reserve('read', 1, NOW), 0n);
});

test('per-initiator entries: the first match, and a bucket per initiator name', async (t) => {
  const q = new VolumeQos({
    burstMs: 0,
    initiators: [
      { initiator: 'host-*', iops: 100, burstMs: 0 },
      { initiator: 'host-a', iops: 1, burstMs: 0 },
    ],
  });
  t.true(q.active);
  // host-a matches the glob first: 100 IOPS, its own bucket; host-b has another of the same limits.
  t.is(q.initiatorBucket('host-a').rates().iops, 100);
  t.not(q.initiatorBucket('host-a'), q.initiatorBucket('host-b'));
  t.is(q.initiatorBucket('other').rates().iops, 0);
  t.is(q.admit('host-a', 'read', 512), null);
  const second = q.admit('host-a', 'read', 512);
  t.not(second, null, 'host-a waits for its own bucket');
  t.is(q.admit('host-b', 'read', 512), null, 'host-b does not wait for host-a');
  t.is(q.admit('other', 'read', 512), null);
  await second;
  t.is(q.throttledCommands, 1);
  t.true(q.throttledSeconds > 0.005 && q.throttledSeconds <= 0.011, String(q.throttledSeconds));
});

test('configure changes the limits in place: the state a fast path holds sees them', (t) => {
  const q = new VolumeQos({ iops: 1000, burstMs: 100, initiators: [] });
  const held = q.nativeState('host-a');
  q.configure({ iops: 10, burstMs: 5, initiators: [{ initiator: 'host-a', writeIops: 3, burstMs: 5 }] });
  t.is(held[0], q.volume.state);
  t.is(held[0]![2 * 3], 10n, 'iops slot: rate');
  t.is(held[0]![2 * 3 + 1], 5n * MS, 'iops slot: burst');
  t.is(held[1]![1 * 3], 3n, 'the initiator bucket got the new entry: write_iops');
  q.configure(null);
  t.false(q.active);
  t.is(held[0]![2 * 3], 0n);
  t.deepEqual(q.report().limits, {});
});

test('the volume\'s limit is shared by every initiator; an initiator\'s own applies beside it; close ends the waits', async (t) => {
  const q = new VolumeQos({ iops: 1, burstMs: 0, initiators: [{ initiator: 'host-a', iops: 1000, burstMs: 0 }] });
  t.is(q.admit('host-a', 'write', 512), null);
  // host-b has no entry of its own, but the volume's one command per second is spent.
  const b = q.admit('host-b', 'write', 512);
  t.not(b, null);
  t.true(q.throttledSeconds > 0.9, String(q.throttledSeconds));
  // Closing the volume lets a wait go at once: host-b's second-long turn resolves now.
  let done = false;
  void b!.then(() => (done = true));
  q.close();
  await b;
  t.true(done);
  t.true(process.hrtime.bigint() < q.volume.state[2 * 3 + 2]! - 1_000_000_000n, 'before its turn came');
});
