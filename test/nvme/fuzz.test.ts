// Hostile peers beside a healthy host (issue 26 §2 "Bad input", docs/nvme.md
// "Bad input"): connections that send mutated or random PDUs, before and
// after ICReq and Connect, end only themselves; the healthy session beside
// them sees no error, and nothing is logged at error level (no exception
// escaped a connection).
import test from 'ava';
import { randomBytes, randomInt } from 'node:crypto';
import { hostilePdu } from '../../bench/soak/nvme-fuzz.js';
import { startNvme } from './fixture.js';
import { RawHost, rwSqe } from '../../bench/soak/nvme-raw-host.js';

const CONNECTIONS = 150;

test('fuzzed PDUs end only their own connections; a healthy host beside them sees no error', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 4 << 20 }], { maxSessions: 400 });
  t.teardown(() => f.close());
  const admin = await RawHost.open(f.port);
  t.teardown(() => admin.close());
  const cntlid = await admin.enable(f.nqn);
  const io = await RawHost.open(f.port);
  t.teardown(() => io.close());
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 32, subnqn: f.nqn, cntlid })).statusField, 0);

  let healthyOps = 0;
  let healthyErrors = 0;
  let stop = false;
  const healthy = (async () => {
    const data = randomBytes(8192);
    while (!stop) {
      const w = await io.command(rwSqe(0x01, io.nextCid(), 1, 64, 16, 8192), { data });
      const r = await io.command(rwSqe(0x02, io.nextCid(), 1, 64, 16, 8192));
      if (w.statusField !== 0 || r.statusField !== 0 || !r.data.equals(data)) healthyErrors++;
      healthyOps += 2;
    }
  })();

  let pdus = 0;
  for (let i = 0; i < CONNECTIONS; i++) {
    const h = await RawHost.open(f.port);
    try {
      const stage = randomInt(3);
      if (stage >= 1) await h.initialize({ hdgst: randomInt(2) === 1, ddgst: randomInt(2) === 1 });
      if (stage >= 2) await h.connect({ qid: randomInt(2, 65), sqsize: 16, subnqn: f.nqn, cntlid });
      for (let n = randomInt(1, 8); n > 0 && !h.closed; n--) {
        h.write(hostilePdu(h));
        pdus++;
      }
      await h.waitClosed(50);
    } catch {
      // The target may close at any point: that is the point.
    } finally {
      h.close();
    }
  }
  stop = true;
  await healthy;
  t.log(`${pdus} hostile PDUs on ${CONNECTIONS} connections; ${healthyOps} healthy commands beside them`);
  t.is(healthyErrors, 0);
  t.true(healthyOps > 0);
  t.deepEqual(
    f.log.lines.filter((l) => l.level === 'error').map((l) => l.message),
    [],
  );
  // Still serving new hosts.
  const again = await RawHost.open(f.port);
  t.teardown(() => again.close());
  t.true((await again.enable(f.nqn)) > 0);
});
