import test from 'ava';
import type { Config, VolumeConfig } from '../../config/schema.js';
import { listenerKey, planReload, volumeRefusals } from '../../target/daemon/reload-plan.js';

const MiB = 1024 * 1024;

function vol(name: string, lun: number, o: Partial<VolumeConfig> = {}): VolumeConfig {
  return { name, lun, backing: { kind: 'file', path: `/srv/${name}.img`, size: 4 * MiB }, blockSize: 512, readOnly: false, direct: false, ioEngine: 'auto', thin: false, ...o };
}

function config(volumes: VolumeConfig[], ports: number[] = [7471]): Config {
  return {
    source: 'rblkd.yaml',
    targetName: 'iqn.2026-11.io.rblk:target',
    listeners: ports.map((port) => ({ protocol: 'rblk', provider: 'tcp', address: '127.0.0.1', port })),
    volumes,
    auth: { required: false, initiators: [] },
    limits: { queueDepth: 128, maxIo: MiB, inCapsuleData: 8192, maxSessions: 64, keepaliveMs: 5000, drainTimeoutMs: 10000, loginTimeoutMs: 10000, preLoginConnections: 64, preLoginPerSource: 16, connectionMemory: 4 * MiB },
    logging: { level: 'info', format: 'text' },
    control: { socket: null, explicit: true },
    metrics: null,
    stateDir: '/var/lib/rblk',
    volumesDir: '/etc/rblk/volumes.d',
    luns: { file: '/var/lib/rblk/luns.json', entries: new Map(), changed: false },
    fastPath: true,
    reactors: 'auto',
    busyPollMicros: 0,
    alua: null,
    warnings: [],
  };
}

test('added, removed and kept volumes and listeners are told apart by name and by provider, address and port', (t) => {
  const plan = planReload(config([vol('a', 0), vol('c', 2)], [7471, 7472]), config([vol('a', 0, { backing: { kind: 'file', path: '/srv/a.img', size: 8 * MiB } }), vol('b', 1)], [7472, 7473]));
  t.deepEqual(plan.refusals, []);
  t.deepEqual(plan.added.map((v) => v.name), ['b']);
  t.deepEqual(plan.removed.map((v) => v.name), ['c']);
  t.deepEqual(plan.kept.map((k) => [k.from.name, k.to.backing]), [['a', { kind: 'file', path: '/srv/a.img', size: 8 * MiB }]]);
  t.deepEqual(plan.listenersAdded.map(listenerKey), ['tcp 127.0.0.1:7473']);
  t.deepEqual(plan.listenersRemoved.map(listenerKey), ['tcp 127.0.0.1:7471']);
});

test('an ACL change is allowed; fixed properties of a served volume are refused with the way out', (t) => {
  t.deepEqual(volumeRefusals(vol('a', 0), vol('a', 0, { acl: [{ initiator: 'h*', access: 'ro' }] })), []);
  const refusals = volumeRefusals(
    vol('a', 0),
    vol('a', 3, { backing: { kind: 'file', path: '/srv/other.img', size: 4 * MiB }, blockSize: 4096, readOnly: true, uuid: '6f1c2b1e-8d7a-4c1f-9b2e-3a4d5e6f7a8b' }),
  );
  const tail = ' while it is served (remove it in one reload and add it back in the next)';
  t.deepEqual(refusals, [
    `volume a: the backing store cannot change from file /srv/a.img to file /srv/other.img${tail}`,
    `volume a: lun cannot change from 0 to 3${tail}`,
    `volume a: block_size cannot change from 512 to 4096${tail}`,
    `volume a: read_only cannot change from false to true${tail}`,
    `volume a: uuid cannot change from (generated) to 6f1c2b1e-8d7a-4c1f-9b2e-3a4d5e6f7a8b${tail}`,
  ]);
});

test('a RAM volume may grow but not shrink', (t) => {
  const ram = (size: number) => vol('m', 0, { backing: { kind: 'memory', size } });
  t.deepEqual(volumeRefusals(ram(4 * MiB), ram(8 * MiB)), []);
  t.deepEqual(volumeRefusals(ram(8 * MiB), ram(4 * MiB)), [
    'volume m: size cannot shrink from 8 MiB to 4 MiB; rblkd never shrinks a volume (remove it in one reload and add it back in the next)',
  ]);
});

test('planReload collects the refusals of every kept volume', (t) => {
  const plan = planReload(config([vol('a', 0), vol('b', 1)]), config([vol('a', 0, { thin: true }), vol('b', 1, { direct: true })]));
  t.is(plan.refusals.length, 2);
  t.regex(plan.refusals[0], /^volume a: thin cannot change from false to true/);
  t.regex(plan.refusals[1], /^volume b: direct cannot change from false to true/);
});

test('the I/O engine of a served volume cannot change on reload', (t) => {
  const plan = planReload(config([vol('a', 0)]), config([vol('a', 0, { ioEngine: 'threads' })]));
  t.deepEqual(plan.refusals, ['volume a: io_engine cannot change from auto to threads while it is served (remove it in one reload and add it back in the next)']);
});

test("an rbd volume's fast_path cannot change on reload: it is published when the volume opens", (t) => {
  const rbd = (fastPath: boolean) => vol('r', 0, { backing: { kind: 'rbd', pool: 'rbd', image: 'img', timeoutSeconds: 30, fastPath } });
  t.deepEqual(volumeRefusals(rbd(false), rbd(false)), []);
  t.deepEqual(volumeRefusals(rbd(true), rbd(false)), [
    'volume r: rbd.fast_path cannot change from true to false while it is served (remove it in one reload and add it back in the next)',
  ]);
});

test('the NVMe namespace ID (nsid:) of a served volume cannot change on reload', (t) => {
  t.deepEqual(volumeRefusals(vol('a', 0), vol('a', 0, { nsid: 9 })), [
    'volume a: nsid cannot change from (LUN + 1) to 9 while it is served (remove it in one reload and add it back in the next)',
  ]);
  t.deepEqual(volumeRefusals(vol('a', 0, { nsid: 9 }), vol('a', 0, { nsid: 9, acl: [] })), []);
});
