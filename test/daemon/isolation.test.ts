import test from 'ava';
import { Domain, type Endpoint } from '../../native/fabric.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { connectDataBuffer, ConnectKind } from '../../protocol/wire/index.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { login, MAX_IO, pattern, read, write } from './helpers/initiator.js';

test('a garbage capsule, a protocol violation after login and a vanished peer each end only their own session', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: '4MiB', lun: 0 }]));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();

  // The bystander: writes and reads, each compared, the whole time.
  const good = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:bystander' });
  t.teardown(() => good.close());
  const failures: string[] = [];
  let ops = 0;
  let running = true;
  t.teardown(() => (running = false));
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const lba = (i * 8) % 8000;
      const data = pattern(4096, i + 7);
      const wr = await write(good, 0, lba, data);
      const rd = await read(good, 0, lba, 8);
      if (wr.status !== ScsiStatus.GOOD || rd.result.status !== ScsiStatus.GOOD || !rd.data.equals(data)) failures.push(`op ${i}`);
      ops++;
    }
  })().catch((e: Error) => void failures.push(`the bystander's session failed: ${e.message}`));

  // 1. A raw connection whose first capsule is garbage: refused and disconnected.
  const domain = Domain.open({ provider: 'tcp', address: '127.0.0.1' });
  t.teardown(() => domain.close());
  const recv = domain.register(4 * 1024);
  const raw: Endpoint = await domain.connect({
    address: '127.0.0.1',
    port,
    privateData: connectDataBuffer({ kind: ConnectKind.CONNECT, maxCapsule: 1024, queueDepth: 1 }),
    prepare: (ep) => {
      for (let i = 0; i < 4; i++) ep.postReceive(recv.slice(i * 1024, 1024));
    },
  });
  const rawClosed = new Promise<void>((r) => raw.once('close', () => r()));
  raw.sendInline(Buffer.alloc(48, 0xee));
  await rawClosed;
  await d.waitForLine(/warn: protocol violation, disconnecting: undecodable capsule/);

  // 2. A logged-in session that sends an undecodable capsule: T_LOGOUT (protocol error), then gone.
  const rude = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:rude' });
  const rudeClosed = new Promise<string>((r) => (rude.onClose = r));
  await rude.conn.send(Buffer.alloc(64, 0x5a));
  t.regex(await rudeClosed, /the target logged this session out: PROTOCOL_ERROR/);
  await d.waitForLine(/warn: protocol violation, disconnecting: .* initiator=iqn\.2026-11\.io\.rblk:rude/);
  await rude.close();

  // 3. A peer that vanishes with a read in flight (its memory, and its endpoint, gone).
  const gone = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:vanishing' });
  const buf = await gone.allocate(MAX_IO);
  const inFlight = gone.command({ lun: 0, cdb: cdb.read16(0, MAX_IO / 512), dataIn: buf }).catch((e: Error) => e);
  await gone.conn.close();
  t.true((await inFlight) instanceof Error);
  await d.waitForLine(/info: session ended: .* initiator=iqn\.2026-11\.io\.rblk:vanishing/);

  // The bystander carried on, and new sessions still log in.
  const mark = ops;
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => ops >= mark + 10 && (clearInterval(tick), resolve()), 5);
  });
  running = false;
  await loop;
  t.deepEqual(failures, []);
  const later = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:later' });
  t.is((await read(later, 0, 0, 1)).result.status, ScsiStatus.GOOD);
  await later.logout();
  await good.logout();
  t.false(d.lines.some((l) => /error:/.test(l)), d.lines.join('\n'));
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});
