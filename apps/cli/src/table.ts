import { printable } from './printable.js';

/** A plain-text table with aligned columns, for terminals and logs alike. */
export function table(headers: string[], rows: Array<Array<string | number | undefined>>): string {
  // Cells hold board and agent text: printed, never obeyed (printable.ts).
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === undefined ? '-' : printable(String(c)))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(cells[0]!), line(widths.map((w) => '-'.repeat(w))), ...cells.slice(1).map(line)].join('\n');
}
