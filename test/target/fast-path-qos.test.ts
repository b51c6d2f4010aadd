// QoS on the native fast path (docs/architecture.md "QoS buckets"): a READ or
// WRITE whose limits have no room waits in the fast path itself, parked in
// its LUN's FIFO until a timerfd of the connection's says it may start
// (native/src/core/fast-path-qos.cc), with no crossing into JavaScript. Here:
// parked commands move the right bytes (writes whose data the fast path reads
// by RDMA after the wait, and reads) and are counted where JavaScript's waits
// are; and a connection that ends with commands parked frees them once (no
// crash, no fd left, under ASan too: scripts/sanitize.sh npx ava <this file>),
// while the session's reissued commands and another volume go on.
import test, { type ExecutionContext } from 'ava';
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '../../initiator/index.js';
import { FastPath } from '../../native/fast-path.js';
import { FileBackend } from '../../target/backend/file.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections, type RblkConnection } from '../../target/rblk/connection.js';
import { tempDir } from '../fuse/helpers/fuse-fixture.js';
import { listenTest, memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { pattern } from '../../bench/kit/pattern.js';
import { until } from '../../bench/kit/wait.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric(['tcp']) });

const MiB = 1 << 20;
const QD = 32;
const reason = FastPath.available() ? null : 'no native fast path on this host (rblk_uring.node)';
if (reason !== null) test.skip(`fast-path QoS tests: ${reason}`, () => undefined);
const fastTest = reason === null ? test.serial : test.skip;

/** An in-process target with two file volumes on the fast path: `slow` (its QoS set by the test) and `other`, unlimited. */
async function target(t: ExecutionContext) {
  const dir = await tempDir(t, 'fastqos');
  const log = memoryLog();
  // 512 bytes in the capsule at most: a 4 KiB write's data is read by RDMA after its wait.
  const server = new TargetServer(testServerOptions(log, { fastPath: true, limits: { queueDepth: QD, inCapsuleData: 512 } }), rblkConnections);
  const files: FileBackend[] = [];
  const lus: LogicalUnit[] = [];
  for (const [lun, name] of ['slow', 'other'].entries()) {
    const path = join(dir, `${name}.img`);
    await writeFile(path, Buffer.alloc(MiB));
    const file = await FileBackend.open({ path });
    files.push(file);
    const lu = new LogicalUnit({ name, backend: file, identifier: randomUUID() });
    lus.push(lu);
    server.addVolume({ name, lun, lu, access: () => 'rw' });
  }
  const port = (await listenTest(server, 'tcp')).port;
  t.teardown(async () => {
    await server.close();
    for (const f of files) await f.close();
  });
  const session = async (name: string) => {
    const s = await connect({ address: '127.0.0.1', port, provider: 'tcp', initiatorName: `iqn.2026-12.io.rblk:${name}`, targetName: TARGET_NAME, queueDepth: QD });
    t.teardown(() => s.close());
    return s;
  };
  const carrier = (): RblkConnection | undefined => [...server.sessions].find((c) => (c as RblkConnection).fastPathStats !== null) as RblkConnection | undefined;
  return { server, log, slow: lus[0]!, session, carrier };
}

fastTest('throttled READs and WRITEs wait parked on the fast path and move the right bytes; their waits are counted as the volume throttled commands', async (t) => {
  const { slow, session, carrier } = await target(t);
  const s = await session('parked');
  const vol = await s.open('slow');
  // Burst 0: past the first command, each one waits its 2.5 ms turn.
  slow.qos.configure({ iops: 400, burstMs: 0, initiators: [] });
  const blocks = 96;
  const data = pattern(blocks * 4096, 28);
  // QD32 of 4 KiB writes (their data fetched by RDMA READ once they start), then one 512-byte write in each block's
  // first sector (its data in the capsule), then the reads: every one of them through the bucket.
  const inOrder = async (n: number, op: (i: number) => Promise<unknown>): Promise<void> => {
    let next = 0;
    await Promise.all(Array.from({ length: QD }, async () => {
      while (next < n) await op(next++);
    }));
  };
  await inOrder(blocks, (i) => vol.write(i * 4096, data.subarray(i * 4096, (i + 1) * 4096)));
  const small = pattern(blocks * 512, 29);
  await inOrder(blocks, (i) => vol.write(i * 4096, small.subarray(i * 512, (i + 1) * 512)));
  for (let i = 0; i < blocks; i++) small.copy(data, i * 4096, i * 512, (i + 1) * 512);
  const back = Buffer.alloc(blocks * 4096);
  await inOrder(blocks, async (i) => (await vol.read(i * 4096, 4096)).copy(back, i * 4096));
  t.true(back.equals(data), 'every block read back is what was written, through waits on both sides');

  const stats = carrier()?.fastPathStats;
  if (stats == null) return t.fail('no connection with a fast path');
  t.log(`fast path: taken ${stats.taken}, parked ${stats.qosParked}, started after their wait ${stats.qosReleased}, left to JS ${stats.qosDeferred}`);
  t.true(stats.qosParked > blocks, 'most commands waited, parked natively');
  t.is(stats.qosReleased, stats.qosParked, 'every parked command started');
  t.is(stats.qosWaiting, 0);
  t.is(stats.qosDeferred, 0, 'none went to JavaScript: QD32 fits the parked bound');
  t.is(stats.inFlight, 0);
  slow.stats.byClass(); // moves the fast path's counts into the volume's, as ctl volumes does
  t.true(slow.qos.throttledCommands >= stats.qosParked && slow.qos.throttledSeconds > 0, `throttled ${slow.qos.throttledCommands} commands, ${slow.qos.throttledSeconds} s`);
});

fastTest('a connection that ends with commands parked drops them once: the session reissues them on its next connection, another volume carries on, and nothing is left behind', async (t) => {
  const { server, log, slow, session, carrier } = await target(t);
  const s = await session('closed');
  const vol = await s.open('slow');
  const other = await s.open('other');
  const data = pattern(QD * 4096, 30);
  await vol.write(0, data);
  // 20 IOPS: QD32 of reads park for 1.6 s, long enough to end the connection under them.
  slow.qos.configure({ iops: 20, burstMs: 0, initiators: [] });
  const reads = Array.from({ length: QD }, (_, i) => vol.read(i * 4096, 4096));
  await until(() => (carrier()?.fastPathStats?.qosWaiting ?? 0) >= QD / 2, 'half the reads parked');
  const first = carrier()!;
  const waiting = first.fastPathStats!.qosWaiting;
  first.fence('test: the connection ends with commands parked');
  await first.closed;
  // Dropped unrun (not started as the closing connection's LUNs are revoked): nothing of them reached the backend.
  t.true(log.lines.some((l) => /connection closing: \d+ commands waiting natively for QoS dropped unrun/.test(l.message)), 'the parked commands were dropped');
  // The loop goes on: the other volume answers (through the session's next connection).
  const o = pattern(4096, 31);
  await other.write(0, o);
  t.true((await other.read(0, 4096)).equals(o));
  // The lifted limit applies to commands parked on the new connection at their next look (the fast path's timer, kQosLookNs).
  slow.qos.configure(null);
  const back = await Promise.all(reads);
  t.true(Buffer.concat(back).equals(data), 'every read, reissued on the next connection, returns its block');
  t.log(`${waiting} reads were parked when the connection ended; ${server.sessions.size} connection(s) now`);
  t.is(slow.fastPath.held, false);
});

fastTest('a hold (task management, a fence, a drain) revokes the LUN: its parked commands start at once, charged, rather than after their turn at a low limit', async (t) => {
  const { slow, session, carrier } = await target(t);
  const s = await session('held');
  const vol = await s.open('slow');
  const data = pattern(QD * 4096, 32);
  await vol.write(0, data);
  // 1 IOPS: the parked reads' turns would take half a minute.
  slow.qos.configure({ iops: 1, burstMs: 0, initiators: [] });
  const reads = Array.from({ length: QD }, (_, i) => vol.read(i * 4096, 4096));
  await until(() => (carrier()?.fastPathStats?.qosWaiting ?? 0) >= QD - 2, 'the reads parked');
  const stats = carrier()!.fastPathStats!;
  const parked = stats.qosWaiting;
  let ran = false;
  await slow.fastPath.hold(() => {
    ran = true;
    // Under the hold nothing of the LUN runs natively, parked or not.
    t.is(carrier()!.fastPathStats!.qosWaiting, 0);
    t.is(carrier()!.fastPathStats!.inFlight, 0);
  });
  t.true(ran);
  t.is(carrier()!.fastPathStats!.qosReleased, stats.qosReleased + parked, 'the parked reads started when the LUN was revoked');
  slow.qos.configure(null);
  t.true(Buffer.concat(await Promise.all(reads)).equals(data), 'every read returns its block');
});
