// The NVMe/TCP host's command timeout (initiator/nvme/queue.ts,
// session.ts): a command the controller does not answer within
// timeouts.commandMs loses its queue, the controller is brought up again and
// the command reissued; it completes once the store answers. One the store
// never answers fails with a typed TIMEOUT after timeouts.lossMs rather than
// hanging. The store is an in-process TargetServer over a backend whose reads
// the test holds at a gate (test/initiator/helpers/gated-backend.ts).
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { connectNvme, hasCode } from '../../initiator/index.js';
import { NvmeTcpPortal } from '../../target/nvme/portal.js';
import { defaultNqn } from '../../target/nvme/subsystem.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import { memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';
import { checkSuiteResources } from '../helpers/resources.js';
import { GatedBackend } from './helpers/gated-backend.js';
import { until } from './helpers/nvme-load.js';

checkSuiteResources(test);

async function target(t: import('ava').ExecutionContext): Promise<{ url: string; backend: GatedBackend }> {
  const server = new TargetServer(testServerOptions(memoryLog(), { limits: { queueDepth: 32, maxSessions: 64 } }), rblkConnections);
  t.teardown(() => server.close());
  const backend = new GatedBackend(1 << 20, { name: 'v0' });
  server.addVolume({ name: 'v0', lun: 0, lu: new LogicalUnit({ name: 'v0', backend, identifier: randomUUID() }), access: () => 'rw' });
  const portal = await server.listenWith((host) => NvmeTcpPortal.listen(host, { address: '127.0.0.1', port: 0 }));
  return { url: `nvme+tcp://127.0.0.1:${portal.port}/${defaultNqn(TARGET_NAME)}`, backend };
}

test('an unanswered read resets the controller and is reissued; it completes when the store answers', async (t) => {
  const { url, backend } = await target(t);
  const s = await connectNvme(url, { timeouts: { commandMs: 300, lossMs: 60_000 }, reconnect: { initialDelayMs: 10, maxDelayMs: 50 }, queues: 1 });
  t.teardown(() => s.close());
  const vol = await s.open(1);
  await vol.write(0, Buffer.alloc(4096, 5));
  const gate = backend.hold('read');
  const read = vol.read(0, 4096);
  await until(() => s.reconnects >= 1, 'the controller to be reset and brought up again');
  t.true(s.reissued >= 1, 'the read was sent again');
  gate.release();
  t.true((await read).equals(Buffer.alloc(4096, 5)));
});

test('a read the store never answers fails with TIMEOUT after the loss window, not a hang', async (t) => {
  const { url, backend } = await target(t);
  const s = await connectNvme(url, { timeouts: { commandMs: 200, lossMs: 1000 }, reconnect: { initialDelayMs: 10, maxDelayMs: 50 }, queues: 1 });
  const gate = backend.hold('read');
  t.teardown(async () => {
    gate.release();
    await s.close();
  });
  const vol = await s.open(1);
  const e = await t.throwsAsync(vol.read(0, 4096));
  t.true(hasCode(e, 'TIMEOUT'), String(e));
  t.regex(e!.message, /timeouts\.lossMs.*unanswered for 200 ms/);
});
