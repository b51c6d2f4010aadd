// The real rblkd with an `nvme-tcp` listener and a top-level `nqn:` from its
// YAML config (docs/nvme.md "Configuration"): a host connects the admin and
// an I/O queue, writes through R2T and in-capsule, reads back, and the bytes
// are in the volume's file; `rblkd ctl sessions` lists the queues; SIGTERM
// then ends the daemon cleanly.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { controlRequest } from '../../target/daemon/control-client.js';
import type { SessionInfo } from '../../target/connection/environment.js';
import { HOST_NQN, RawHost, rwSqe } from '../../bench/soak/nvme-raw-host.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';

const NQN = 'nqn.2026-12.io.rblk:daemon-nvme';

test('rblkd serves a volume as a namespace on its nvme-tcp listener', async (t) => {
  const w = workdir(t);
  const file = join(w.dir, 'vol.img');
  w.writeConfig(
    baseConfig(w, [{ name: 'vol', path: file, size: '4MiB' }], {
      nqn: NQN,
      listeners: [{ protocol: 'nvme-tcp', address: '127.0.0.1', port: 0 }],
      limits: { queue_depth: 32 },
    }),
  );
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = Number((await d.waitForLine(/listening nvme-tcp 127\.0\.0\.1:(\d+)/))[1]);
  const admin = await RawHost.open(port);
  t.teardown(() => admin.close());
  const cntlid = await admin.enable(NQN);
  const id = await admin.admin(0x06, { length: 4096, cdw: { 10: 1 } });
  t.is(id.data.subarray(768, 1024).toString().replace(/\0+$/, ''), NQN);
  const io = await RawHost.open(port);
  t.teardown(() => io.close());
  await io.initialize({ hdgst: true, ddgst: true });
  t.is((await io.connect({ qid: 1, sqsize: 32, subnqn: NQN, cntlid })).statusField, 0);
  const big = randomBytes(128 * 1024);
  t.is((await io.command(rwSqe(0x01, io.nextCid(), 1, 16, 256, big.length, { fua: true }), { data: big })).statusField, 0);
  const small = randomBytes(4096);
  t.is((await io.command(rwSqe(0x01, io.nextCid(), 1, 0, 8, 4096, { inCapsule: true }), { data: small, inCapsule: true })).statusField, 0);
  t.is((await io.admin(0x00, { nsid: 1 })).statusField, 0);
  const r1 = await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 8, 4096));
  t.is(r1.statusField, 0);
  t.true(r1.data.equals(small));
  const r2 = await io.command(rwSqe(0x02, io.nextCid(), 1, 16, 256, big.length));
  t.is(r2.statusField, 0);
  t.true(r2.data.equals(big));
  // More than limits.max_io (128 KiB here) in one command: Invalid Field in Command.
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 272, 272 * 512))).sc, 0x02);
  const onDisk = readFileSync(file);
  t.true(onDisk.subarray(16 * 512, 16 * 512 + big.length).equals(big), 'the bytes are in the volume file');
  // `rblkd ctl sessions` lists both queues, under the host's NQN, with their I/O.
  const sessions = ((await controlRequest(join(w.dir, 'rblkd.ctl'), 'sessions')) as SessionInfo[]).filter((s) => s.provider === 'nvme-tcp');
  t.deepEqual(sessions.map((s) => s.id).sort(), [`nvme-${cntlid}.0`, `nvme-${cntlid}.1`]);
  t.true(sessions.every((s) => s.initiator === HOST_NQN));
  t.true(sessions.find((s) => s.id.endsWith('.1'))!.writeBytes >= big.length + small.length);
  d.kill('SIGTERM');
  const exit = await d.exited;
  t.is(exit.code, 0, d.lines.join('\n'));
});

test('a discovery-only nvme-tcp listener answers the discovery controller, lists only the I/O listener, and refuses the subsystem', async (t) => {
  const w = workdir(t);
  w.writeConfig(
    baseConfig(w, [{ name: 'vol', path: join(w.dir, 'vol.img'), size: '4MiB' }], {
      nqn: NQN,
      listeners: [
        { protocol: 'nvme-tcp', address: '127.0.0.1', port: 0 },
        { protocol: 'nvme-tcp', address: '127.0.0.1', port: 0, discovery: true },
      ],
    }),
  );
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const ioPort = Number((await d.waitForLine(/listening nvme-tcp 127\.0\.0\.1:(\d+)/))[1]);
  const discPort = Number((await d.waitForLine(/listening nvme-tcp-discovery 127\.0\.0\.1:(\d+)/))[1]);
  t.not(ioPort, discPort);

  const h = await RawHost.open(discPort);
  t.teardown(() => h.close());
  await h.initialize();
  t.is((await h.connect({ qid: 0, sqsize: 32, subnqn: 'nqn.2014-08.org.nvmexpress.discovery' })).statusField, 0);
  t.is((await h.propertySet(0x14, 1 | (6 << 16) | (4 << 20))).statusField, 0);
  const page = await h.admin(0x02, { length: 2048, cdw: { 10: 0x70 | (511 << 16) } });
  t.is(page.statusField, 0);
  t.is(Number(page.data.readBigUInt64LE(8)), 1, 'NUMREC: the I/O listener only');
  const e = page.data.subarray(1024);
  t.is(e.subarray(32, 64).toString('ascii').replace(/[\0 ]+$/, ''), String(ioPort), 'TRSVCID names the I/O port');
  t.is(e.subarray(256, 512).toString().replace(/\0+$/, ''), NQN);

  // The subsystem itself is not served on the discovery port (Connect Invalid Parameters on SUBNQN).
  const x = await RawHost.open(discPort);
  t.teardown(() => x.close());
  await x.initialize();
  const refused = await x.connect({ qid: 0, sqsize: 32, subnqn: NQN });
  t.deepEqual([refused.sct, refused.sc, refused.dw0], [1, 0x82, 256 | (1 << 16)]);
  await d.waitForLine(/NVMe Connect for .* on a discovery-only listener/);
  d.kill('SIGTERM');
  t.is((await d.exited).code, 0, d.lines.join('\n'));
});
