// Results on stdout: aligned tables for people, one JSON document for scripts.

/** Left-aligned columns separated by two spaces; the first row is the header. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ')).join('\n') + '\n';
}

/** `key: value` lines with the values aligned. */
export function fields(pairs: readonly (readonly [string, string])[]): string {
  const w = Math.max(...pairs.map(([k]) => k.length)) + 1;
  return pairs.map(([k, v]) => `${`${k}:`.padEnd(w)} ${v}`).join('\n') + '\n';
}

export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
