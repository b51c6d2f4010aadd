// The volumes' qos key (docs/operations.md "QoS limits"): limits as written,
// sizes for bytes per second, burst_ms defaulted and inherited by initiator
// entries, clear refusals on the line at fault, warnings for limits that can
// never bind; a reload may change the limits of a served volume.
import test from 'ava';
import { parseConfig } from '../../config/loader.js';
import { planReload } from '../../target/daemon/reload-plan.js';

const parse = (qos: string) =>
  parseConfig(`volumes:\n  - name: v\n    memory: true\n    size: 1MiB\n    qos:\n${qos.replace(/^/gm, '      ')}\n`, 'rblkd.yaml', { stateDir: '/x' });

test('qos limits as written, bps as sizes, burst_ms 100 unless given, inherited by initiator entries', (t) => {
  const c = parse('iops: 1000\nread_iops: 600\nbps: 100MiB\nwrite_bps: 10MiB\ninitiators:\n  - initiator: "iqn.*:backup"\n    iops: 50\n  - initiator: host-a\n    bps: 1MiB\n    burst_ms: 20');
  t.deepEqual(c.volumes[0]!.qos, {
    iops: 1000,
    readIops: 600,
    bps: 100 * 1024 * 1024,
    writeBps: 10 * 1024 * 1024,
    burstMs: 100,
    initiators: [
      { initiator: 'iqn.*:backup', iops: 50, burstMs: 100 },
      { initiator: 'host-a', bps: 1024 * 1024, burstMs: 20 },
    ],
  });
  t.is(parseConfig('volumes:\n  - name: v\n    memory: true\n    size: 1MiB\n', 'rblkd.yaml', { stateDir: '/x' }).volumes[0]!.qos, undefined);
});

test('qos refuses what can never work, each on its line', (t) => {
  for (const [qos, why, line] of [
    ['iops: 0', /volumes\[0\]\.qos\.iops.*at least 1/, 6],
    ['iops: 1.5', /volumes\[0\]\.qos\.iops/, 6],
    ['bps: lots', /volumes\[0\]\.qos\.bps: invalid size 'lots'/, 6],
    ['bps: 100', /volumes\[0\]\.qos\.bps: must be at least 4 KiB per second, not 100 bytes/, 6],
    ['burst_ms: -1', /volumes\[0\]\.qos\.burst_ms.*at least 0/, 6],
    ['iops_max: 5', /volumes\[0\]\.qos.*iops_max/, 6],
    ['initiators:\n  - initiator: "bad name"\n    iops: 5', /initiator.*must be an initiator name or a glob/, 7],
    ['initiators:\n  - initiator: host-a', /volumes\[0\]\.qos\.initiators\[0\]: names no limit/, 7],
    ['initiators:\n  - initiator: host-a\n    iops: 5\n  - initiator: host-a\n    iops: 6', /initiators\[1\]\.initiator: 'host-a' is already qos\.initiators\[0\]/, 9],
  ] as const) {
    const e = t.throws(() => parse(qos), undefined, qos);
    t.regex(e?.message ?? '', why, qos);
    t.regex(e?.message ?? '', new RegExp(`rblkd\\.yaml:${line}`), qos);
  }
});

test('qos warns of a direction limit above the total and of a key with no limit', (t) => {
  t.deepEqual(
    parse('iops: 100\nwrite_iops: 200').warnings.map((w) => w.message),
    ['is above iops (100) and can never bind'],
  );
  t.deepEqual(
    parse('burst_ms: 50').warnings.map((w) => w.message),
    ['names no limit: the volume is not limited'],
  );
});

test('a reload may change a served volume\'s qos', (t) => {
  t.deepEqual(planReload(parse('iops: 1000'), parse('iops: 500\nbps: 1MiB')).refusals, []);
});
