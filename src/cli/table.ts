/**
 * The one table renderer behind every table the CLI prints: columns as wide as their widest cell,
 * two spaces apart, the first row the header. Columns listed in `right` are right-aligned (figures).
 */
export function renderTable(rows: readonly (readonly string[])[], options: { right?: readonly number[] } = {}): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  const right = new Set(options.right ?? []);
  return rows.map((row) => row.map((cell, i) => (right.has(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join('  ').trimEnd()).join('\n');
}
