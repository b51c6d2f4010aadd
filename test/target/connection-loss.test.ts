// A transfer that fails because the initiator went away is a lost connection, logged at info
// as one, never a protocol violation (target/transport/connection-loss.ts): the classifier, and
// the session's call site with a transport whose RDMA WRITE fails as a vanished peer's does.
import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { Connection } from '../../initiator/connection.js';
import { LoopInitiatorTransport } from '../../initiator/transport/loop-transport.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import { isConnectionLoss } from '../../target/transport/connection-loss.js';
import { LoopTargetTransport } from '../../target/transport/loop-transport.js';
import type { PortHandlers, PortOptions, TargetPort, TargetTransport } from '../../target/transport/transport.js';
import { exportMemoryVolume, memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';

test('the classifier: a peer that is gone, by errno (either sign, as the fast path and libfabric give it), name or error', (t) => {
  // ENOTCONN 107, ECONNRESET 104, EPIPE 32, ECONNABORTED 103, ESHUTDOWN 108, ECANCELED 125 (fi_errno.h mirrors errno.h).
  for (const cause of [107, -107, 104, 32, -103, 108, 125, 'FI_ECANCELED', 'ENOTCONN', 'FI_ECONNABORTED', { code: 'FI_ECONNRESET', errno: 104 }, Object.assign(new Error('x'), { code: 'EPIPE' }), { errno: 107 }]) {
    t.true(isConnectionLoss(cause), `${JSON.stringify(cause)} is a loss`);
  }
  // A bad key or descriptor, an I/O error: the initiator's doing, or unknown.
  for (const cause of [13, -5, 22, 'FI_EACCES', { code: 'FI_EIO', errno: 5 }, new Error('no code'), undefined, null, 'FI_EREMOTEIO']) {
    t.false(isConnectionLoss(cause), `${JSON.stringify(cause)} is no loss`);
  }
  // Once the transport has said the connection is gone, whatever follows is part of the loss.
  t.true(isConnectionLoss(5, true));
  t.true(isConnectionLoss(new Error('no code'), true));
});

/** The loop transport, with every RDMA WRITE of the target failing with `error`. */
class FailingWrites implements TargetTransport {
  readonly name = 'loop' as const;
  private readonly inner = new LoopTargetTransport();

  constructor(private readonly error: () => Error) {}

  listen(opts: PortOptions, handlers: PortHandlers): Promise<TargetPort> {
    return this.inner.listen(opts, {
      ...handlers,
      admit: (request, peer) => handlers.admit(request, peer),
      connected: (conn) => {
        conn.write = () => Promise.reject(this.error());
        handlers.connected(conn);
      },
    });
  }
}

const fabricError = (code: string, errno: number): Error => Object.assign(new Error(`fi_write: remote says (${code})`), { code, errno, op: 'fi_write' });

for (const [what, error, loss] of [
  ['ENOTCONN (the initiator went away)', () => fabricError('FI_ENOTCONN', 107), true],
  ['ECONNRESET', () => fabricError('FI_ECONNRESET', 104), true],
  ['EACCES (a bad remote key: the initiator broke the protocol)', () => fabricError('FI_EACCES', 13), false],
] as const) {
  test.serial(`an RDMA WRITE that fails with ${what} is ${loss ? 'a lost connection, at info' : 'a protocol violation, at warn'}`, async (t) => {
    const log = memoryLog();
    const server = new TargetServer(testServerOptions(log), rblkConnections);
    server.addVolume(exportMemoryVolume({ name: 'vol0', lun: 0, size: 1 << 20 }));
    const port = await server.listen({ transport: new FailingWrites(error), provider: 'loop', address: 'loss-test', port: 0 });
    t.teardown(() => server.close());
    const c = await Connection.open(new LoopInitiatorTransport(), {
      address: 'loss-test',
      port: port.port,
      initiatorName: 'iqn.2026-11.io.rblk:loss',
      targetName: TARGET_NAME,
      maxIo: 1 << 20,
      queueDepth: 4,
    });
    t.teardown(() => c.close());
    // The power-on unit attention first, so that the READ moves data.
    const tur = await c.command({ lun: 0, cdb: cdb.testUnitReady() });
    t.true(tur.status === ScsiStatus.GOOD || tur.status === ScsiStatus.CHECK_CONDITION);
    const buf = await c.allocate(4096);
    await c.command({ lun: 0, cdb: cdb.read16(0, 8), dataIn: buf }).catch(() => undefined);
    for (let i = 0; i < 400 && !log.lines.some((l) => /session ended/.test(l.message)); i++) await new Promise((r) => setTimeout(r, 5));
    // The line that says why, not the session's end that repeats it.
    const about = log.lines.filter((l) => l.level !== 'debug' && !l.message.startsWith('session ended') && /RDMA WRITE for tag/.test(l.message));
    t.is(about.length, 1, JSON.stringify(log.lines));
    if (loss) {
      t.is(about[0]?.level, 'info');
      t.regex(about[0]?.message ?? '', /^connection lost: RDMA WRITE for tag \d+ failed: /);
      t.false(log.lines.some((l) => /protocol violation/.test(l.message)), JSON.stringify(log.lines));
    } else {
      t.is(about[0]?.level, 'warn');
      t.regex(about[0]?.message ?? '', /^protocol violation, disconnecting: RDMA WRITE for tag \d+ failed: /);
    }
    t.true(log.lines.some((l) => /session ended/.test(l.message)), JSON.stringify(log.lines));
  });
}
