// NVMe-oF discovery from the rblk library and CLI (initiator/nvme/discovery.ts,
// `rblk discover nvme+tcp://...`): the real rblkd's discovery controller
// lists its NVMe/TCP listeners with the subsystem NQN (NVMe-oF 1.1 §5.4).
import test from 'ava';
import { discoverNvme } from '../../initiator/nvme/discovery.js';
import { defaultHostIdentity } from '../../initiator/nvme/session.js';
import { checkSuiteResources } from '../helpers/resources.js';
import { rblk } from '../cli/helpers/cli.js';
import { NQN, startNvmeDaemon } from './helpers/nvme-daemon.js';

checkSuiteResources(test);

test('the discovery log lists the listener and the subsystem, from the library and from rblk discover', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const id = defaultHostIdentity();
  const log = await discoverNvme({ address: '127.0.0.1', port: dmn.port, ...id });
  t.is(log.entries.length, 1);
  const e = log.entries[0];
  t.like(e, { trtype: 3, adrfam: 1, subtype: 2, trsvcid: String(dmn.port), traddr: '127.0.0.1', subnqn: NQN, cntlid: 0xffff });
  t.is(e.url, dmn.url());

  const r = await rblk(['discover', `nvme+tcp://127.0.0.1:${dmn.port}`]);
  t.is(r.code, 0, r.stderr);
  const lines = r.out.trimEnd().split('\n');
  t.regex(lines[0], /^TRTYPE\s+ADRFAM\s+SUBTYPE\s+PORTID\s+TRSVCID\s+TRADDR\s+SUBNQN\s+URL$/);
  t.deepEqual(lines[1].split(/\s{2,}/), ['tcp', 'ipv4', 'nvm', String(e.portid), String(dmn.port), '127.0.0.1', NQN, dmn.url()]);

  const j = await rblk(['discover', `nvme+tcp://127.0.0.1:${dmn.port}`, '--json']);
  t.is(j.code, 0, j.stderr);
  const parsed = JSON.parse(j.out) as { entries: { subnqn: string; url: string }[] };
  t.deepEqual(parsed.entries.map((x) => [x.subnqn, x.url]), [[NQN, dmn.url()]]);

  // With the subsystem in the path: its namespaces.
  const ns = await rblk(['discover', dmn.url()]);
  t.is(ns.code, 0, ns.stderr);
  const nsLines = ns.out.trimEnd().split('\n');
  t.regex(nsLines[0], /^NSID\s+SIZE\s+BLOCK\s+ACCESS\s+THIN\s+NGUID$/);
  t.deepEqual(nsLines[1].split(/\s{2,}/).slice(0, 5), ['1', '16 MiB', '512', 'rw', 'yes']);
  const nsJson = JSON.parse((await rblk(['discover', dmn.url(), '--json'])).out) as { subsystem: string; namespaces: { nsid: number; size: number }[] };
  t.is(nsJson.subsystem, NQN);
  t.deepEqual(nsJson.namespaces.map((n) => [n.nsid, n.size]), [[1, 16 << 20]]);

  const bad = await rblk(['discover', 'nvme+tcp://127.0.0.1:1/not-an-nqn']);
  t.not(bad.code, 0);
  t.regex(bad.stderr, /not an NQN/);
});
