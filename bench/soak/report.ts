// What one scenario tried and what it lost: a row of the soak's table (docs/reliability.md).
export interface SoakRow {
  scenario: string;
  runs: number;
  /** Writes, capsules, cycles, connections: whatever the scenario counts. */
  operations: number;
  /** Acknowledged writes (or fsync'd files) whose bytes were not there afterwards. */
  lost: number;
  /** rblkd exits that no kill or stop of ours caused. */
  daemonExits: number;
  /** Errors seen by the healthy session (or by the workload) meanwhile. */
  healthyErrors: number;
  fdsBefore?: number;
  fdsAfter?: number;
  rssBeforeKiB?: number;
  rssAfterKiB?: number;
  notes: string[];
  /** False when an outcome missed its goal (lost > 0, an exit, fds or RSS not back). */
  ok: boolean;
  skipped?: string;
}

export function newRow(scenario: string): SoakRow {
  return { scenario, runs: 0, operations: 0, lost: 0, daemonExits: 0, healthyErrors: 0, notes: [], ok: true };
}

function fdsRss(r: SoakRow): string {
  const parts: string[] = [];
  if (r.fdsBefore !== undefined && r.fdsAfter !== undefined) parts.push(`fds ${r.fdsBefore}→${r.fdsAfter}`);
  if (r.rssBeforeKiB !== undefined && r.rssAfterKiB !== undefined) {
    const pct = ((r.rssAfterKiB - r.rssBeforeKiB) / r.rssBeforeKiB) * 100;
    parts.push(`RSS ${(r.rssBeforeKiB / 1024).toFixed(1)}→${(r.rssAfterKiB / 1024).toFixed(1)} MiB (${pct >= 0 ? '+' : ''}${pct.toFixed(1)}%)`);
  }
  return parts.join(', ') || '—';
}

export function markdownTable(rows: SoakRow[]): string {
  const head = '| scenario | runs | operations | acknowledged writes lost | daemon exits | errors seen (healthy session) | fds/RSS before→after | result | notes |';
  const sep = '|---|---:|---:|---:|---:|---:|---|---|---|';
  const lines = rows.map((r) =>
    r.skipped !== undefined
      ? `| ${r.scenario} | — | — | — | — | — | — | skipped | ${r.skipped} |`
      : `| ${r.scenario} | ${r.runs} | ${r.operations} | ${r.lost} | ${r.daemonExits} | ${r.healthyErrors} | ${fdsRss(r)} | ${r.ok ? 'ok' : '**FAIL**'} | ${r.notes.join('; ').replace(/\|/g, '\\|').replace(/\n/g, ' ')} |`,
  );
  return [head, sep, ...lines].join('\n');
}

export function median(xs: number[]): number | undefined {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)];
}
