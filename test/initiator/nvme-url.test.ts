// nvme+tcp:// URLs (initiator/nvme/url.ts): paths, ports, the subsystem NQN,
// parameters, and what is refused with a RangeError.
import test from 'ava';
import { DISCOVERY_NQN } from '../../protocol/nvme/command.js';
import { isNvmeUrl, parseNvmeUrl } from '../../initiator/nvme/url.js';

const NQN = 'nqn.2026-12.io.rblk:disks';

test('one address, the default port, digests and host NQN', (t) => {
  t.deepEqual(parseNvmeUrl(`nvme+tcp://10.0.0.5/${NQN}`), { paths: [{ address: '10.0.0.5', port: 4420 }], subnqn: NQN, digests: { header: false, data: false } });
  const u = parseNvmeUrl(`nvme+tcp://10.0.0.5:4421/${NQN}?digest=header,data&hostnqn=nqn.2014-08.org.nvmexpress:uuid:x&queues=2`);
  t.deepEqual(u.digests, { header: true, data: true });
  t.is(u.hostnqn, 'nqn.2014-08.org.nvmexpress:uuid:x');
  t.is(u.queues, 2);
  t.is(u.paths[0].port, 4421);
  t.true(parseNvmeUrl(`nvme+tcp://h/${NQN}?sqflow=off`).disableSqFlowControl);
  t.false(parseNvmeUrl(`nvme+tcp://h/${NQN}?sqflow=on`).disableSqFlowControl);
  t.is(parseNvmeUrl(`nvme+tcp://h/${NQN}?nsid=7`).nsid, 7);
  t.is(parseNvmeUrl(`nvme+tcp://h/${NQN}`).nsid, undefined);
});

test('several paths, IPv6 in brackets, and no path: the discovery NQN', (t) => {
  t.deepEqual(parseNvmeUrl(`nvme+tcp://a:4420,[fe80::1]:4421,b/${NQN}`).paths, [
    { address: 'a', port: 4420 },
    { address: 'fe80::1', port: 4421 },
    { address: 'b', port: 4420 },
  ]);
  t.is(parseNvmeUrl('nvme+tcp://10.0.0.5:8009').subnqn, DISCOVERY_NQN);
  t.true(isNvmeUrl('NVME+TCP://x'));
  t.false(isNvmeUrl('rblk://x/vol'));
});

test('refused: not an NQN, a user, an unknown parameter, a bad port or digest, a repeated address', (t) => {
  for (const bad of [
    'nvme+tcp://h/disks',
    `nvme+tcp://user@h/${NQN}`,
    `nvme+tcp://h/${NQN}?secret=x`,
    `nvme+tcp://h:0/${NQN}`,
    `nvme+tcp://h:70000/${NQN}`,
    `nvme+tcp://h/${NQN}?digest=crc`,
    `nvme+tcp://h,h/${NQN}`,
    `nvme+tcp://h,,g/${NQN}`,
    `nvme+tcp://h/${NQN}/more`,
    `nvme+tcp://h/${NQN}?queues=0`,
    `nvme+tcp://h/${NQN}?sqflow=maybe`,
    `nvme+tcp://h/${NQN}?nsid=0`,
    `nvme+tcp://h/${NQN}?nsid=1.5`,
    `nvme+tcp://h/${NQN}?nsid=4294967295`,
    'rblk://h/vol',
  ]) {
    t.throws(() => parseNvmeUrl(bad), { instanceOf: RangeError }, bad);
  }
});
