// The NVMe subsystem NQN (`nqn:`, docs/nvme.md "Configuration"): taken as
// written, refused when it is not an NQN, and absent by default, when the
// NVMe/TCP front end derives it from target_name (target/nvme/subsystem.ts).
import test from 'ava';
import { parseConfig } from '../../config/loader.js';
import { defaultNqn } from '../../target/nvme/subsystem.js';

const base = 'listeners:\n  - protocol: nvme-tcp\n    address: 127.0.0.1\nvolumes: []\n';

test('nqn: is taken as written', (t) => {
  const c = parseConfig(`nqn: nqn.2026-12.com.example:disks\n${base}`, 'rblkd.yaml', { stateDir: '/x' });
  t.is(c.nqn, 'nqn.2026-12.com.example:disks');
});

test('without nqn:, the NQN derives from target_name', (t) => {
  const c = parseConfig(`target_name: iqn.2026-11.io.rblk:disk1\n${base}`, 'rblkd.yaml', { stateDir: '/x' });
  t.is(c.nqn, undefined);
  t.is(defaultNqn(c.targetName), 'nqn.2014-08.io.rblk:2026-11.io.rblk:disk1');
});

test('an nqn: that is not an NQN is refused', (t) => {
  const e = t.throws(() => parseConfig(`nqn: iqn.2026-12.com.example:disks\n${base}`, 'rblkd.yaml', { stateDir: '/x' }));
  t.regex(e.message, /nqn/);
});

test('a volume\'s nsid: overrides LUN + 1; two volumes cannot share a namespace ID', (t) => {
  const vols = (v: string) => `listeners:\n  - protocol: nvme-tcp\n    address: 127.0.0.1\nvolumes:\n${v}`;
  const c = parseConfig(vols('  - { name: a, memory: true, size: 1MiB }\n  - { name: b, memory: true, size: 1MiB, nsid: 10 }\n'), 'rblkd.yaml', { stateDir: '/x' });
  t.is(c.volumes[0]!.nsid, undefined);
  t.is(c.volumes[1]!.nsid, 10);
  const e = t.throws(() => parseConfig(vols('  - { name: a, memory: true, size: 1MiB }\n  - { name: b, memory: true, size: 1MiB, nsid: 1 }\n'), 'rblkd.yaml', { stateDir: '/x' }));
  t.regex(e.message, /namespace ID 1 is already volume a's/);
});

test('discovery: true makes an nvme-tcp listener discovery-only, on 8009 by default; other front ends refuse it', (t) => {
  const c = parseConfig('listeners:\n  - { protocol: nvme-tcp, address: 127.0.0.1 }\n  - { protocol: nvme-tcp, address: 127.0.0.1, discovery: true }\nvolumes: []\n', 'rblkd.yaml', { stateDir: '/x' });
  t.deepEqual(
    c.listeners.map((l) => [l.port, l.discovery ?? false]),
    [
      [4420, false],
      [8009, true],
    ],
  );
  const e = t.throws(() => parseConfig('listeners:\n  - { protocol: iscsi, address: 127.0.0.1, discovery: true }\nvolumes: []\n', 'rblkd.yaml', { stateDir: '/x' }));
  t.regex(e.message, /iscsi listeners have no discovery-only mode \(only nvme-tcp listeners have\)/);
  const clash = t.throws(() => parseConfig('listeners:\n  - { protocol: nvme-tcp, address: 127.0.0.1, port: 8009 }\n  - { protocol: nvme-tcp, address: 127.0.0.1, discovery: true }\nvolumes: []\n', 'rblkd.yaml', { stateDir: '/x' }));
  t.regex(clash.message, /port 8009 overlaps/);
});
