// The report's "÷ transport ceiling" divides by the C RMA loop, never by our
// JavaScript one, which counts rblk's own addon and event loop as the limit.
import test from 'ava';
import { computeRatios, ratioTable } from '../../bench/peers/report.js';
import { WORKLOADS, type Measurement, type SystemKind, type SystemResult } from '../../bench/peers/workload.js';

const w = WORKLOADS[1]; // 4 KiB random read, QD32

function row(id: string, kind: SystemKind, iops: number): SystemResult {
  const m: Measurement = { workload: w.id, iops, mbps: (iops * w.blockSize) / 1e6, ios: iops, seconds: 1, cpu: [] };
  return { system: { id, label: id, kind, driver: 'test' }, measurements: [m] };
}

test('the ratio uses ceiling-c-tcp when both ceilings ran', (t) => {
  const systems = [row('ceiling-tcp', 'transport-ceiling', 80_000), row('ceiling-c-tcp', 'transport-ceiling', 120_000), row('rblk-lib-tcp', 'rblk', 30_000)];
  const [r] = computeRatios(systems, [w]);
  t.is(r.vsTransportCeiling, 0.25);
  t.regex(ratioTable({ ratios: [r], workloads: [w] }), /÷ transport ceiling \(C\)[\s\S]*\| 0\.25× \|/);
});

test('without the C ceiling the ratio is left empty, not taken from the JS loop', (t) => {
  const systems = [row('ceiling-tcp', 'transport-ceiling', 80_000), row('rblk-lib-tcp', 'rblk', 30_000)];
  const [r] = computeRatios(systems, [w]);
  t.is(r.vsTransportCeiling, undefined);
});

test("rblkd's iSCSI listener is divided by tgt (the same iscsi-perf client), beside the library row", (t) => {
  const systems = [row('tgt', 'peer', 40_000), row('rblk-iscsi', 'rblk', 50_000), row('rblk-lib-tcp', 'rblk', 30_000)];
  const [r] = computeRatios(systems, [w]);
  t.is(r.rblk, 'rblk-lib-tcp');
  t.is(r.iscsiVsTgt, 1.25);
  t.regex(ratioTable({ ratios: [r], workloads: [w] }), /iSCSI listener ÷ tgt[\s\S]*\| 0\.75× \| 1\.25× \|/);
});

test("rblkd's NVMe/TCP listener (through the library's NVMe/TCP host) is divided by its iSCSI listener", (t) => {
  const systems = [row('tgt', 'peer', 40_000), row('rblk-iscsi', 'rblk', 50_000), row('rblk-nvme', 'rblk', 60_000), row('rblk-lib-tcp', 'rblk', 30_000)];
  const [r] = computeRatios(systems, [w]);
  t.is(r.rblk, 'rblk-lib-tcp');
  t.is(r.nvmeVsIscsi, 1.2);
  t.regex(ratioTable({ ratios: [r], workloads: [w] }), /NVMe\/TCP listener ÷ iSCSI listener[\s\S]*\| 0\.75× \| 1\.25× \| 1\.20× \|/);
});
