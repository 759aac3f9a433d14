/** The value at the `p`th percentile of `values`: the one at index ⌊p% of the count⌋ once sorted. */
export const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;

export const median = (values: number[]) => percentile(values, 50);

/** Prints a Markdown table: the first `textColumns` columns aligned left, the figures after them right. */
export function printTable(header: string[], lines: string[][], textColumns: number) {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const row = (cells: string[]) =>
    `| ${cells.map((c, i) => (i < textColumns ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" | ")} |`;
  console.log(row(header));
  console.log(`|${widths.map((w, i) => (i < textColumns ? "-".repeat(w + 2) : `${"-".repeat(w + 1)}:`)).join("|")}|`);
  for (const line of lines) console.log(row(line));
}
