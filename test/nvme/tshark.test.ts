// Our NVMe/TCP framing checked by someone else's reading of the spec
// (issue 26 §3, docs/nvme.md "Checked by Wireshark"): dumpcap captures a
// session of the raw host (bench/soak/nvme-raw-host.ts) against the listener on loopback,
// and Debian's tshark, with its NVMe/TCP dissector and digest checks on,
// must find nothing malformed and no expert warning, and must decode every
// PDU type the session used. Without tshark and dumpcap (or without the
// right to capture), the test is skipped, and says so.
import test from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startNvme } from './fixture.js';
import { decodeCqe, RawHost, rwSqe } from '../../bench/soak/nvme-raw-host.js';

function canCapture(): string | null {
  for (const tool of ['tshark', 'dumpcap']) {
    const r = spawnSync(tool, ['--version'], { encoding: 'utf8' });
    if (r.status !== 0) return `${tool} is not installed`;
  }
  const d = spawnSync('dumpcap', ['-D'], { encoding: 'utf8' });
  if (d.status !== 0 || !/\blo\b/.test(d.stdout)) return `dumpcap cannot list the loopback interface: ${(d.stderr || d.stdout).trim()}`;
  return null;
}

const why = canCapture();
if (why !== null) console.log(`tshark test skipped: ${why}`);

const NAMES: Record<number, string> = { 0: 'ICReq', 1: 'ICResp', 2: 'H2CTermReq', 3: 'C2HTermReq', 4: 'CapsuleCommand', 5: 'CapsuleResponse', 6: 'H2CData', 7: 'C2HData', 9: 'R2T' };

(why === null ? test : test.skip)('tshark decodes a whole NVMe/TCP session, digests on and off, with nothing malformed and no warnings', async (t) => {
  const f = await startNvme([{ name: 'v0', lun: 0, size: 8 << 20 }]);
  t.teardown(() => f.close());
  const dir = mkdtempSync(join(tmpdir(), 'rblk-nvme-pcap-'));
  if (process.env.RBLK_KEEP_PCAP === undefined) t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  else t.log(`capture kept in ${dir}`);
  const pcap = join(dir, 's.pcapng');
  const cap = spawn('dumpcap', ['-q', '-i', 'lo', '-f', `tcp port ${f.port}`, '-w', pcap], { stdio: ['ignore', 'ignore', 'pipe'] });
  const capExit = new Promise<number | null>((resolve) => cap.once('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (cap.exitCode === null) cap.kill('SIGKILL');
  });
  let err = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dumpcap did not start: ${err}`)), 10_000);
    cap.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      if (/Capturing on/.test(err)) {
        clearTimeout(timer);
        resolve();
      }
    });
    cap.once('exit', () => reject(new Error(`dumpcap exited: ${err}`)));
  });
  await new Promise((r) => setTimeout(r, 300));

  for (const digests of [false, true]) {
    const admin = await RawHost.open(f.port);
    const cntlid = await admin.enable(f.nqn, { hdgst: digests, ddgst: digests });
    t.is((await admin.admin(0x06, { length: 4096, cdw: { 10: 1 } })).statusField, 0);
    t.is((await admin.admin(0x06, { nsid: 1, length: 4096, cdw: { 10: 0 } })).statusField, 0);
    const io = await RawHost.open(f.port);
    await io.initialize({ hdgst: digests, ddgst: digests });
    t.is((await io.connect({ qid: 1, sqsize: 32, subnqn: f.nqn, cntlid })).statusField, 0);
    const small = randomBytes(4096);
    t.is((await io.command(rwSqe(0x01, io.nextCid(), 1, 0, 8, 4096, { inCapsule: true }), { data: small, inCapsule: true })).statusField, 0);
    const big = randomBytes(256 * 1024);
    const w = await io.command(rwSqe(0x01, io.nextCid(), 1, 64, 512, big.length), { data: big });
    t.is(w.statusField, 0);
    t.is(w.r2ts, 1);
    const r = await io.command(rwSqe(0x02, io.nextCid(), 1, 64, 512, big.length));
    t.true(r.data.equals(big));
    // A burst: 32 reads of 4 KiB sent at once. Answers that finish in one turn past 16 KiB go
    // out in the listener's early flushes (target/nvme/pdu-channel.ts EARLY_FLUSH_BYTES).
    const cids = Array.from({ length: 32 }, () => io.nextCid());
    cids.forEach((cid, i) => io.sendCapsule(rwSqe(0x02, cid, 1, 64 + i * 8, 8, 4096)));
    const burst = new Map<number, Buffer>();
    for (let answered = 0; answered < cids.length; ) {
      const p = await io.next();
      if (p.type === 0x07) burst.set(p.raw.readUInt16LE(8), p.data!); // C2HData: CCCID at bytes 8-9 (§3.6.2.9)
      else if (p.type === 0x05) {
        const cqe = decodeCqe(p.raw, 8);
        t.is(cqe.statusField, 0, `read CID ${cqe.cid} succeeded`);
        answered++;
      } else t.fail(`PDU type ${p.type} in the burst`);
    }
    t.true(
      cids.every((cid, i) => burst.get(cid)?.equals(big.subarray(i * 4096, (i + 1) * 4096))),
      'each read of the burst got its own 4 KiB',
    );
    t.is((await io.admin(0x00, { nsid: 1 })).statusField, 0);
    // Orderly closes (FIN, not RST): the I/O queue first, then the admin queue.
    for (const h of [io, admin]) {
      h.socket.end();
      t.true(await h.waitClosed(5000));
    }
  }
  await new Promise((r) => setTimeout(r, 500));
  cap.kill('SIGINT');
  await capExit;

  // Reassembly (tcp.desegment_tcp_streams) is on, so every PDU is decoded whole.
  const decode = [
    '-r',
    pcap,
    '-d',
    `tcp.port==${f.port},nvme-tcp`,
    '-o',
    'nvme-tcp.check_hdgst:TRUE',
    '-o',
    'nvme-tcp.check_ddgst:TRUE',
  ];
  // TCP's own events on a loaded loopback — retransmissions (whose overlapping bytes would
  // otherwise read as a reassembly error), window full, zero window, window probes, and the
  // SACK-carrying ACKs that answer them — are the kernel's, and tshark's sequence analysis
  // flags them (tcp.analysis.flags) and keeps retransmitted bytes out of reassembly. They
  // say nothing about our PDUs, so frames so flagged are left out of the check; every other
  // frame, and every PDU, must be clean. Seen in CI under load, once each.
  const kernelTcp = 'tcp.analysis.flags || (tcp.len == 0 && tcp.options.sack_le)';
  const bad = spawnSync('tshark', [...decode, '-Y', `(_ws.malformed || _ws.expert.severity >= warning) && !(${kernelTcp})`], { encoding: 'utf8' });
  t.is(bad.status, 0, bad.stderr);
  t.is(bad.stdout.trim(), '', 'no malformed PDU and no expert warning');
  const types = spawnSync('tshark', [...decode, '-Y', 'nvme-tcp', '-T', 'fields', '-e', 'nvme-tcp.type'], { encoding: 'utf8' });
  t.is(types.status, 0, types.stderr);
  const seen = new Set(types.stdout.split(/[\s,]+/).filter((s) => s !== '').map((s) => NAMES[Number(s)] ?? `type ${s}`));
  t.log([...seen].join(', '));
  for (const name of ['ICReq', 'ICResp', 'CapsuleCommand', 'CapsuleResponse', 'C2HData', 'R2T', 'H2CData']) t.true(seen.has(name), `${name} decoded`);
  t.false([...seen].some((s) => s.startsWith('type ')), 'no unknown PDU type');
});
