// NVMe/TCP connections count against the pre-login limits until their
// Fabrics Connect (docs/operations.md "Connection limits", docs/nvme.md
// "Configuration"): idle connections from one source (127.0.0.2) take their
// share of limits.pre_login_per_source and no more, the rest are closed at
// accept, and a host from another address (127.0.0.1) still connects.
import test from 'ava';
import { connect as tcpConnect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { startNvme } from './fixture.js';
import { RawHost, rwSqe } from '../../bench/soak/nvme-raw-host.js';

function idle(port: number, from: string): Promise<Socket & { ended: boolean }> {
  return new Promise((resolve, reject) => {
    const s = tcpConnect({ host: '127.0.0.1', port, localAddress: from }) as Socket & { ended: boolean };
    s.ended = false;
    s.on('close', () => (s.ended = true));
    s.once('connect', () => {
      s.off('error', reject);
      s.on('error', () => (s.ended = true));
      resolve(s);
    });
    s.once('error', reject);
  });
}

test('idle NVMe/TCP connections from one source hold only their per-source share', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 1 << 20 }], { preLoginConnections: 6, preLoginPerSource: 2, preLoginGraceMs: 600_000 });
  t.teardown(() => f.close());
  const flood = await Promise.all(Array.from({ length: 6 }, () => idle(f.port, '127.0.0.2')));
  t.teardown(() => flood.forEach((s) => s.destroy()));
  for (let waited = 0; flood.filter((s) => s.ended).length < 4 && waited < 10_000; waited += 50) await sleep(50);
  t.is(flood.filter((s) => s.ended).length, 4, 'all but the share were closed at accept');
  t.is(f.server.preLoginFrom('127.0.0.2'), 2);
  t.true(f.log.lines.some((l) => /pre_login_per_source/.test(l.message)), 'the refusal is logged');
  const admin = await RawHost.open(f.port);
  t.teardown(() => admin.close());
  const cntlid = await admin.enable(f.nqn);
  const io = await RawHost.open(f.port);
  t.teardown(() => io.close());
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid })).statusField, 0);
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512))).statusField, 0);
  // A connected queue no longer counts as waiting to log in.
  t.is(f.server.preLoginConnections, 2);
});
