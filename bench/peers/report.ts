// The run's output: a Markdown report (one table per workload, then the
// ratios), the same figures as JSON, and an SVG chart of IOPS against queue
// depth drawn by hand (no plotting package), one line per system.
import { clientCpuPerIoUs, cpuPerIoUs, serverSwitchesPerIo, type Measurement, type SystemResult, type Workload } from './workload.js';

export interface MachineFacts {
  readonly [fact: string]: string;
}

export interface Ratio {
  readonly workload: string;
  /** The rblk row the ratios are about (the library over tcp, else the session layer). */
  readonly rblk: string;
  readonly rblkIops: number;
  /** IOPS of rblk ÷ IOPS of the other; above 1, rblk is faster. */
  readonly vsTgt?: number;
  readonly vsNbdkit?: number;
  /** rblkd's iSCSI listener ÷ tgt: the same client (iscsi-perf) on both. */
  readonly iscsiVsTgt?: number;
  /** rblkd's NVMe/TCP listener through the library's NVMe/TCP host ÷ rblkd's iSCSI listener (different clients: the library's loop, iscsi-perf). */
  readonly nvmeVsIscsi?: number;
  /** rblk attach's NBD export ÷ nbdkit: the same client (fio's nbd engine) on both. */
  readonly nbdVsNbdkit?: number;
  /** Against the C RMA loop (bench/ceiling), not our JavaScript one. */
  readonly vsTransportCeiling?: number;
  /** Against the best local fio row for the workload. */
  readonly vsStorageCeiling?: number;
  /** CPU per I/O of rblk ÷ the other's (all processes); below 1, rblk is cheaper. */
  readonly cpuVsTgt?: number;
  readonly cpuVsNbdkit?: number;
}

export interface Report {
  readonly date: string;
  readonly command: string;
  readonly elapsedSeconds: number;
  readonly secondsPerMeasurement: number;
  readonly fileSize: number;
  readonly machine: MachineFacts;
  readonly workloads: readonly Workload[];
  readonly systems: readonly SystemResult[];
  readonly ratios: readonly Ratio[];
}

function find(systems: readonly SystemResult[], id: string, workload: string): Measurement | undefined {
  return systems.find((s) => s.system.id === id)?.measurements.find((m) => m.workload === workload);
}

function div(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined || b === 0 || !Number.isFinite(a) || !Number.isFinite(b) ? undefined : a / b;
}

export function computeRatios(systems: readonly SystemResult[], workloads: readonly Workload[]): Ratio[] {
  const out: Ratio[] = [];
  for (const w of workloads) {
    // The iSCSI row stands in only when neither library nor session row ran (then only its ratio to tgt is filled).
    const rblkId = ['rblk-lib-tcp', 'rblk-session-tcp', 'rblk-iscsi', 'rblk-nvme'].find((id) => find(systems, id, w.id) !== undefined);
    if (rblkId === undefined) continue;
    const r = find(systems, rblkId, w.id)!;
    const tgt = find(systems, 'tgt', w.id);
    const nbdkit = find(systems, 'nbdkit', w.id);
    const nbd = find(systems, 'rblk-nbd-tcp', w.id);
    const iscsi = find(systems, 'rblk-iscsi', w.id);
    const nvme = find(systems, 'rblk-nvme', w.id);
    // The C loop: the JavaScript one would count our own code as part of the limit.
    const ceiling = find(systems, 'ceiling-c-tcp', w.id);
    const local = systems.filter((s) => s.system.kind === 'storage-ceiling').map((s) => find(systems, s.system.id, w.id)?.iops ?? 0);
    const best = local.length > 0 ? Math.max(...local) : 0;
    out.push({
      workload: w.id,
      rblk: rblkId,
      rblkIops: r.iops,
      vsTgt: div(r.iops, tgt?.iops),
      vsNbdkit: div(r.iops, nbdkit?.iops),
      iscsiVsTgt: div(iscsi?.iops, tgt?.iops),
      nvmeVsIscsi: div(nvme?.iops, iscsi?.iops),
      nbdVsNbdkit: div(nbd?.iops, nbdkit?.iops),
      vsTransportCeiling: div(r.iops, ceiling?.iops),
      vsStorageCeiling: best > 0 ? r.iops / best : undefined,
      cpuVsTgt: div(cpuPerIoUs(r), tgt && cpuPerIoUs(tgt)),
      cpuVsNbdkit: div(cpuPerIoUs(r), nbdkit && cpuPerIoUs(nbdkit)),
    });
  }
  return out;
}

export function fmt(n: number | undefined, digits = 1): string {
  if (n === undefined || !Number.isFinite(n)) return '';
  return n >= 1000 ? Math.round(n).toLocaleString('en-US') : n.toFixed(digits);
}

function ratio(n: number | undefined): string {
  return n === undefined ? '' : `${n.toFixed(2)}×`;
}

function cpuBreakdown(m: Measurement): string {
  return m.cpu.map((c) => `${c.process} ${Math.round(c.cpuMs)}`).join(', ');
}

/** One line, and no '|': a reason may quote a program's multi-line stderr. */
function cell(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
}

function perIo(n: number | undefined): string {
  return n === undefined ? '' : n.toFixed(1);
}

export function workloadTables(r: Pick<Report, 'systems' | 'workloads'>): string {
  const out: string[] = [];
  for (const w of r.workloads) {
    out.push(`#### ${w.label}`, '');
    out.push(
      '| system | driver | IOPS | MB/s | p50 µs | p99 µs | mean µs | CPU µs/I/O | client CPU µs/I/O | server switches/I/O | CPU ms by process |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const s of r.systems) {
      const m = s.measurements.find((x) => x.workload === w.id);
      const head = `| ${s.system.label} | ${s.system.driver} |`;
      if (m) {
        out.push(`${head} ${fmt(m.iops)} | ${fmt(m.mbps)} | ${fmt(m.p50us)} | ${fmt(m.p99us)} | ${fmt(m.meanUs)}${m.p50us === undefined ? '¹' : ''} | ${fmt(cpuPerIoUs(m))} | ${perIo(clientCpuPerIoUs(m))} | ${perIo(serverSwitchesPerIo(m))} | ${cpuBreakdown(m)} |`);
      } else {
        const why = s.unavailable ?? s.skipped?.[w.id] ?? 'not run';
        out.push(`${head} — | | | | | | | | ${cell(why)} |`);
      }
    }
    out.push('');
  }
  out.push("¹ iscsi-perf reports throughput only: the mean is Little's law (queue depth ÷ IOPS).", '');
  return out.join('\n');
}

export function ratioTable(r: Pick<Report, 'ratios' | 'workloads'>): string {
  const label = new Map(r.workloads.map((w) => [w.id, w.label]));
  const out = [
    '| workload | rblk row | rblk IOPS | ÷ tgt | iSCSI listener ÷ tgt | NVMe/TCP listener ÷ iSCSI listener | ÷ nbdkit | NBD export ÷ nbdkit | ÷ transport ceiling (C) | ÷ storage ceiling | CPU/I/O ÷ tgt | CPU/I/O ÷ nbdkit |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const x of r.ratios)
    out.push(
      `| ${label.get(x.workload) ?? x.workload} | ${x.rblk} | ${fmt(x.rblkIops)} | ${ratio(x.vsTgt)} | ${ratio(x.iscsiVsTgt)} | ${ratio(x.nvmeVsIscsi)} | ${ratio(x.vsNbdkit)} | ${ratio(x.nbdVsNbdkit)} | ${ratio(x.vsTransportCeiling)} | ${ratio(x.vsStorageCeiling)} | ${ratio(x.cpuVsTgt)} | ${ratio(x.cpuVsNbdkit)} |`,
    );
  return out.join('\n');
}

export function toMarkdown(r: Report): string {
  const unavailable = r.systems.filter((s) => s.unavailable !== undefined).map((s) => `- ${s.system.label}: ${cell(s.unavailable ?? '')}`);
  return [
    `### Run of ${r.date.slice(0, 10)} (${r.secondsPerMeasurement} s per measurement, ${Math.round(r.elapsedSeconds)} s in all)`,
    '',
    `Command: \`${r.command}\``,
    '',
    'Machine: ' + Object.entries(r.machine).map(([k, v]) => `${k} ${v}`).join('; ') + '.',
    '',
    ...(unavailable.length > 0 ? ['Not measured in this run:', ...unavailable, ''] : []),
    '#### Ratios',
    '',
    'IOPS ratios above 1 and CPU ratios below 1 favour rblk. CPU per I/O sums every process of the system (client, server, daemon).',
    'Server switches per I/O: context switches of the serving processes (all threads), i.e. how many times serving one I/O put a thread to sleep and woke it.',
    '',
    ratioTable(r),
    '',
    workloadTables(r),
  ].join('\n');
}

// ---- the chart ----

const COLOURS = ['#d62728', '#ff7f0e', '#8c564b', '#e377c2', '#1f77b4', '#2ca02c', '#17becf', '#9467bd', '#7f7f7f', '#bcbd22', '#393b79', '#637939'];

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

interface Series {
  label: string;
  colour: string;
  dashed: boolean;
  /** rblk's own lines are drawn heavier. */
  bold: boolean;
  points: { qd: number; iops: number }[];
}

function seriesFor(systems: readonly SystemResult[], workloads: readonly Workload[], pattern: Workload['pattern']): Series[] {
  const ws = workloads.filter((w) => w.pattern === pattern && w.blockSize === 4096);
  const out: Series[] = [];
  systems.forEach((s, i) => {
    const points = ws
      .map((w) => ({ qd: w.queueDepth, m: s.measurements.find((m) => m.workload === w.id) }))
      .filter((p): p is { qd: number; m: Measurement } => p.m !== undefined)
      .map((p) => ({ qd: p.qd, iops: p.m.iops }))
      .sort((a, b) => a.qd - b.qd);
    const kind = s.system.kind;
    if (points.length > 0) out.push({ label: s.system.label, colour: COLOURS[i % COLOURS.length], dashed: kind !== 'rblk' && kind !== 'peer', bold: kind === 'rblk', points });
  });
  return out;
}

function panel(x0: number, y0: number, w: number, h: number, title: string, series: Series[], qds: number[], yMin: number, yMax: number): string[] {
  const lx = (qd: number): number => x0 + (Math.log2(qd) / Math.log2(Math.max(2, qds[qds.length - 1]))) * w;
  const ly = (v: number): number => y0 + h - ((Math.log10(Math.max(v, yMin)) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin))) * h;
  const out: string[] = [];
  out.push(`<text x="${x0 + w / 2}" y="${y0 - 12}" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`);
  out.push(`<rect x="${x0}" y="${y0}" width="${w}" height="${h}" fill="none" stroke="#888"/>`);
  for (let e = Math.log10(yMin); e <= Math.log10(yMax) + 1e-9; e++) {
    const v = 10 ** e;
    const y = ly(v);
    out.push(`<line x1="${x0}" y1="${y}" x2="${x0 + w}" y2="${y}" stroke="#ddd"/>`);
    out.push(`<text x="${x0 - 6}" y="${y + 4}" text-anchor="end" font-size="11">${v >= 1000 ? `${v / 1000}K` : v}</text>`);
  }
  for (const qd of qds) {
    const x = lx(qd);
    out.push(`<line x1="${x}" y1="${y0}" x2="${x}" y2="${y0 + h}" stroke="#eee"/>`);
    out.push(`<text x="${x}" y="${y0 + h + 16}" text-anchor="middle" font-size="11">${qd}</text>`);
  }
  out.push(`<text x="${x0 + w / 2}" y="${y0 + h + 34}" text-anchor="middle" font-size="12">queue depth</text>`);
  out.push(`<text x="${x0 - 46}" y="${y0 + h / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 ${x0 - 46} ${y0 + h / 2})">IOPS (log scale)</text>`);
  for (const s of series) {
    const pts = s.points.map((p) => `${lx(p.qd).toFixed(1)},${ly(p.iops).toFixed(1)}`);
    if (pts.length > 1) out.push(`<polyline points="${pts.join(' ')}" fill="none" stroke="${s.colour}" stroke-width="${s.bold ? 3 : 1.5}"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    for (const p of s.points) out.push(`<circle cx="${lx(p.qd).toFixed(1)}" cy="${ly(p.iops).toFixed(1)}" r="3.5" fill="${s.colour}"/>`);
  }
  return out;
}

/** IOPS against queue depth, 4 KiB random read and write side by side. */
export function toSvg(systems: readonly SystemResult[], workloads: readonly Workload[], title: string): string {
  const read = seriesFor(systems, workloads, 'randread');
  const write = seriesFor(systems, workloads, 'randwrite');
  const all = [...read, ...write].flatMap((s) => s.points.map((p) => p.iops)).filter((v) => v > 0);
  const yMin = 10 ** Math.floor(Math.log10(Math.max(1, Math.min(...all, 1e9))));
  const yMax = 10 ** Math.ceil(Math.log10(Math.max(10, ...all)));
  const qds = [...new Set(workloads.filter((w) => w.blockSize === 4096).map((w) => w.queueDepth))].sort((a, b) => a - b);
  // One legend entry per system, in the order systems ran.
  const legend = new Map<string, Series>();
  for (const s of [...read, ...write]) if (!legend.has(s.label)) legend.set(s.label, s);
  const W = 1000;
  const plotH = 300;
  const legendTop = 60 + plotH + 60;
  const H = legendTop + Math.ceil(legend.size / 2) * 20 + 20;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="16" font-weight="bold">${esc(title)}</text>`,
    ...panel(80, 60, 380, plotH, '4 KiB random read', read, qds, yMin, yMax),
    ...panel(580, 60, 380, plotH, '4 KiB random write', write, qds, yMin, yMax),
  ];
  [...legend.values()].forEach((s, i) => {
    const x = 80 + (i % 2) * 460;
    const y = legendTop + Math.floor(i / 2) * 20;
    out.push(`<line x1="${x}" y1="${y}" x2="${x + 28}" y2="${y}" stroke="${s.colour}" stroke-width="${s.bold ? 3 : 1.5}"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    out.push(`<circle cx="${x + 14}" cy="${y}" r="3.5" fill="${s.colour}"/>`);
    out.push(`<text x="${x + 36}" y="${y + 4}" font-size="12">${esc(s.label)}</text>`);
  });
  out.push(`<text x="${W - 10}" y="${H - 6}" text-anchor="end" font-size="10" fill="#666">heavy: rblk; dashed: ceilings (transport RMA loops in C and JS, local fio)</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}
