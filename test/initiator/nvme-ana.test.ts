// ANA-driven path choice of the NVMe/TCP host (initiator/nvme/session.ts,
// Base 2.0 §8.20): two gateways of one volume in this process, each its
// own TargetServer with its own ALUA port group (the ANA group) on one
// shared backend. The host sends I/O to the Optimized gateway even when
// the URL names the Non-Optimized one first; when the Optimized one goes
// standby, its I/O is answered Asymmetric Access Inaccessible, the host
// rereads the ANA log and moves to the other, and no error reaches the caller.
import test from 'ava';
import { randomBytes, randomUUID } from 'node:crypto';
import { connectNvme } from '../../initiator/index.js';
import { MemoryBackend } from '../../target/backend/memory.js';
import { NvmeTcpPortal } from '../../target/nvme/portal.js';
import { defaultNqn } from '../../target/nvme/subsystem.js';
import { TargetPortGroups } from '../../target/scsi/port-groups.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import { memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';
import { checkSuiteResources } from '../helpers/resources.js';

checkSuiteResources(test);

type State = 'active-optimized' | 'active-non-optimized' | 'standby';

async function gateway(t: import('ava').ExecutionContext, backend: MemoryBackend, identifier: string, group: number, state: State) {
  const peer = group === 1 ? 2 : 1;
  const groups = new TargetPortGroups({ local: { group, state, relativePort: group }, peers: [{ group: peer, state: 'active-optimized', relativePort: peer }] });
  const server = new TargetServer(testServerOptions(memoryLog(), { limits: { queueDepth: 32, maxSessions: 32 } }), rblkConnections);
  t.teardown(() => server.close());
  const lu = new LogicalUnit({ name: 'v0', backend, identifier, portGroups: groups });
  server.addVolume({ name: 'v0', lun: 0, lu, access: () => 'rw' });
  const portal = await server.listenWith((host) => NvmeTcpPortal.listen(host, { address: '127.0.0.1', port: 0 }));
  return {
    port: portal.port,
    set: (s: State) => groups.update({ local: { group, state: s, relativePort: group }, peers: [{ group: peer, state: 'active-optimized', relativePort: peer }] }),
    reads: () => lu.stats.classes[0].ops,
  };
}

test('I/O goes to the Optimized gateway, and moves to the Non-Optimized one when the first goes standby', async (t) => {
  const backend = new MemoryBackend({ size: 4 << 20, name: 'v0' });
  const id = randomUUID();
  const a = await gateway(t, backend, id, 1, 'active-non-optimized');
  const b = await gateway(t, backend, id, 2, 'active-optimized');
  const s = await connectNvme(`nvme+tcp://127.0.0.1:${a.port},127.0.0.1:${b.port}/${defaultNqn(TARGET_NAME)}`, { reconnect: { initialDelayMs: 10, maxDelayMs: 50 }, queues: 1 });
  t.teardown(() => s.close());
  t.deepEqual(s.paths.map((p) => p.ana[1]), [2, 1], 'gateway A reports Non-Optimized, B Optimized (log 0Ch)');
  const vol = await s.open(1);
  const data = randomBytes(64 * 1024);
  await vol.write(0, data);
  for (let i = 0; i < 20; i++) t.true((await vol.read(0, 4096)).equals(data.subarray(0, 4096)));
  t.is(a.reads(), 0, 'nothing read through the Non-Optimized gateway named first');
  t.true(b.reads() >= 20);

  b.set('standby');
  const before = a.reads();
  for (let i = 0; i < 20; i++) t.true((await vol.read(4096, 4096)).equals(data.subarray(4096, 8192)), 'no error reaches the caller');
  t.true(a.reads() >= before + 20, 'the reads went to gateway A');
  t.is(s.paths[1].ana[1], 3, "B's ANA log now says Inaccessible");
  t.is(s.reconnects, 0, 'a path status is not a lost connection');
});
